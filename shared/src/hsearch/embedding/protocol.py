"""What every encoder provides, and the vector types the rest of hsearch speaks.

Untyped model libraries stop at their adapter: adapters return these types only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, runtime_checkable


class SparseKind(StrEnum):
    """What the values of an encoder's sparse vectors mean."""

    LEARNED = "learned"
    """Final lexical weights (BGE-M3): searched as they are."""
    TERM_FREQUENCY = "term_frequency"
    """Raw term counts: BM25-weighted with the tenant's statistics (``hsearch.lexical``)."""


@dataclass(frozen=True, slots=True)
class SparseVector:
    """A sparse vector: parallel, index-sorted ``indices`` and ``values``."""

    indices: tuple[int, ...]
    values: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.values):
            msg = "SparseVector indices and values must have the same length"
            raise ValueError(msg)

    @classmethod
    def from_mapping(cls, weights: Mapping[int, float]) -> SparseVector:
        """Build from ``{index: weight}``, dropping zero weights."""
        items = sorted((int(i), float(v)) for i, v in weights.items() if v != 0.0)
        return cls(tuple(i for i, _ in items), tuple(v for _, v in items))

    def to_dict(self) -> dict[int, float]:
        return dict(zip(self.indices, self.values, strict=True))

    def __len__(self) -> int:
        return len(self.indices)


@dataclass(frozen=True, slots=True)
class Embedding:
    """One text encoded: an L2-normalised dense vector and a sparse vector."""

    dense: tuple[float, ...]
    sparse: SparseVector


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

    @property
    def fingerprint(self) -> str:
        return f"{self.name}|{self.dimension}|{self.version}|{self.sparse_kind.value}"


@runtime_checkable
class Embedder(Protocol):
    """Encodes documents and queries into dense + sparse vectors."""

    @property
    def info(self) -> EncoderInfo: ...

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        """Encode passages in batches; one embedding per text, in order.

        ``langs`` holds each text's language tag (``""``: unknown), for encoders whose
        analysis depends on the language (the lexical analyzer's English rules);
        ``None``: all unknown. Encoders that read every language alike ignore it.
        """
        ...

    def embed_query(self, text: str) -> Embedding:
        """Encode one query."""
        ...


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
