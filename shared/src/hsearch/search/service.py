"""The query path, composed of its stages: plan → retrieval → ranking → hydrate.

* :mod:`~hsearch.search.planner` validates the request once into an immutable plan;
* :mod:`~hsearch.search.retrieval` encodes the query and runs the legs in parallel
  under one request deadline;
* :mod:`~hsearch.search.ranking` fuses, thresholds, groups, counts facets and cuts the
  page (pure), with the cross-encoder in between when asked for;
* hydration maps the page to hits with their explanations and snippets; the legs
  return their candidates without the text (the one large field), which is read for
  the page's hits only, in one store request by primary key.

Every stage is timed on one clock (:mod:`~hsearch.search.timings`); the response
carries the stages' times, which sum to ``took_ms``. A leg that errors or misses its
deadline is reported in ``degraded`` and the other leg's answer is returned; when no
leg answers the search raises :class:`~hsearch.errors.SearchUnavailableError` (503).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import anyio.to_thread
from cachetools import TTLCache
from sqlalchemy.exc import SQLAlchemyError

from hsearch.cache.embeddings import QueryEncoder
from hsearch.config import SearchSettings
from hsearch.embedding.protocol import Embedder
from hsearch.errors import BackendError, InvalidRequestError, SearchUnavailableError
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.metrics import instruments
from hsearch.rerank.protocol import Reranker
from hsearch.search.caching import (
    Cursor,
    DataVersion,
    GenerationReader,
    PageSnapshots,
    ResultCache,
    search_id,
)
from hsearch.search.fusion import FusedHit
from hsearch.search.highlight import make_snippet
from hsearch.search.models import Explanation, SearchHit, SearchQuery, SearchResult
from hsearch.search.planner import QueryPlanner, SearchPlan
from hsearch.search.ranking import Ranked, Unit, page, rank, rerank
from hsearch.search.retrieval import LegOutcome, MatchRequest, Retriever
from hsearch.search.timings import Stage, StageClock, StageTimings
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
        results: ResultCache | None = None,
        queries: QueryEncoder | None = None,
        snapshots: PageSnapshots | None = None,
        generations: GenerationReader | None = None,
        settle_s: float = 0.0,
    ) -> None:
        self._planner = QueryPlanner(
            settings, encoder=embedder.info, can_rerank=reranker is not None
        )
        self._retriever = Retriever(
            embedder=embedder, store=store, statistics=statistics, queries=queries
        )
        self._store = store
        self._results = results
        self._snapshots = snapshots
        self._reranker = reranker
        self._rerank_depth = rerank_depth
        self._count_limit = settings.count_limit
        # A query's total and facets, reused by its other pages for a short while, on
        # the tenant's data version they were counted on: a write changes the version,
        # so the next page counts afresh. Without a way to read versions, nothing is
        # reused.
        self._generations = generations
        self._settle_s = settle_s
        self._counted: TTLCache[tuple[SearchPlan, str], Counted] | None = (
            TTLCache(maxsize=settings.totals_cache_size, ttl=settings.totals_cache_ttl_s)
            if settings.totals_cache_ttl_s > 0 and generations is not None
            else None
        )

    def plan(self, query: SearchQuery) -> SearchPlan:
        """The plan :meth:`search` runs for ``query``; raises InvalidRequestError (422)."""
        return self._planner.plan(query)

    async def search(self, query: SearchQuery) -> SearchResult:
        """Run ``query``; raises InvalidRequestError (422) or SearchUnavailableError (503)."""
        clock = StageClock()
        cursor = Cursor.decode(query.cursor) if query.cursor is not None else None
        if cursor is not None:
            # Whose cursor first (its offset may not fit another search's window).
            cursor.check(self._planner.plan(replace(query, offset=0)))
            query = replace(query, offset=cursor.offset)
        plan = self._planner.plan(query)
        clock.lap(Stage.PLAN)
        if cursor is not None and cursor.snapshot is not None and self._snapshots is not None:
            window = await self._snapshots.load(plan, cursor.snapshot)
            if window is not None:  # served from the kept window
                try:
                    served = await self._page_of(
                        window, plan=plan, snapshot=cursor.snapshot, clock=clock
                    )
                except SearchUnavailableError:
                    _record(plan, (), outcome="error")
                    raise
                _record(plan, (), outcome="ok")
                return served
            logger.info("search.snapshot.gone: the page is cut from the live list")
        if self._results is None:
            return await self._compute(plan, clock, await self._version(plan))
        result = await self._results.serve(
            plan, clock=clock, compute=partial(self._compute, plan, clock)
        )
        if result.cached:  # a computed search was counted as it finished
            _record(plan, (), outcome="ok")
        return result

    async def _version(self, plan: SearchPlan) -> DataVersion | None:
        """The tenant's data version, for reusing counts (no result cache read it); not
        read for a search that asks for no total (it counts only its window)."""
        if self._counted is None or self._generations is None or not plan.track_total:
            return None
        try:
            generation, age = await self._generations.read(plan.tenant_id)
        except SQLAlchemyError as exc:
            logger.warning("search.totals.version_unavailable error=%s", type(exc).__name__)
            return None
        return DataVersion(generation, age)

    async def _compute(
        self, plan: SearchPlan, clock: StageClock, version: DataVersion | None
    ) -> SearchResult:
        """Retrieve, rank, count and hydrate ``plan``: the search itself, on the
        tenant's data ``version`` (``None``: unknown, nothing counted is reused)."""
        key = (plan.counting_key(), version.generation) if version is not None else None
        cached = self._counted.get(key) if self._counted is not None and key else None
        matches = (
            None
            if cached is not None or not plan.track_total
            else MatchRequest(self._count_limit, match_fields(plan.ranking.facets))
        )
        retrieval = await self._retriever.retrieve(plan, clock=clock, matches=matches)
        outcomes = retrieval.outcomes
        try:
            answered = _answered(outcomes)
        except SearchUnavailableError:
            _record(plan, outcomes, outcome="error")
            raise
        ranked = rank(plan.ranking, answered, skipped=_skipped(outcomes))
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
            settled = version is not None and version.age_s >= self._settle_s
            if self._counted is not None and key is not None and complete and settled:
                self._counted[key] = counted
        clock.lap(Stage.FACETS)
        texts: dict[str, str] = {}
        units, rerank_scores = await self._rerank(plan, ranked, texts)
        clock.lap(Stage.RERANK)
        spec = plan.ranking
        window = min(len(units), spec.window)
        end = min(spec.offset + spec.top_k, window)
        more = end < window
        snapshot = more and self._snapshots is not None
        wanted = [fused.id for fused, _ in units[spec.offset : end] if fused.id not in texts]
        try:
            texts.update(await self._texts(plan, wanted))
        except SearchUnavailableError:  # the legs answered, but there is nothing to show
            _record(plan, outcomes, outcome="error")
            raise
        # A page with a next one keeps the whole window for it (stable pages); the
        # texts and snippets of other pages are read and made when they are served.
        hits = tuple(
            _hydrate(
                plan,
                unit=unit,
                fields=ranked.fields,
                text=texts.get(unit[0].id, ""),
                rerank_scores=rerank_scores,
                snippet=not snapshot or spec.offset <= i < end,
            )
            for i, unit in enumerate(units[:window] if snapshot else page(units, spec=spec))
        )
        clock.lap(Stage.HYDRATE)
        result = SearchResult(
            query=plan.query,
            mode=plan.mode,
            method=plan.ranking.method,
            hits=hits,
            totals=counted.totals,
            window=window,
            facets=counted.facets,
            facet_basis=counted.facet_basis,
            offset=plan.ranking.offset,
            top_k=plan.ranking.top_k,
            degraded=tuple(o.leg for o in outcomes if o.report.status in _DEGRADED),
            legs=tuple(o.report for o in outcomes),
            took_ms=0.0,
            weights=ranked.weights,
            applied_weights=ranked.applied_weights,
            embedding_cached=retrieval.embedding_cached,
        )
        kept: str | None = None
        if snapshot and self._snapshots is not None:
            kept = await self._snapshots.save(plan, replace(result, offset=0, top_k=window))
            result = replace(result, hits=hits[spec.offset : end])
            clock.lap(Stage.CACHE)
        # A chunk deleted since the legs ran has no text left: it is not shown.
        result = replace(result, hits=tuple(h for h in result.hits if h.chunk_id in texts))
        timings = clock.timings()
        result = replace(
            result,
            timings=timings,
            took_ms=timings.total_ms,
            rerank_ms=timings.rerank_ms if plan.rerank else None,
            next_cursor=Cursor(end, kept, search_id(plan)).encode() if more else None,
        )
        _record(plan, outcomes, outcome="degraded" if result.degraded else "ok", timings=timings)
        logger.info(
            "search.done tenant=%s mode=%s hits=%d degraded=%s took_ms=%.1f",
            plan.tenant_id,
            plan.mode,
            len(result.hits),
            ",".join(result.degraded) or "-",
            result.took_ms,
        )
        return result

    async def _rerank(
        self, plan: SearchPlan, ranked: Ranked, texts: dict[str, str]
    ) -> tuple[Sequence[Unit], dict[str, float]]:
        """Rescore the best ``rerank_depth`` units with the cross-encoder; the rest keep
        their fused order behind them. The texts it reads go to ``texts``."""
        if not plan.rerank:
            return ranked.units, {}
        reranker = self._reranker
        if reranker is None:  # the planner refuses this; kept for the type checker
            raise InvalidRequestError("rerank: no reranker is configured on this server")
        depth = self._rerank_depth
        texts.update(await self._texts(plan, [f.id for f, _ in ranked.units[:depth]]))
        # A chunk deleted since the legs ran has no text left: it is not reranked.
        head = [unit for unit in ranked.units[:depth] if unit[0].id in texts]
        tail = ranked.units[depth:]
        passages = [_passage(ranked.fields[f.id], texts[f.id]) for f, _ in head]
        scores = await anyio.to_thread.run_sync(reranker.score, plan.query, passages)
        ordered = rerank(head, scores)
        return [unit for unit, _ in ordered] + list(tail), {u[0].id: s for u, s in ordered}

    async def _texts(self, plan: SearchPlan, chunk_ids: Sequence[str]) -> dict[str, str]:
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

    async def _page_of(
        self, window: SearchResult, *, plan: SearchPlan, snapshot: str, clock: StageClock
    ) -> SearchResult:
        """The page ``plan`` asks for, cut from a kept window (a cursor's snapshot), with
        its texts read afresh (a chunk deleted since is left out)."""
        spec = plan.ranking
        end = min(spec.offset + spec.top_k, len(window.hits))
        listed = window.hits[spec.offset : end]
        texts = await self._texts(plan, [hit.chunk_id for hit in listed])
        hits = tuple(
            replace(
                hit,
                text=texts[hit.chunk_id],
                snippet=make_snippet(texts[hit.chunk_id], plan.query) if plan.highlight else None,
            )
            for hit in listed
            if hit.chunk_id in texts
        )
        clock.lap(Stage.CACHE)
        timings = clock.timings()
        return replace(
            window,
            hits=hits,
            offset=spec.offset,
            top_k=spec.top_k,
            next_cursor=(
                Cursor(end, snapshot, search_id(plan)).encode() if end < len(window.hits) else None
            ),
            cached=True,
            embedding_cached=False,
            timings=timings,
            took_ms=timings.total_ms,
            rerank_ms=0.0 if plan.rerank else None,
        )


