"""The query path, composed of its stages: plan → retrieval → ranking → hydrate.

* :mod:`~hsearch.search.planner` validates the request once into an immutable plan;
* :mod:`~hsearch.search.retrieval` encodes the query and runs the legs in parallel
  under one request deadline;
* :mod:`~hsearch.search.ranking` fuses, thresholds, groups, counts facets and cuts the
  page (pure), with the cross-encoder in between when asked for;
* hydration maps the page to hits with their explanations and snippets.

Every stage is timed on one clock (:mod:`~hsearch.search.timings`); the response
carries the stages' times, which sum to ``took_ms``. A leg that errors or misses its
deadline is reported in ``degraded`` and the other leg's answer is returned; when no
leg answers the search raises :class:`~hsearch.errors.SearchUnavailableError` (503).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio.to_thread
from cachetools import TTLCache

from hsearch.config import SearchSettings
from hsearch.embedding.protocol import Embedder
from hsearch.errors import InvalidRequestError, SearchUnavailableError
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.rerank.protocol import Reranker
from hsearch.search.fusion import FusedHit
from hsearch.search.highlight import make_snippet
from hsearch.search.models import Explanation, SearchHit, SearchQuery, SearchResult
from hsearch.search.planner import QueryPlanner, SearchPlan
from hsearch.search.ranking import Ranked, Unit, page, rank, rerank
from hsearch.search.retrieval import LegOutcome, MatchRequest, Retriever
from hsearch.search.timings import Stage, StageClock
from hsearch.search.totals import Counted, count, match_fields, taking_part
from hsearch.types import CountScope, FusionMethod, Leg, LegStatus
from hsearch.vectorstore.protocol import StoredHit, VectorStore

logger = logging.getLogger(__name__)


class SearchService:
    def __init__(
        self,
        *,
        embedder: Embedder,
        store: VectorStore,
        statistics: LexicalStatistics,
        settings: SearchSettings,
        reranker: Reranker | None = None,
        rerank_depth: int = 50,
    ) -> None:
        self._planner = QueryPlanner(
            settings, encoder=embedder.info, can_rerank=reranker is not None
        )
        self._retriever = Retriever(embedder=embedder, store=store, statistics=statistics)
        self._reranker = reranker
        self._rerank_depth = rerank_depth
        self._count_limit = settings.count_limit
        # A query's total and facets, reused by its other pages for a short while.
        self._counted: TTLCache[SearchPlan, Counted] | None = (
            TTLCache(maxsize=settings.totals_cache_size, ttl=settings.totals_cache_ttl_s)
            if settings.totals_cache_ttl_s > 0
            else None
        )

    def plan(self, query: SearchQuery) -> SearchPlan:
        """The plan :meth:`search` runs for ``query``; raises InvalidRequestError (422)."""
        return self._planner.plan(query)

    async def search(self, query: SearchQuery) -> SearchResult:
        """Run ``query``; raises InvalidRequestError (422) or SearchUnavailableError (503)."""
        clock = StageClock()
        plan = self._planner.plan(query)
        clock.lap(Stage.PLAN)
        key = plan.counting_key()
        cached = self._counted.get(key) if self._counted is not None else None
        matches = (
            None
            if cached is not None
            else MatchRequest(self._count_limit, match_fields(plan.ranking.facets))
        )
        retrieval = await self._retriever.retrieve(plan, clock=clock, matches=matches)
        outcomes = retrieval.outcomes
        ranked = rank(plan.ranking, _answered(outcomes), skipped=_skipped(outcomes))
        clock.lap(Stage.FUSION)
        counted = cached
        if counted is None:
            legs = taking_part(
                {o.leg: o.hits for o in outcomes if o.hits is not None},
                [o.leg for o in outcomes if o.report.status in _DEGRADED],
            )
            counted = count(plan.ranking, ranked, legs=legs, matches=retrieval.matches)
            # Never a degraded answer, nor a window counted because the matches could not be.
            complete = not any(n is None for n in legs.values()) and (
                counted.totals.scope is CountScope.MATCHES or plan.ranking.min_score is not None
            )
            if self._counted is not None and complete:
                self._counted[key] = counted
        clock.lap(Stage.FACETS)
        units, rerank_scores = await self._rerank(plan, ranked)
        clock.lap(Stage.RERANK)
        hits = tuple(
            _hydrate(plan, unit=unit, fields=ranked.fields, rerank_scores=rerank_scores)
            for unit in page(units, spec=plan.ranking)
        )
        clock.lap(Stage.HYDRATE)
        timings = clock.timings()
        result = SearchResult(
            query=plan.query,
            mode=plan.mode,
            method=plan.ranking.method,
            hits=hits,
            totals=counted.totals,
            window=min(len(units), plan.ranking.window),
            facets=counted.facets,
            facet_basis=counted.facet_basis,
            offset=plan.ranking.offset,
            top_k=plan.ranking.top_k,
            degraded=tuple(o.leg for o in outcomes if o.report.status in _DEGRADED),
            legs=tuple(o.report for o in outcomes),
            took_ms=timings.total_ms,
            rerank_ms=timings.rerank_ms if plan.rerank else None,
            weights=ranked.weights,
            applied_weights=ranked.applied_weights,
            timings=timings,
        )
        logger.info(
            "search.done tenant=%s mode=%s hits=%d degraded=%s took_ms=%.1f",
            plan.tenant_id,
            plan.mode,
            len(hits),
            ",".join(result.degraded) or "-",
            result.took_ms,
        )
        return result

    async def _rerank(
        self, plan: SearchPlan, ranked: Ranked
    ) -> tuple[Sequence[Unit], dict[str, float]]:
        """Rescore the best ``rerank_depth`` units with the cross-encoder; the rest keep
        their fused order behind them."""
        if not plan.rerank:
            return ranked.units, {}
        reranker = self._reranker
        if reranker is None:  # the planner refuses this; kept for the type checker
            raise InvalidRequestError("rerank: no reranker is configured on this server")
        head, tail = ranked.units[: self._rerank_depth], ranked.units[self._rerank_depth :]
        passages = [_passage(ranked.fields[f.id]) for f, _ in head]
        scores = await anyio.to_thread.run_sync(reranker.score, plan.query, passages)
        ordered = rerank(head, scores)
        return [unit for unit, _ in ordered] + list(tail), {u[0].id: s for u, s in ordered}


_DEGRADED = frozenset({LegStatus.ERROR, LegStatus.TIMEOUT})


def _answered(outcomes: Sequence[LegOutcome]) -> dict[Leg, tuple[StoredHit, ...]]:
    """The candidates of every leg that answered; raises SearchUnavailableError if none did."""
    answered = {o.leg: o.hits for o in outcomes if o.hits is not None}
    if not answered:
        detail = "; ".join(f"{o.leg}: {o.report.error}" for o in outcomes if o.report.error)
        raise SearchUnavailableError(f"every search leg failed ({detail})")
    return answered


def _skipped(outcomes: Sequence[LegOutcome]) -> tuple[Leg, ...]:
    return tuple(o.leg for o in outcomes if o.report.status is LegStatus.SKIPPED)


def _hydrate(
    plan: SearchPlan,
    *,
    unit: Unit,
    fields: Mapping[str, Mapping[str, Any]],
    rerank_scores: Mapping[str, float],
) -> SearchHit:
    """One hit of the page: its stored fields, its explanation and its snippet."""
    fused, matching = unit
    stored = fields[fused.id]
    rerank_score = rerank_scores.get(fused.id)
    text = str(stored.get("text", ""))
    return SearchHit(
        chunk_id=fused.id,
        document_id=str(stored.get("document_id", "")),
        external_id=str(stored.get("external_id", "")),
        title=str(stored.get("title", "")),
        text=text,
        score=fused.score if rerank_score is None else rerank_score,
        explanation=_explain(fused, method=plan.ranking.method, rerank_score=rerank_score),
        char_start=_offset(stored.get("char_start")),
        char_end=_offset(stored.get("char_end")),
        snippet=make_snippet(text, plan.query) if plan.highlight else None,
        matching_chunks=matching,
        source=str(stored.get("source", "")),
        lang=str(stored.get("lang", "")),
        tags=tuple(stored.get("tags") or ()),
        metadata=dict(stored.get("metadata") or {}),
    )


def _offset(value: Any) -> int | None:
    return None if value is None else int(value)


def _explain(fused: FusedHit, *, method: FusionMethod, rerank_score: float | None) -> Explanation:
    return Explanation(
        method=method,
        fused_score=fused.score,
        dense_rank=fused.ranks.get(Leg.DENSE.value),
        sparse_rank=fused.ranks.get(Leg.SPARSE.value),
        dense_score=fused.scores.get(Leg.DENSE.value),
        sparse_score=fused.scores.get(Leg.SPARSE.value),
        rerank_score=rerank_score,
    )


def _passage(fields: Mapping[str, Any]) -> str:
    title = str(fields.get("title", ""))
    text = str(fields.get("text", ""))
    return f"{title}\n{text}" if title else text
