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
    SUM = "sum"
    """Weighted sum of the raw scores (legs trained to share one scale, as BGE-M3's)."""


MIN_RRF_K = 1
MAX_RRF_K = 1000
DEFAULT_RRF_K = 60
"""RRF's customary ``k`` (Cormack et al. 2009): the fallback when nothing sets one."""


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


@dataclass(frozen=True, slots=True)
class FusionDefault:
    """A complete fusion setting: the method, the weight of every leg and ``k``.

    What an encoder declares as the fusion its legs are best combined with
    (``EncoderInfo.fusion``), and what
    :meth:`hsearch.config.SearchSettings.resolve_fusion` gives a search once the
    operator's settings are applied. Immutable and hashable; ``weights`` hold one entry
    per :class:`Leg`, in :class:`Leg` order (a leg not given has weight 0). ``k`` is
    the ``k`` of ``1 / (k + rank)``, read by ``rrf`` and ``adaptive`` only.
    ``keyword_coverage`` and ``length_words`` are what ``adaptive`` reads of the query
    itself (:class:`hsearch.search.fusion.QueryReading`): the keyword leg's coverage of
    the query, and from how many words a standout must be clearer; ``adaptive`` only.
    """

    method: FusionMethod
    weights: tuple[tuple[Leg, float], ...]
    k: int = DEFAULT_RRF_K
    keyword_coverage: bool = False
    length_words: int | None = None

    def __post_init__(self) -> None:
        given = dict(self.weights)
        if len(given) != len(self.weights):
            msg = "FusionDefault.weights: one entry per leg"
            raise ValueError(msg)
        _check_leg_weights(given)
        if isinstance(self.k, bool) or not MIN_RRF_K <= self.k <= MAX_RRF_K:
            msg = f"FusionDefault.k: must be an integer between {MIN_RRF_K} and {MAX_RRF_K}"
            raise ValueError(msg)
        ordered = tuple((leg, float(given.get(leg, 0.0))) for leg in Leg)
        method = FusionMethod(self.method)
        if (self.keyword_coverage or self.length_words is not None) and (
            method is not FusionMethod.ADAPTIVE
        ):
            msg = "FusionDefault: keyword_coverage and length_words are read by adaptive only"
            raise ValueError(msg)
        if self.length_words is not None and (
            isinstance(self.length_words, bool)
            or not isinstance(self.length_words, int)
            or self.length_words < 1
        ):
            msg = "FusionDefault.length_words: must be an integer >= 1 or None"
            raise ValueError(msg)
        if not isinstance(self.keyword_coverage, bool):
            msg = "FusionDefault.keyword_coverage: must be true or false"
            raise ValueError(msg)
        object.__setattr__(self, "method", method)
        object.__setattr__(self, "weights", ordered)

    @classmethod
    def of(
        cls, method: FusionMethod | str, weights: Mapping[Leg, float] | Mapping[str, float],
        k: int = DEFAULT_RRF_K, *, keyword_coverage: bool = False,
        length_words: int | None = None,
    ) -> FusionDefault:  # fmt: skip
        """Build from a weight mapping keyed by :class:`Leg` or leg name."""
        return cls(
            FusionMethod(method),
            tuple((Leg(leg), w) for leg, w in weights.items()),
            k,
            keyword_coverage,
            length_words,
        )

    def leg_weights(self) -> dict[Leg, float]:
        """The weights by leg (a new dict)."""
        return dict(self.weights)

    def describe(self) -> str:
        """``"rrf dense=0.7,sparse=0.3 k=60"`` (``k`` only for the methods that read it;
        ``adaptive`` adds `` coverage`` and `` length=16`` when it reads them): for
        tables, logs and result files."""
        weights = ",".join(f"{leg.value}={w:g}" for leg, w in self.weights)
        reads_k = self.method in (FusionMethod.RRF, FusionMethod.ADAPTIVE)
        reading = (" coverage" if self.keyword_coverage else "") + (
            f" length={self.length_words}" if self.length_words is not None else ""
        )
        return f"{self.method.value} {weights}" + (f" k={self.k}" if reads_k else "") + reading


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


class TotalTracking(StrEnum):
    """How hard a search works for its total (``docs/search.md``, "Totals"), as
    Elasticsearch's ``track_total_hits``."""

    BOUND = "bound"
    """The default: exact when the legs' windows hold every match, else a lower bound
    from what is already known (the windows, the tenant's term statistics); the facets
    count the window. No request beyond the legs."""
    EXACT = "exact"
    """Count every keyword match (up to ``search.count_limit``) for the total and the
    facets: one more store request when the sparse leg fills its window."""
    WINDOW = "window"
    """Count the window only, for the total and the facets."""

    @classmethod
    def of(cls, value: bool | str) -> TotalTracking:
        """A request's ``track_total``: a name, or a boolean as clients sent it before
        :attr:`BOUND` became the default: ``true`` asked for the count (:attr:`EXACT`),
        ``false`` for the window only (:attr:`WINDOW`)."""
        if isinstance(value, bool):
            return cls.EXACT if value else cls.WINDOW
        return cls(value)


class TotalRelation(StrEnum):
    """How a total relates to the count it stands for (Elasticsearch's ``relation``)."""

    EQ = "eq"
    """The total is the count."""
    GTE = "gte"
    """The total is a lower bound: there are at least that many."""


class JobStatus(StrEnum):
    """Where an ingestion job stands."""

    QUEUED = "queued"
    RUNNING = "running"  # being indexed, or indexed and waiting for its flush (indexer.py)
    SUCCEEDED = "succeeded"  # every item indexed or skipped
    PARTIAL = "partial"  # some items failed, the rest landed
    FAILED = "failed"  # every item failed, or the job itself could not run
    CANCELLED = "cancelled"  # cancelled: finished documents stay, the rest were not indexed


class JobKind(StrEnum):
    """What a job does to a tenant's documents."""

    INGEST = "ingest"  # index the submitted documents
    DELETE = "delete"  # delete the documents a filter selected when the job started


FINISHED_JOB_STATUSES = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.PARTIAL, JobStatus.FAILED, JobStatus.CANCELLED}
)
"""A job in one of these has ended: nothing more runs for it (its webhook aside)."""

SEARCHABLE_JOB_STATUSES = frozenset({JobStatus.SUCCEEDED, JobStatus.PARTIAL})
"""A job ends in one of these only once a store flush after its last write has run: its
documents are searchable from its ``finished_at``."""


class Scope(StrEnum):
    """What an API key may do. Scopes are independent: a route names the scopes it
    accepts, and a key holding any of them passes (docs/api.md, Authentication)."""

    SEARCH = "search"  # POST /v1/search; read documents
    INGEST = "ingest"  # write and read documents, jobs
    ADMIN = "admin"  # manage the tenant's own keys (/v1/keys)


class CredentialRole(StrEnum):
    """Whose credential a key is."""

    TENANT = "tenant"  # a tenant's key: acts for its tenant only, within its scopes
    OPERATOR = "operator"  # the service's operator: acts for any tenant named per request


class TenantStatus(StrEnum):
    """Whether a tenant's credentials are accepted."""

    ACTIVE = "active"
    SUSPENDED = "suspended"  # every key of the tenant is refused (403); data is kept
