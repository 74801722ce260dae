"""Rerank: a cross-encoder re-scores the fused candidates, reading query and passage together.

The optional last ranking step of the search path. The first stage (dense + sparse legs,
fused) is cheap but judges query and passage apart; a cross-encoder reads each
``(query, passage)`` pair through one transformer and scores how well the passage answers
the query, which is slower and better. It therefore sees only the top few fused hits.

- :class:`Reranker` is the interface the search service types against.
- :class:`FlagRerankerAdapter` runs a FlagEmbedding ``FlagReranker`` (production model:
  BAAI/bge-reranker-v2-m3, an ``XLMRobertaForSequenceClassification`` with one label).
  It is, with :mod:`hsearch.embedding.bge_m3`, the only code that touches FlagEmbedding,
  which it imports when built, so importing this module stays cheap; the untyped library
  stops there and callers get ``list[float]``.
- :class:`FakeReranker` scores by query-term overlap, for unit tests.
- :func:`rerank` (pure) orders hits by their new scores.
- :func:`create_reranker` builds the configured reranker, or none.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from hsearch.embedding.fingerprint import fingerprint, missing_checkpoint_files
from hsearch.errors import ConfigurationError, EncoderError
from hsearch.lexical.analyzer import ANALYZER_VERSION, analyze

__all__ = [
    "FakeReranker",
    "FlagRerankerAdapter",
    "Reranker",
    "create_reranker",
    "missing_reranker_files",
    "rerank",
]

_T = TypeVar("_T")

_MODEL_PATH_SETTING: Final = "HSEARCH_RERANK__MODEL_PATH"

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


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query; higher means more relevant."""

    @property
    def name(self) -> str:
        """Identifies the scorer: the model and its weights (changes when scores would)."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in order (batched inside); ``[]`` for ``[]``."""
        ...


def rerank(hits: Sequence[_T], scores: Sequence[float]) -> list[tuple[_T, float]]:
    """Pair each hit with its score, best first; equal scores keep the hits' original order.

    ``scores[i]`` belongs to ``hits[i]``. Raises :class:`ValueError` when the lengths
    differ or a score is NaN (which has no place in an order).
    """
    if len(hits) != len(scores):
        msg = f"rerank needs one score per hit: got {len(scores)} scores for {len(hits)} hits"
        raise ValueError(msg)
    values = [float(score) for score in scores]
    if any(math.isnan(value) for value in values):
        msg = "rerank scores must be numbers (finite or infinite), not NaN"
        raise ValueError(msg)
    # sorted() is stable, also with reverse=True: ties stay in their original order.
    return sorted(zip(hits, values, strict=True), key=itemgetter(1), reverse=True)


def _check_passages(passages: Sequence[str]) -> None:
    # A str is a Sequence[str] too; scoring it would score each of its characters.
    if isinstance(passages, str):
        msg = "passages must be a sequence of strings, not one string"
        raise TypeError(msg)


class FakeReranker:
    """Deterministic scorer with no model: the number of distinct query terms a passage holds.

    Terms come from :func:`hsearch.lexical.analyzer.analyze`, the analysis of the sparse
    leg, so ``"Tokyo"`` matches ``"TOKYO"`` and Japanese matches by character bigrams.
    Scores are whole numbers, so ties are common: handy for testing tie-breaks.
    ``calls`` counts :meth:`score` calls (a test can check that rerank was skipped).
    """

    def __init__(self) -> None:
        self.calls = 0

    @property
    def name(self) -> str:
        return f"fake-reranker:{ANALYZER_VERSION}"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Distinct query terms found in each passage, as floats."""
        _check_passages(passages)
        self.calls += 1
        terms = set(analyze(query))
        return [float(len(terms.intersection(analyze(passage)))) for passage in passages]


def missing_reranker_files(path: Path) -> list[str]:
    """Which files a cross-encoder checkpoint needs are absent from ``path`` (empty: complete).

    Alternatives are listed as ``a|b`` (either will do).
    """
    return missing_checkpoint_files(
        path, required=_REQUIRED_FILES, alternatives=(_WEIGHT_FILES, _TOKENIZER_FILES)
    )


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _config_problems(path: Path, *, max_length: int) -> list[str]:
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
        problems = _config_problems(path, max_length=max_length)
        if problems:
            msg = f"{path} cannot be used as a reranker: {'; '.join(problems)}"
            raise EncoderError(msg)
        self._batch_size = batch_size
        self._max_length = max_length
        # FlagEmbedding mutates the model on every call (.to(), .eval(), fp16 switch);
        # callers on several threads (a thread-pool web server) take turns.
        self._lock = threading.Lock()
        try:
            self._name = f"flag-reranker:{_fingerprint(path, max_length=max_length)}"
            from FlagEmbedding import FlagReranker  # noqa: PLC0415  (heavy: torch, transformers)

            self._model: Any = FlagReranker(
                str(path.resolve()),
                use_fp16=device != "cpu",  # fp16 kernels are slow or missing on CPU
                devices=device,
                batch_size=batch_size,
                max_length=max_length,
                normalize=False,
            )
        except Exception as exc:
            msg = f"cannot load the reranker from {path}: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Score ``passages`` against ``query`` in batches of ``batch_size``; raw logits."""
        _check_passages(passages)
        scores: list[float] = []
        for start in range(0, len(passages), self._batch_size):
            scores.extend(self._score(query, list(passages[start : start + self._batch_size])))
        return scores

    def _score(self, query: str, batch: list[str]) -> list[float]:
        pairs = [(query, passage) for passage in batch]
        try:
            with self._lock:
                # FlagEmbedding draws tqdm bars unless the input is shorter than the batch
                # size and has no switch for them: one call per batch, with a batch size
                # one above its length, keeps them off without changing the batching.
                # Known cost (FlagEmbedding 1.4.2): each call first runs its leading batch
                # once as a memory probe and discards the result, so every batch here is
                # computed twice; one call over all pairs would redo only the first batch.
                raw = self._model.compute_score(
                    pairs,
                    batch_size=len(pairs) + 1,
                    max_length=self._max_length,
                    normalize=False,
                )
            scores = [float(value) for value in raw]
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


def create_reranker(
    path: Path | None,
    *,
    device: str = "cpu",
    batch_size: int = 32,
    max_length: int = 512,
) -> Reranker | None:
    """The configured reranker: ``None`` when no model path is set (reranking off).

    Raises :class:`ConfigurationError` naming ``HSEARCH_RERANK__MODEL_PATH`` when the path
    is set but holds no complete one-label cross-encoder, and :class:`EncoderError` when
    the files are there but the model does not load.
    """
    if path is None:
        return None
    missing = missing_reranker_files(path)
    if missing:
        msg = (
            f"{_MODEL_PATH_SETTING}={path} is not a complete reranker checkpoint; "
            f"missing: {', '.join(missing)}"
        )
        raise ConfigurationError(msg)
    problems = _config_problems(path, max_length=max_length)
    if problems:
        msg = f"{_MODEL_PATH_SETTING}={path} cannot be used as a reranker: {'; '.join(problems)}"
        raise ConfigurationError(msg)
    return FlagRerankerAdapter(path, device=device, batch_size=batch_size, max_length=max_length)
