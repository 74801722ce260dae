"""Domain types of the query path (the API maps its schemas onto these)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hsearch.graph.links import LinkedPage
from hsearch.lexical.additions import TermExpansion
from hsearch.search.facets import FacetRequest, FacetResult
from hsearch.search.sorting import SortClause
from hsearch.search.timings import StageTimings
from hsearch.search.totals import FacetBasis, Totals
from hsearch.types import CountUnit, FusionMethod, LegStatus, SearchMode, TotalTracking
from hsearch.vectorstore.filters import FilterNode


@dataclass(frozen=True, slots=True)
class SearchQuery:
    tenant_id: str
    query: str
    top_k: int = 10
    offset: int = 0
    mode: SearchMode = SearchMode.HYBRID
    fusion: FusionMethod | None = None  # None: the default (SearchSettings.resolve_fusion)
    rrf_k: int | None = None
    weights: dict[str, float] | None = None
    """Per source (leg) name; a source not named gets weight 0."""
    filter: object | None = None
    candidates: int | None = None
    leg_timeout_s: float | None = None
    min_score: float | None = None
    group_by_document: bool = False
    facets: tuple[FacetRequest, ...] = ()
    facet_unit: CountUnit = CountUnit.DOCUMENT
    highlight: bool = True
    track_total: TotalTracking = TotalTracking.BOUND
    """How the total and the facets are counted (:mod:`~hsearch.search.totals`): a bound
    from what the legs returned (the default), every keyword match (one more store
    request when the sparse leg fills its window), or the window only."""
    rerank: bool = False
    typo_tolerance: bool | None = None
    """Query words the tenant's text does not hold also match its words within a few
    typos (:mod:`hsearch.lexical.additions`); ``None``: the server's default
    (``search.typo_tolerance``)."""
    prefix: bool = False
    """The last query word also matches as the start of longer words (search as you type)."""
    required_filter: FilterNode | None = None
    """A scoped search token's filter: ANDed with ``filter`` into every leg, the totals
    and the facets (never from the request body)."""
    max_top_k: int | None = None
    """A scoped search token's limit on ``top_k``, below the server's."""
    cursor: str | None = None
    """A previous page's ``next_cursor``: the page after it, cut from the same fused list
    (``offset`` is then the cursor's)."""
    sort: tuple[SortClause, ...] = ()
    """How the window is ordered (:mod:`~hsearch.search.sorting`); empty: by relevance."""
    leg_params: dict[str, dict[str, Any]] | None = None
    """Per source name, what the request asks of it (the graph leg's ``graph``)."""
    include_linked: bool = False
    """Each hit lists the documents it links to and from."""


@dataclass(frozen=True, slots=True)
class LegScore:
    """Where one leg placed a hit: its 1-based rank and raw score (``None`` when the
    leg did not return it)."""

    rank: int | None
    score: float | None
    detail: Mapping[str, Any] | None = None
    """How the leg found the hit, when it says (the graph leg: ``seed``, ``hops``,
    ``path`` and ``via``, the link types along it)."""


@dataclass(frozen=True, slots=True)
class Explanation:
    method: FusionMethod
    fused_score: float
    legs: dict[str, LegScore]
    """Every leg of the search's mode, by name, whether or not it returned the hit."""
    rerank_score: float | None = None
    matches: tuple[TermExpansion, ...] = ()
    """The searched-for words beyond the query's (:attr:`SearchResult.expansions`) that
    this hit's text holds."""

    def rank_of(self, leg: str) -> int | None:
        found = self.legs.get(leg)
        return None if found is None else found.rank

    def score_of(self, leg: str) -> float | None:
        found = self.legs.get(leg)
        return None if found is None else found.score


@dataclass(frozen=True, slots=True)
class SearchHit:
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    score: float
    explanation: Explanation
    char_start: int | None = None
    """Where ``text`` lies in the document's text: ``document[char_start:char_end]``
    (``None`` only from a store that keeps no offsets)."""
    char_end: int | None = None
    snippet: str | None = None
    matching_chunks: int = 1
    source: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    linked_pages: tuple[LinkedPage, ...] | None = None
    """The documents its document links to and from (asked for with
    ``include_linked``; ``None``: not asked, or they could not be read)."""


@dataclass(frozen=True, slots=True)
class LegReport:
    """How one leg of a search went; ``took_ms`` is its own time (the legs overlap)."""

    leg: str
    status: LegStatus
    took_ms: float
    candidates: int
    error: str | None = None


@dataclass(frozen=True, slots=True)
class SearchResult:
    query: str
    mode: SearchMode
    method: FusionMethod
    hits: tuple[SearchHit, ...]
    totals: Totals
    """How many hits the query has, on the basis it declares (:mod:`~hsearch.search.totals`)."""
    window: int
    """How many units of the fused ranking pages run through (at most the plan's window)."""
    offset: int
    top_k: int
    degraded: tuple[str, ...]
    legs: tuple[LegReport, ...]
    took_ms: float
    """The sum of ``timings``: the request from its validation to its last hit."""
    rerank_ms: float | None = None
    weights: dict[str, float] = field(default_factory=dict)
    """Per leg that answered: the weight the query was fused with (configured or
    requested, after the script-coverage rule)."""
    applied_weights: dict[str, float] = field(default_factory=dict)
    """Per active leg: the weight it carried in this query's fusion (sum 1); for
    ``adaptive`` the per-query mixture weights, moved from ``weights`` towards the legs
    whose best candidate stands out."""
    keyword_coverage: float | None = None
    """The share of the query the keyword leg's first candidate holds, when the fusion
    reads it (:mod:`hsearch.lexical.coverage`); ``None`` when it was not read."""
    facets: tuple[FacetResult, ...] = ()
    facet_basis: FacetBasis | None = None
    timings: StageTimings = field(default_factory=StageTimings)
    """Where ``took_ms`` went, stage by stage (:mod:`hsearch.search.timings`)."""
    cached: bool = False
    """Served from the result cache (:mod:`hsearch.search.caching`): computed by an
    earlier identical search on the same data; ``timings`` are this request's."""
    embedding_cached: bool = False
    """The query's vectors came from the query-embedding cache (the model did not run)."""
    expansions: tuple[TermExpansion, ...] = ()
    """What the keyword leg searched for beyond the words typed: typo corrections,
    completions of the last word, synonyms."""
    next_cursor: str | None = None
    """Where the next page starts, in the fused list this page was cut from (``None`` on
    the window's last page)."""
    sort: tuple[SortClause, ...] = ()
    """The order of the window the page was cut from, normalised (ending with
    ``_score``); empty: by relevance."""
