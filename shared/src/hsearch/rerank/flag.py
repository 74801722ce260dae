"""The FlagEmbedding cross-encoder: a ``FlagReranker`` loaded from a local directory.

It is, with :mod:`hsearch.embedding.bge_m3`, the only code that touches FlagEmbedding,
which it imports when an adapter is built, so importing this module stays cheap; the
untyped library stops here and callers get ``list[float]``. Production model:
BAAI/bge-reranker-v2-m3, an ``XLMRobertaForSequenceClassification`` with one label.
The checks of a checkpoint directory (:func:`missing_reranker_files`,
:func:`reranker_config_problems`) run before FlagEmbedding sees a path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from hsearch.embedding.fingerprint import fingerprint, missing_checkpoint_files
from hsearch.embedding.model_thread import load_on_model_thread, run_on_model_thread
from hsearch.errors import EncoderError
from hsearch.rerank.protocol import check_passages

__all__ = ["FlagRerankerAdapter", "missing_reranker_files", "reranker_config_problems"]

# Weight files transformers can load, in its order of preference.
_WEIGHT_FILES: Final = ("model.safetensors", "pytorch_model.bin")
# The tokenizer: a fast tokenizer file or the original SentencePiece model.
_TOKENIZER_FILES: Final = ("tokenizer.json", "sentencepiece.bpe.model")
_REQUIRED_FILES: Final = ("config.json", "tokenizer_config.json")

# Model types whose position ids start after the padding index (RoBERTa's scheme), so
# they hold ``max_position_embeddings - pad_token_id - 1`` tokens (514 positions: 512).
_PADDING_OFFSET_MODELS: Final = frozenset({"xlm-roberta", "roberta", "camembert"})

# transformers' default when a config names no labels: two, i.e. two logits per pair.
_DEFAULT_NUM_LABELS: Final = 2


_MIN_MAX_LENGTH: Final = 16


def missing_reranker_files(path: Path) -> list[str]:
    """Which files a cross-encoder checkpoint needs are absent from ``path`` (empty: complete).

    Alternatives are listed as ``a|b`` (either will do).
    """
    return missing_checkpoint_files(
        path, required=_REQUIRED_FILES, alternatives=(_WEIGHT_FILES, _TOKENIZER_FILES)
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def reranker_config_problems(path: Path, *, max_length: int) -> list[str]:
    """Why the complete checkpoint at ``path`` cannot serve as a one-logit cross-encoder.

    transformers would load an encoder without a classification head (a BGE-M3
    directory, say) with a *randomly initialised* head and only log it; a config with
    several labels gives several logits per pair. Both are caught here, at start-up.
    """
    config_file = path / "config.json"
    try:
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return [f"{config_file} is unreadable: {exc}"]
    if not isinstance(config, dict):
        return [f"{config_file} is not a JSON object"]
    problems: list[str] = []
    architectures = config.get("architectures")
    if not (
        isinstance(architectures, list)
        and any(str(a).endswith("ForSequenceClassification") for a in architectures)
    ):
        problems.append(
            f"{config_file} declares architectures {architectures!r}; a reranker is a "
            "*ForSequenceClassification model (a cross-encoder such as bge-reranker-v2-m3)"
        )
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) else _int(config.get("num_labels"))
    if num_labels is None:
        num_labels = _DEFAULT_NUM_LABELS
    if num_labels != 1:
        problems.append(f"{config_file} has {num_labels} labels; a reranker has exactly 1")
    positions = _int(config.get("max_position_embeddings"))
    if positions is not None:
        if config.get("model_type") in _PADDING_OFFSET_MODELS:
            positions -= (_int(config.get("pad_token_id")) or 0) + 1
        if max_length > positions:
            problems.append(f"max_length={max_length} exceeds the model's {positions} positions")
    return problems


def _fingerprint(path: Path, *, max_length: int) -> str:
    """Stable digest of the files loaded and of ``max_length`` (truncation changes scores)."""
    weights = next(path / name for name in _WEIGHT_FILES if (path / name).is_file())
    tokenizer = [path / name for name in (*_TOKENIZER_FILES, "special_tokens_map.json")]
    files = (
        path / "config.json",
        path / "tokenizer_config.json",
        *(f for f in tokenizer if f.is_file()),
        weights,
    )
    return fingerprint(((f.name, f) for f in files), extra=f"max_length={max_length}")


class FlagRerankerAdapter:
    """A FlagEmbedding ``FlagReranker`` cross-encoder from a local directory.

    Scores are the model's raw logits (``normalize=False``): higher is better, the scale
    is the model's own. Pairs are truncated to ``max_length`` tokens (the query to at most
    three quarters of it, FlagEmbedding's rule; the passage gives way first).

    The model is loaded when the adapter is built, not on first use: a broken checkpoint
    then fails at start-up, and the first request does not pay seconds of loading.
    """

    def __init__(
        self,
        path: Path,
        *,
        device: str = "cpu",
        batch_size: int = 32,
        max_length: int = 512,
    ) -> None:
        if batch_size < 1:
            msg = f"batch_size must be >= 1, got {batch_size}"
            raise ValueError(msg)
        if max_length < _MIN_MAX_LENGTH:
            msg = f"max_length must be >= {_MIN_MAX_LENGTH}, got {max_length}"
            raise ValueError(msg)
        # Checked before FlagEmbedding sees the path: given a path that does not exist it
        # would try to download a model of that name from the Hugging Face Hub.
        missing = missing_reranker_files(path)
        if missing:
            msg = f"{path} is not a complete reranker checkpoint; missing: {', '.join(missing)}"
            raise EncoderError(msg)
        problems = reranker_config_problems(path, max_length=max_length)
        if problems:
            msg = f"{path} cannot be used as a reranker: {'; '.join(problems)}"
            raise EncoderError(msg)
        self._batch_size = batch_size
        self._max_length = max_length
        try:
            self._name = f"flag-reranker:{_fingerprint(path, max_length=max_length)}"
            # Loaded, and called, on the process's model thread (one OpenMP pool; one
            # forward pass at a time).
            load_on_model_thread(self._load, path, device=device)
            self._query_max_length = self._model.query_max_length or max_length * 3 // 4
        except Exception as exc:
            msg = f"cannot load the reranker from {path}: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc

    def _load(self, path: Path, *, device: str) -> None:
        from FlagEmbedding import FlagReranker  # noqa: PLC0415  (heavy: torch, transformers)

        self._model: Any = FlagReranker(
            str(path.resolve()),
            use_fp16=device != "cpu",  # fp16 kernels are slow or missing on CPU
            devices=device,
            batch_size=self._batch_size,
            max_length=self._max_length,
            normalize=False,
        )
        # Set once (compute_score would redo it on every call).
        import torch  # noqa: PLC0415  (heavy; loaded with FlagEmbedding above)
        from FlagEmbedding.utils.tokenizer_compat import (  # noqa: PLC0415
            pad_with_compat,
            prepare_for_model_compat,
        )

        self._torch: Any = torch
        self._pad: Any = pad_with_compat
        self._pair: Any = prepare_for_model_compat
        self._device = self._model.target_devices[0]
        if self._device != "cpu":
            self._model.model.half()
        self._model.model.to(self._device)
        self._model.model.eval()

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Score ``passages`` against ``query`` in batches of ``batch_size``; raw logits."""
        check_passages(passages)
        scores: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            scores.extend(self._score(query, list(passages[start : start + self._batch_size])))
        return scores

    def _forward(self, query: str, batch: list[str]) -> list[float]:
        """:meth:`_score`'s steps on the model thread: the raw logits."""
        tokenizer = self._model.tokenizer
        with self._torch.inference_mode():
            query_ids = tokenizer(
                [query],
                add_special_tokens=False,
                max_length=self._query_max_length,
                truncation=True,
            )["input_ids"][0]
            passage_ids = tokenizer(
                batch, add_special_tokens=False, max_length=self._max_length, truncation=True
            )["input_ids"]
            pairs = [
                self._pair(
                    tokenizer,
                    query_ids,
                    ids,
                    truncation="only_second",
                    max_length=self._max_length,
                    padding=False,
                )
                for ids in passage_ids
            ]
            inputs = self._pad(tokenizer, pairs, padding=True, return_tensors="pt").to(self._device)
            logits = self._model.model(**inputs, return_dict=True).logits.view(-1).float()
            return [float(value) for value in logits.cpu().numpy().tolist()]

    def _score(self, query: str, batch: list[str]) -> list[float]:
        """One forward pass of the cross-encoder for ``batch``.

        Not ``FlagReranker.compute_score``: version 1.4.2 first runs the longest pairs of
        every call once to find a batch size that fits the device, so each call computed
        its first batch twice. The steps here are compute_score's for one batch: the
        query (cut at three quarters of ``max_length``) and each passage tokenized
        without special tokens, joined into a pair cut to ``max_length`` on the passage
        side, padded, one forward pass, the raw logits; a test checks they equal
        compute_score's.
        """
        try:
            scores = run_on_model_thread(self._forward, query, batch)
        except Exception as exc:
            msg = f"reranking failed: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc
        if len(scores) != len(batch):
            msg = f"the reranker returned {len(scores)} scores for {len(batch)} passages"
            raise EncoderError(msg)
        if not all(math.isfinite(value) for value in scores):
            # fp16 overflow, or broken weights: an order built on these would be noise.
            msg = "the reranker returned a non-finite score"
            raise EncoderError(msg)
        return scores
