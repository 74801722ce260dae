"""What every encoder provides: the :class:`Embedder` protocol and its value types.

Untyped model libraries stop at their adapter: adapters return these types only, built
from the vector types of :mod:`hsearch.types`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, runtime_checkable

from hsearch.types import DenseVector, FusionDefault, FusionMethod, Leg, SparseVector


class SparseKind(StrEnum):
    """What the values of an encoder's sparse vectors mean."""

    LEARNED = "learned"
    """Final lexical weights (BGE-M3): searched as they are."""
    TERM_FREQUENCY = "term_frequency"
    """Raw term counts: BM25-weighted with the tenant's statistics (``hsearch.lexical``)."""


@dataclass(frozen=True, slots=True)
class Embedding:
    """One text encoded: an L2-normalised dense vector and a sparse vector.

    A query encoded for one side only (:meth:`Embedder.embed_query` with ``dense`` or
    ``sparse`` false) leaves the other side empty: ``dense == ()`` or a sparse vector
    with no entries. Nothing reads a side it did not ask for.
    """

    dense: DenseVector
    sparse: SparseVector


UNMEASURED_FUSION = FusionDefault.of(FusionMethod.RRF, {Leg.DENSE: 0.5, Leg.SPARSE: 0.5})
"""The fusion default of an encoder that declares none: unweighted reciprocal rank
fusion with the customary ``k`` = 60, which assumes nothing about either leg's scores."""


@dataclass(frozen=True, slots=True)
class EncoderInfo:
    """Identity of an encoder; a collection records it and refuses any other."""

    name: str
    dimension: int
    version: str
    sparse_kind: SparseKind
    dense_scripts: frozenset[str] | None = None
    """Unicode scripts the dense side was trained on (``{"LATIN"}`` for an English-only
    model); ``None`` for a multilingual one. Search trusts the dense leg only for queries
    written mostly in these scripts. Not part of the fingerprint."""
    fusion: FusionDefault = field(default=UNMEASURED_FUSION)
    """How this encoder's dense and sparse legs are best fused (method, weights, ``k``):
    what a search uses unless the operator or the request sets otherwise
    (:meth:`hsearch.config.SearchSettings.resolve_fusion`). Measured for the offline
    encoder, from the model's paper for BGE-M3 (docs/fusion.md). Not part of the
    fingerprint: it changes no stored vector."""
    sparse_needs_model: bool = True
    """Whether a query's sparse side comes out of the model (BGE-M3's learned weights),
    or from the text alone (the offline and fake encoders' term counts, BM25-weighted
    with the tenant's statistics afterwards). ``False``:
    :meth:`Embedder.embed_query_without_model` computes it with no model, and a search
    whose query encoding fails or misses its deadline still runs its keyword leg
    (docs/search.md, When the encoder fails). Not part of the fingerprint: it changes no
    stored vector."""

    @property
    def fingerprint(self) -> str:
        return f"{self.name}|{self.dimension}|{self.version}|{self.sparse_kind.value}"


@runtime_checkable
class Tokenizer(Protocol):
    """How an encoder cuts text into tokens, and how many of them it reads.

    What the chunker measures chunks with (:mod:`hsearch.ingestion.chunking`): a chunk
    that fits :attr:`max_tokens` is read whole, a longer one would be truncated by the
    encoder, silently. Counts and spans leave out the special tokens the encoder adds
    (``[CLS]``, ``</s>``): :attr:`max_tokens` is already net of them.
    """

    @property
    def max_tokens(self) -> int:
        """The most tokens of one passage the encoder reads (its window, special tokens
        excluded); the rest of a longer passage is cut off."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` character offsets in ``text`` of each of its tokens, in
        order. Several tokens may share a span (a character split into byte pieces)."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """How many tokens the encoder reads for each of ``texts`` (untruncated)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Encodes documents and queries into dense + sparse vectors."""

    @property
    def info(self) -> EncoderInfo: ...

    @property
    def tokenizer(self) -> Tokenizer:
        """The encoder's own tokenizer and window, for chunks that fit it."""
        ...

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        """Encode passages in batches; one embedding per text, in order.

        ``langs`` holds each text's language tag (``""``: unknown), for encoders whose
        analysis depends on the language (the lexical analyzer's English rules);
        ``None``: all unknown. Encoders that read every language alike ignore it.
        """
        ...

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        """Encode one query, computing only the sides asked for (the other is empty).

        A search computes what its legs read: a keyword search no dense vector, a
        semantic one no sparse vector. Asking for neither side is a :class:`ValueError`.
        """
        ...

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        """Encode several queries at once (one forward pass where the model allows),
        the sides asked for; one embedding per text, in order, each equal (within float
        rounding) to what :meth:`embed_query` returns for that text alone.

        What the query micro-batcher (:mod:`hsearch.embedding.batching`) calls with the
        queries that arrived together. Asking for neither side is a :class:`ValueError`.
        """
        ...

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        """The sparse side of ``text``'s query embedding, computed without the model:
        equal to ``embed_query(text, dense=False).sparse``, or ``None`` when the
        encoder's sparse side comes out of the model (:attr:`EncoderInfo.sparse_needs_model`).

        What a search falls back on when the model fails or hangs: it never waits for
        the model, nor for a model call queued before it.
        """
        ...


def check_sides(*, dense: bool, sparse: bool) -> None:
    """Refuse an :meth:`Embedder.embed_query` call that asks for no side at all."""
    if not (dense or sparse):
        msg = "embed_query: ask for the dense side, the sparse side or both"
        raise ValueError(msg)


EMPTY_SPARSE = SparseVector((), ())
"""The sparse side of a query encoded for its dense side only."""


def document_langs(texts: Sequence[str], langs: Sequence[str] | None) -> Sequence[str]:
    """The language tag of each of ``texts`` as :meth:`Embedder.embed_documents` takes
    them: ``langs`` checked against ``texts``, or all unknown (``""``) for ``None``.

    Raises:
        ValueError: ``langs`` and ``texts`` differ in length.
    """
    if langs is None:
        return [""] * len(texts)
    if len(langs) != len(texts):
        msg = f"got {len(langs)} language tags for {len(texts)} texts"
        raise ValueError(msg)
    return langs