_DEGRADED = frozenset({LegStatus.ERROR, LegStatus.TIMEOUT})


def _record(
    plan: SearchPlan,
    outcomes: Sequence[LegOutcome],
    *,
    outcome: str,
    timings: StageTimings | None = None,
) -> None:
    """The search in the metrics: its outcome, each leg, and each stage's time."""
    instruments.record_search(
        tenant=plan.tenant_id,
        mode=plan.mode.value,
        outcome=outcome,
        legs=[(o.leg.value, o.report.status.value, o.report.took_ms) for o in outcomes],
        stages_ms=(
            None
            if timings is None
            else {stage.value: getattr(timings, f"{stage.value}_ms") for stage in Stage}
        ),
    )


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
    text: str,
    rerank_scores: Mapping[str, float],
    snippet: bool = True,
) -> SearchHit:
    """One hit of the page: its stored fields and ``text``, its explanation and (with
    ``snippet``, when the plan highlights) its snippet."""
    fused, matching = unit
    stored = fields[fused.id]
    rerank_score = rerank_scores.get(fused.id)
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
        snippet=make_snippet(text, plan.query) if plan.highlight and snippet else None,
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


def _passage(fields: Mapping[str, Any], text: str) -> str:
    title = str(fields.get("title", ""))
    return f"{title}\n{text}" if title else text
