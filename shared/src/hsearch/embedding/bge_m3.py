"""BGE-M3 adapter: dense and learned sparse vectors from one forward pass.

With :mod:`hsearch.rerank.flag`, the only code that touches FlagEmbedding (ruff's
banned-api rule holds everyone else to it). It imports it inside
:class:`BgeM3Embedder` so that importing this module (for :func:`is_bge_m3_dir`, which
the factory calls to choose an encoder) stays cheap; the untyped library stops here and
callers get :class:`Embedding` values only.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hsearch.embedding.fingerprint import fingerprint, missing_checkpoint_files
from hsearch.embedding.model_thread import load_on_model_thread, run_on_model_thread
from hsearch.embedding.protocol import (
    EMPTY_SPARSE,
    Embedding,
    EncoderInfo,
    SparseKind,
    Tokenizer,
    check_sides,
)
from hsearch.embedding.tokenizer import HuggingFaceTokenizer
from hsearch.errors import EncoderError
from hsearch.types import FusionDefault, FusionMethod, Leg, SparseVector

__all__ = [
    "BGE_M3_FUSION",
    "BgeM3Embedder",
    "declared_info",
    "is_bge_m3_dir",
    "missing_bge_m3_files",
]

BGE_M3_FUSION = FusionDefault.of(FusionMethod.SUM, {Leg.DENSE: 1.0, Leg.SPARSE: 0.3})
"""BGE-M3's fusion default, from its paper (Chen et al. 2024, "BGE M3-Embedding"), which
ranks by ``s_dense + 0.3 * s_lex``: a weighted sum of the raw scores, which share one
scale because the model was trained to produce both. Not measured here (docs/fusion.md)."""

# Weight files FlagEmbedding (through transformers) can load, in its order of preference.
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
# The tokenizer: a fast tokenizer file or the original SentencePiece model.
_TOKENIZER_FILES = ("tokenizer.json", "sentencepiece.bpe.model")
# FlagEmbedding falls back to *randomly initialised* heads, silently, unless both head
# files exist; colbert_linear.pt is thus required although colbert vectors are not used.
_REQUIRED_FILES = ("config.json", "tokenizer_config.json", "sparse_linear.pt", "colbert_linear.pt")


def missing_bge_m3_files(path: Path) -> list[str]:
    """Which files a BGE-M3 checkpoint needs are absent from ``path`` (empty: complete).

    Alternatives are listed as ``a|b`` (either will do).
    """
    return missing_checkpoint_files(
        path, required=_REQUIRED_FILES, alternatives=(_WEIGHT_FILES, _TOKENIZER_FILES)
    )


def is_bge_m3_dir(path: Path) -> bool:
    """Whether ``path`` holds a complete BGE-M3 checkpoint (see :func:`missing_bge_m3_files`)."""
    return not missing_bge_m3_files(path)


def _checkpoint_version(path: Path) -> str:
    """A stable fingerprint of the files this adapter loads (not of their location)."""
    weights = next(path / name for name in _WEIGHT_FILES if (path / name).is_file())
    tokenizer = [path / name for name in (*_TOKENIZER_FILES, "special_tokens_map.json")]
    files = (
        path / "config.json",
        path / "tokenizer_config.json",
        *(f for f in tokenizer if f.is_file()),
        path / "sparse_linear.pt",
        weights,
    )
    return fingerprint((f.name, f) for f in files)


def _hidden_size(path: Path) -> int:
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    size = config.get("hidden_size") if isinstance(config, dict) else None
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        msg = f"{path / 'config.json'} has no valid hidden_size (got {size!r})"
        raise EncoderError(msg)
    return size


def declared_info(path: Path) -> EncoderInfo:
    """What :class:`BgeM3Embedder` reports as its info for the checkpoint at ``path``,
    read from its files (the embedder reads it there too, before loading).

    Raises:
        EncoderError: The files cannot be read, or do not say the model's width.
    """
    try:
        return EncoderInfo(
            name="bge-m3",
            dimension=_hidden_size(path),
            version=_checkpoint_version(path),
            sparse_kind=SparseKind.LEARNED,
            fusion=BGE_M3_FUSION,
        )
    except EncoderError:
        raise
    except (OSError, ValueError, StopIteration) as exc:
        msg = f"cannot read the BGE-M3 checkpoint at {path}: {type(exc).__name__}: {exc}"
        raise EncoderError(msg) from exc


class BgeM3Embedder:
    """BAAI/bge-m3 from a local directory: dense (CLS, L2-normalised) + learned lexical weights.

    The model is loaded when the embedder is built, not on first use: a broken or
    incomplete checkpoint then fails at start-up (API lifespan, worker process init)
    rather than on the first request, and that request does not pay seconds of loading.
    """

    def __init__(
        self,
        path: Path,
        *,
        device: str = "cpu",
        batch_size: int = 16,
        max_length: int = 512,
    ) -> None:
        if batch_size < 1:
            msg = f"batch_size must be >= 1, got {batch_size}"
            raise ValueError(msg)
        if max_length < 2:
            msg = f"max_length must be >= 2, got {max_length}"
            raise ValueError(msg)
        # Checked before FlagEmbedding sees the path: given a path that does not exist it
        # would try to download a model of that name from the Hugging Face Hub.
        missing = missing_bge_m3_files(path)
        if missing:
            msg = f"{path} is not a complete BGE-M3 checkpoint; missing: {', '.join(missing)}"
            raise EncoderError(msg)
        self._batch_size = batch_size
        self._max_length = max_length
        try:
            self._info = declared_info(path)
            # Loaded, and called, on the process's model thread (one OpenMP pool; one
            # forward pass at a time).
            load_on_model_thread(self._load, path, device=device)
            tokenizer = self._model.tokenizer
            self._special_ids = frozenset(
                tokenizer.convert_tokens_to_ids(tokenizer.special_tokens_map[name])
                for name in ("cls_token", "eos_token", "pad_token", "unk_token")
                if name in tokenizer.special_tokens_map
            )
            # Passages are truncated at max_length tokens, <s> and </s> included:
            # chunks are cut to fit it.
            self._tokenizer = HuggingFaceTokenizer(self._model.tokenizer, window=max_length)
        except EncoderError:
            raise
        except Exception as exc:
            msg = f"cannot load BGE-M3 from {path}: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc

    def _load(self, path: Path, *, device: str) -> None:
        from FlagEmbedding import BGEM3FlagModel  # noqa: PLC0415  (heavy: torch, transformers)

        self._model: Any = BGEM3FlagModel(
            str(path.resolve()),
            normalize_embeddings=True,
            use_fp16=device != "cpu",  # fp16 kernels are slow or missing on CPU
            devices=device,
            batch_size=self._batch_size,
            passage_max_length=self._max_length,
            query_max_length=self._max_length,
        )
        # Set once: encode would redo this on every call.
        import torch  # noqa: PLC0415  (heavy; loaded with FlagEmbedding above)

        self._torch: Any = torch
        self._device = self._model.target_devices[0]
        if self._device == "cpu":
            self._model.model.float()
        self._model.model.to(self._device)
        self._model.model.eval()

    @property
    def info(self) -> EncoderInfo:
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        """The checkpoint's XLM-R tokenizer and the ``max_length`` window."""
        return self._tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        """Encode passages in batches of ``batch_size``; one embedding per text, in order.
        BGE-M3 reads every language alike: ``langs`` is not needed."""
        del langs
        embeddings: list[Embedding] = []
        for start in range(0, len(texts), self._batch_size):
            embeddings.extend(self._encode(list(texts[start : start + self._batch_size])))
        return embeddings

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        """Encode one query (BGE-M3 needs no query instruction), only the sides asked
        for: the transformer runs once either way, the other head is skipped."""
        check_sides(dense=dense, sparse=sparse)
        return self._encode([text], dense=dense, sparse=sparse)[0]

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        """Encode queries together: one forward pass per ``batch_size`` of them, only
        the heads asked for."""
        check_sides(dense=dense, sparse=sparse)
        embeddings: list[Embedding] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            embeddings.extend(self._encode(batch, dense=dense, sparse=sparse))
        return embeddings

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        """``None``: BGE-M3's lexical weights come out of the model's forward pass, like
        its dense vector, so no side of a query can be made without it."""
        del text
        return None

    def _encode(
        self, batch: list[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        """One forward pass of the model for ``batch``.

        Not ``BGEM3FlagModel.encode``: version 1.4.2 first runs the longest inputs of
        every call once to find a batch size that fits the device, then encodes every
        batch, so each call computed its first batch twice (twice the work for one
        batch). The steps here are encode's own for one batch: tokenize (truncated at
        ``max_length``), pad, the model's forward pass (it normalises the dense vector),
        and the sparse weights per token id (the largest, above 0, special tokens left
        out); a test checks the output equals encode's.
        """
        try:
            vectors, weights = run_on_model_thread(self._forward, batch, dense=dense, sparse=sparse)
        except EncoderError:
            raise
        except Exception as exc:
            msg = f"BGE-M3 encoding failed: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc
        if len(vectors) != len(batch) or len(weights) != len(batch):
            msg = f"BGE-M3 returned {len(vectors)}/{len(weights)} vectors for {len(batch)} texts"
            raise EncoderError(msg)
        return [Embedding(dense=d, sparse=s) for d, s in zip(vectors, weights, strict=True)]

    def _forward(
        self, batch: list[str], *, dense: bool, sparse: bool
    ) -> tuple[list[tuple[float, ...]], list[SparseVector]]:
        """:meth:`_encode`'s steps on the model thread: its dense and sparse vectors."""
        with self._torch.inference_mode():
            inputs = self._model.tokenizer(
                batch,
                padding=True,
                truncation=True,
                max_length=self._max_length,
                return_tensors="pt",
            ).to(self._device)
            output = self._model.model(
                inputs,
                return_dense=dense,
                return_sparse=sparse,
                return_colbert_vecs=False,
            )
            vectors: list[tuple[float, ...]] = (
                [self._dense(row) for row in output["dense_vecs"].float().cpu().numpy()]
                if dense
                else [()] * len(batch)
            )
            weights: list[SparseVector] = (
                self._sparse_weights(
                    output["sparse_vecs"].squeeze(-1).float().cpu().numpy(),
                    inputs["input_ids"].cpu().numpy(),
                )
                if sparse
                else [EMPTY_SPARSE] * len(batch)
            )
        return vectors, weights

    def _sparse_weights(self, token_weights: Any, input_ids: Any) -> list[SparseVector]:
        """Per text, its tokens' largest weight above 0, special tokens left out (what
        FlagEmbedding's encode returns as ``lexical_weights``)."""
        out: list[SparseVector] = []
        for row_weights, row_ids in zip(token_weights, input_ids, strict=True):
            best: dict[int, float] = {}
            for weight, token in zip(row_weights.tolist(), row_ids.tolist(), strict=True):
                if token in self._special_ids or weight <= 0:
                    continue
                if weight > best.get(token, 0.0):
                    best[token] = weight
            out.append(SparseVector.from_mapping(best))
        return out

    def _dense(self, row: Any) -> tuple[float, ...]:
        values = [float(v) for v in row]
        if len(values) != self._info.dimension:
            msg = f"BGE-M3 returned a {len(values)}-d vector, expected {self._info.dimension}"
            raise EncoderError(msg)
        # Normalised by the model already; again here because the store's inner product
        # is only a cosine if it is, and fp16 rounding drifts.
        norm = math.sqrt(math.fsum(v * v for v in values))
        if not (math.isfinite(norm) and norm > 0.0):
            msg = f"BGE-M3 returned a dense vector of norm {norm}"
            raise EncoderError(msg)
        return tuple(v / norm for v in values)
