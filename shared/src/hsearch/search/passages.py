"""Retrieval below the page: the best passages for a query within a budget.

:meth:`RetrievalService.retrieve` is the one call for code that composes search
(answers, lazy search: :mod:`hsearch.compositions`): a :class:`RetrievalRequest` (query,
mode, filter, sources and their weights, candidate depth, how many passages) and a
:class:`~hsearch.budget.Budget` in, fused :class:`Passage` values out, each with its
text, ids, character offsets and explanation. It knows nothing of pages, totals,
facets or cursors: the search service builds those on the same steps
(:meth:`RetrievalService.run_legs` and :meth:`RetrievalService.fuse`, then
:meth:`RetrievalService.texts` for the hits it shows).

Every request is validated by the same planner as a search, so a retrieval request and
the search request with the same fields retrieve, fuse and explain alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hsearch.budget import Budget
from hsearch.errors import BackendError, SearchUnavailableError
from hsearch.search.fusion import FusedHit
from hsearch.search.models import Explanation, LegReport, LegScore, SearchQuery
from hsearch.search.planner import QueryPlanner, SearchPlan
from hsearch.search.ranking import Ranked, page, rank
from hsearch.search.retrieval import LegOutcome, MatchRequest, Retrieval, Retriever
from hsearch.search.sources import SourceRegistry
from hsearch.search.timings import Stage, StageClock, StageTimings
from hsearch.types import FusionMethod, LegStatus, SearchMode, TotalTracking
from hsearch.vectorstore.filters import FilterNode
from hsearch.vectorstore.protocol import VectorStore

__all__ = [
    "DEGRADED",
    "Fused",
    "Passage",
    "Passages",
    "RetrievalRequest",
    "RetrievalService",
    "explain",
    "stored_fields",
]

DEGRADED = frozenset({LegStatus.ERROR, LegStatus.TIMEOUT})
"""A leg that ended so did not answer: the result is partial, and says so."""


@dataclass(frozen=True, slots=True)
class RetrievalRequest:
    """What to retrieve: the fields of a search request that shape the fused list."""

    tenant_id: str
    query: str
    limit: int = 10
    """How many passages (fused units) to return."""
    mode: SearchMode = SearchMode.HYBRID
    filter: object | None = None
    """The filter language's JSON (:mod:`hsearch.vectorstore.filters`)."""
    required_filter: FilterNode | None = None
    """A credential's filter, ANDed in (a search token's)."""
    weights: Mapping[str, float] | None = None
    """Per source name; unset: the server's default fusion."""
    fusion: FusionMethod | None = None
    rrf_k: int | None = None
    candidates: int | None = None
    """The depth of every leg (at least ``limit``; default: the configured one)."""
    group_by_document: bool = False
    """One passage per document: its best chunk."""
    min_score: float | None = None
    budget_s: float | None = None
    """The time encoding and the legs share (default: the configured one); a budget
    given to :meth:`RetrievalService.retrieve` takes precedence."""


@dataclass(frozen=True, slots=True)
class Passage:
    """One fused passage: a chunk with where it lies in its document and why it ranks."""

    rank: int
    """1-based, in the fused order."""
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    score: float
    explanation: Explanation
    char_start: int | None
    char_end: int | None
    matching_chunks: int = 1
    source: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Passages:
    """The answer of :meth:`RetrievalService.retrieve`."""

    query: str
    mode: SearchMode
    method: FusionMethod
    passages: tuple[Passage, ...]
    legs: tuple[LegReport, ...]
    degraded: tuple[str, ...]
    weights: dict[str, float]
    applied_weights: dict[str, float]
    timings: StageTimings
    embedding_cached: bool = False


@dataclass(frozen=True, slots=True)
class Fused:
    """What the legs answered and their fused ranking, before any page or text."""

    plan: SearchPlan
    retrieval: Retrieval
    ranked: Ranked

    @property
    def outcomes(self) -> tuple[LegOutcome, ...]:
        return self.retrieval.outcomes

    @property
    def degraded(self) -> tuple[str, ...]:
        return tuple(o.leg for o in self.outcomes if o.report.status in DEGRADED)

    @property
    def legs(self) -> tuple[LegReport, ...]:
        return tuple(o.report for o in self.outcomes)


