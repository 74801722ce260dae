"""The core vocabulary: legs, search modes, fusion methods, leg statuses and vectors.

One module that settings, domain code, adapters and the API import, so a value exists
once and the OpenAPI document lists the allowed values of every field typed with these
enums. The vector types live here, in the base layer, because both sides of the
adapters speak them: the encoders produce them, the vector store stores and searches
them, and the pure lexical code (analyzer, BM25) computes them without depending on
any adapter.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Annotated, TypeAlias

from pydantic import AfterValidator


class Leg(StrEnum):
    """A retrieval signal whose ranked candidates are fused."""

    DENSE = "dense"
    SPARSE = "sparse"


class SearchMode(StrEnum):
    """Which legs a search runs."""

    HYBRID = "hybrid"
    SEMANTIC = "semantic"  # dense leg only
    KEYWORD = "keyword"  # sparse leg only


MODE_LEGS: Mapping[SearchMode, tuple[Leg, ...]] = MappingProxyType(
    {
        SearchMode.HYBRID: (Leg.DENSE, Leg.SPARSE),
        SearchMode.SEMANTIC: (Leg.DENSE,),
        SearchMode.KEYWORD: (Leg.SPARSE,),
    }
)


class FusionMethod(StrEnum):
    """How the legs are combined (``docs/fusion.md``)."""

    RRF = "rrf"
    """Weighted reciprocal rank fusion (ranks only)."""
    SCORE = "score"
    """Weighted min-max normalised score fusion."""
    ADAPTIVE = "adaptive"
    """Two regimes: signal posteriors when a leg's best stands out, ranks otherwise."""


class LegStatus(StrEnum):
    """How a leg of one search ended."""

    OK = "ok"
    TIMEOUT = "timeout"  # no answer within its deadline
    ERROR = "error"  # the backend failed
    SKIPPED = "skipped"  # not run (e.g. weight 0)


def _check_leg_weights(weights: dict[Leg, float]) -> dict[Leg, float]:
    for leg, weight in weights.items():
        if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
            msg = f"{leg.value}: weight must be between 0 and 1, got {weight!r}"
            raise ValueError(msg)
    if not any(w > 0 for w in weights.values()):
        msg = "at least one leg needs a weight above 0"
        raise ValueError(msg)
    return weights


LegWeights = Annotated[dict[Leg, float], AfterValidator(_check_leg_weights)]
"""Weights by leg: keys are :class:`Leg` values (an unknown leg is refused with the
allowed ones listed), each weight finite and in ``[0, 1]``, at least one above 0.
Validated wherever it is parsed: settings at start, request bodies per request."""


DenseVector: TypeAlias = tuple[float, ...]
"""A dense vector: what an encoder returns (L2-normalised) and the store indexes."""


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


class CountUnit(StrEnum):
    """What a total or a facet counts."""

    CHUNK = "chunk"
    DOCUMENT = "document"


class CountScope(StrEnum):
    """Which hits a total or a facet counts (``docs/search.md``, "Totals and facets")."""

    MATCHES = "matches"
    """The query's matches: every chunk holding a keyword query term (counted up to
    ``search.count_limit``) and the dense leg's ``window`` nearest chunks, under the
    filter."""
    WINDOW = "window"
    """Only the fused window: what the legs returned (with ``min_score`` applied)."""


class JobStatus(StrEnum):
    """Where an ingestion job stands."""

    QUEUED = "queued"
    RUNNING = "running"  # being indexed, or indexed and waiting for its flush (indexer.py)
    SUCCEEDED = "succeeded"  # every item indexed or skipped
    PARTIAL = "partial"  # some items failed, the rest landed
    FAILED = "failed"  # every item failed, or the job itself could not run
    CANCELLED = "cancelled"  # cancelled: finished documents stay, the rest were not indexed