class RetrievalService:
    """Plans, retrieves, fuses and reads the passages of retrieval requests."""

    def __init__(self, *, planner: QueryPlanner, retriever: Retriever, store: VectorStore) -> None:
        self._planner = planner
        self._retriever = retriever
        self._store = store

    @property
    def sources(self) -> SourceRegistry:
        return self._retriever.sources

    def plan(self, request: RetrievalRequest) -> SearchPlan:
        """The validated plan of ``request``; raises InvalidRequestError (422)."""
        return self._planner.plan(
            SearchQuery(
                tenant_id=request.tenant_id,
                query=request.query,
                top_k=request.limit,
                mode=request.mode,
                fusion=request.fusion,
                rrf_k=request.rrf_k,
                weights=dict(request.weights) if request.weights is not None else None,
                filter=request.filter,
                candidates=request.candidates,
                leg_timeout_s=request.budget_s,
                min_score=request.min_score,
                group_by_document=request.group_by_document,
                highlight=False,
                track_total=TotalTracking.WINDOW,
                required_filter=request.required_filter,
            )
        )

    async def retrieve(
        self, request: RetrievalRequest, *, budget: Budget | None = None
    ) -> Passages:
        """The best ``request.limit`` passages, fused, with their texts.

        Raises InvalidRequestError (422) for an invalid request and
        SearchUnavailableError (503) when no leg answered or the texts cannot be read;
        a leg that failed or missed the budget is listed in ``degraded``.
        """
        clock = StageClock()
        plan = self.plan(request)
        clock.lap(Stage.PLAN)
        budget = budget or Budget.of(plan.budget_s, started=clock.started)
        fused = self.fuse(plan, await self.run_legs(plan, budget=budget, clock=clock), clock=clock)
        units = page(fused.ranked.units, spec=plan.ranking)
        texts = await self.texts(plan, [f.id for f, _ in units])
        passages = tuple(
            passage(
                fused,
                hit,
                rank=i + 1,
                matching=matching,
                text=texts[hit.id],
            )
            for i, (hit, matching) in enumerate(units)
            if hit.id in texts
        )
        clock.lap(Stage.HYDRATE)
        return Passages(
            query=plan.query,
            mode=plan.mode,
            method=plan.ranking.method,
            passages=passages,
            legs=fused.legs,
            degraded=fused.degraded,
            weights=fused.ranked.weights,
            applied_weights=fused.ranked.applied_weights,
            timings=clock.timings(),
            embedding_cached=fused.retrieval.embedding_cached,
        )

    async def run_legs(
        self,
        plan: SearchPlan,
        *,
        budget: Budget,
        clock: StageClock,
        matches: MatchRequest | None = None,
    ) -> Retrieval:
        """Run ``plan``'s legs under ``budget``: each leg's outcome, never raised."""
        return await self._retriever.retrieve(plan, budget=budget, clock=clock, matches=matches)

    def fuse(self, plan: SearchPlan, retrieval: Retrieval, *, clock: StageClock) -> Fused:
        """Fuse what the legs answered; raises SearchUnavailableError (503) when none
        did. Charges ``clock`` with fusion."""
        answered = {o.leg: o.hits for o in retrieval.outcomes if o.hits is not None}
        if not answered:
            detail = "; ".join(
                f"{o.leg}: {o.report.error}" for o in retrieval.outcomes if o.report.error
            )
            raise SearchUnavailableError(f"every search leg failed ({detail})")
        skipped = tuple(o.leg for o in retrieval.outcomes if o.report.status is LegStatus.SKIPPED)
        ranked = rank(
            plan.ranking,
            answered,
            skipped=skipped,
            keyword_coverage=retrieval.keyword_coverage,
        )
        clock.lap(Stage.FUSION)
        return Fused(plan, retrieval, ranked)

    async def texts(self, plan: SearchPlan, chunk_ids: Sequence[str]) -> dict[str, str]:
        """The texts of ``chunk_ids`` (one store request by primary key); raises
        SearchUnavailableError if the store fails.

        The read gets the plan's budget of its own, not what the legs left of it: the
        legs' answers are worth nothing without it, and a server still busy with a leg
        that missed its deadline answers it only after that leg."""
        if not chunk_ids:
            return {}
        try:
            return await self._store.texts(
                chunk_ids, tenant_id=plan.tenant_id, timeout=plan.budget_s
            )
        except BackendError as exc:
            raise SearchUnavailableError(
                f"the hits' texts could not be read ({type(exc).__name__}: {exc.message})"
            ) from exc


def passage(fused: Fused, hit: FusedHit, *, rank: int, matching: int, text: str) -> Passage:
    """``hit`` of ``fused`` as a passage, with its ``text``."""
    return Passage(
        rank=rank,
        chunk_id=hit.id,
        text=text,
        score=hit.score,
        explanation=explain(hit, plan=fused.plan, outcomes=fused.outcomes),
        matching_chunks=matching,
        **stored_fields(fused.ranked.fields[hit.id]),
    )


def stored_fields(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A chunk's stored fields as a passage and a search hit both carry them."""
    return {
        "document_id": str(stored.get("document_id", "")),
        "external_id": str(stored.get("external_id", "")),
        "title": str(stored.get("title", "")),
        "char_start": offset(stored.get("char_start")),
        "char_end": offset(stored.get("char_end")),
        "source": str(stored.get("source", "")),
        "lang": str(stored.get("lang", "")),
        "tags": tuple(stored.get("tags") or ()),
        "metadata": dict(stored.get("metadata") or {}),
    }


def explain(
    hit: FusedHit,
    *,
    plan: SearchPlan,
    outcomes: Sequence[LegOutcome] = (),
    rerank_score: float | None = None,
) -> Explanation:
    """Why ``hit`` ranks where it does: each leg of the plan's mode with its rank and
    score (``None`` for a leg that did not return it), what a leg said of how it found
    it (``detail``: the graph leg's path), and the fused score."""
    details = {
        o.leg: h.detail
        for o in outcomes
        for h in o.hits or ()
        if h.detail is not None and h.chunk_id == hit.id
    }
    return Explanation(
        method=plan.ranking.method,
        fused_score=hit.score,
        legs={
            p.leg: LegScore(
                rank=hit.ranks.get(p.leg),
                score=hit.scores.get(p.leg),
                detail=details.get(p.leg) if p.leg in hit.ranks else None,
            )
            for p in plan.legs
        },
        rerank_score=rerank_score,
    )


def offset(value: Any) -> int | None:
    return None if value is None else int(value)
