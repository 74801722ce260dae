"""The search service: pages, totals, facets and cursors on top of retrieval.

* :mod:`~hsearch.search.planner` validates the request once into an immutable plan;
* :mod:`~hsearch.search.passages` (the retrieval call) runs the registered sources
  (:mod:`~hsearch.search.sources`) in parallel under one :class:`~hsearch.budget.Budget`
  and fuses what they answered (:mod:`~hsearch.search.ranking`, pure);
* this service counts the total and facets, reranks when asked, sorts the window when
  asked (:mod:`~hsearch.search.sorting`), cuts the page and hydrates it: hits with
  their explanations and snippets. The legs return their candidates without the text
  (the one large field), which is read for the page's hits only, in one store request
  by primary key.

Every stage is timed on one clock (:mod:`~hsearch.search.timings`); the response
carries the stages' times, which sum to ``took_ms``. A leg that errors or misses its
deadline is reported in ``degraded`` and the other legs' answers are returned; when no
leg answers the search raises :class:`~hsearch.errors.SearchUnavailableError` (503). A
query the model cannot encode in time degrades the dense leg the same way, where the
keyword leg can run without the model (:mod:`~hsearch.search.retrieval`).
The tenant's data is read through the store and the caches' readers, never through
SQL here (an import contract).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import anyio.to_thread
from cachetools import TTLCache

from hsearch.budget import Budget
from hsearch.cache.embeddings import QueryEncoder
from hsearch.config import SearchSettings
from hsearch.embedding.protocol import Embedder
from hsearch.errors import BackendError, InvalidRequestError, SearchUnavailableError
from hsearch.graph.store import LinkedPages
from hsearch.lexical.additions import TermExpansion
from hsearch.lexical.expansion import QueryExpander
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
from hsearch.search.highlight import highlighted_query, make_snippet, term_matches
from hsearch.search.models import SearchHit, SearchQuery, SearchResult
from hsearch.search.passages import DEGRADED, Fused, RetrievalService, explain, stored_fields
from hsearch.search.planner import QueryPlanner, SearchPlan
from hsearch.search.ranking import Ranked, Unit, page, rerank
from hsearch.search.retrieval import LegOutcome, MatchRequest, Retriever
from hsearch.search.sorting import sort_window
from hsearch.search.sources import Source, SourceRegistry, store_sources
from hsearch.search.timings import Stage, StageClock, StageTimings
from hsearch.search.totals import Counted, count, match_fields, taking_part
from hsearch.vectorstore.protocol import VectorStore

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
        extra_sources: Sequence[Source] = (),
        expander: QueryExpander | None = None,
        linked: LinkedPages | None = None,
    ) -> None:
        """``linked``: reads the documents hits link to and from (``include_linked``;
        ``None``: a request asking for them gets none)."""
        self._linked = linked
        sources = store_sources(store, *extra_sources)
        self._planner = QueryPlanner(
            settings, encoder=embedder.info, can_rerank=reranker is not None, sources=sources
        )
        retriever = Retriever(
            embedder=embedder,
            store=store,
            statistics=statistics,
            sources=sources,
            queries=queries,
            expander=expander,
            fallback_encode_share=settings.fallback_encode_share,
        )
        self._retrieval = RetrievalService(planner=self._planner, retriever=retriever, store=store)
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

    @property
    def retrieval(self) -> RetrievalService:
        """The retrieval call this service builds its pages on, for compositions."""
        return self._retrieval

    @property
    def sources(self) -> SourceRegistry:
        """The registered sources (legs), in their order."""
        return self._retrieval.sources

    def plan(self, query: SearchQuery) -> SearchPlan:
        """The plan :meth:`search` runs for ``query``; raises InvalidRequestError (422)."""
        return self._planner.plan(query)

    async def search(self, query: SearchQuery) -> SearchResult:
        """Run ``query``; raises InvalidRequestError (422) or SearchUnavailableError (503)."""
        result, plan = await self._search(query)
        return await self._with_linked(plan, result)

    async def _with_linked(self, plan: SearchPlan, result: SearchResult) -> SearchResult:
        """The hits with the documents they link to and from, when the plan asks (read
        on the tenant's data as it is now: a cached page's too). When they cannot be
        read the hits come without them (``linked_pages`` stays ``None``), logged."""
        if not plan.include_linked or self._linked is None or not result.hits:
            return result
        try:
            pages = await self._linked.read(
                plan.tenant_id, {h.document_id for h in result.hits}, filter=plan.filter
            )
        except BackendError as exc:
            logger.warning("search.linked_pages.unavailable error=%s", exc.message)
            return result
        return replace(
            result,
            hits=tuple(replace(h, linked_pages=pages.get(h.document_id, ())) for h in result.hits),
        )

    async def _search(self, query: SearchQuery) -> tuple[SearchResult, SearchPlan]:
        clock = StageClock()
        cursor = Cursor.decode(query.cursor) if query.cursor is not None else None
        if cursor is None:
            plan = self._planner.plan(query)
        else:
            # Whose cursor first (its offset may not fit another search's window).
            plan = self._planner.plan(replace(query, offset=0))
            cursor.check(plan)
            plan = self._planner.at_offset(plan, cursor.offset)
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
                return served, plan
            logger.info("search.snapshot.gone: the page is cut from the live list")
        if self._results is None:
            return await self._compute(plan, clock, await self._version(plan)), plan
        result = await self._results.serve(
            plan, clock=clock, compute=partial(self._compute, plan, clock)
        )
        if result.cached:  # a computed search was counted as it finished
            _record(plan, (), outcome="ok")
        return result, plan

    async def _version(self, plan: SearchPlan) -> DataVersion | None:
        """The tenant's data version, for reusing counts (no result cache read it); read
        only for a search that counts its keyword matches (an exact total: the one count
        worth reusing)."""
        if self._counted is None or self._generations is None or not plan.counts_matches:
            return None
        try:
            generation, age = await self._generations.read(plan.tenant_id)
        except BackendError as exc:
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
            MatchRequest(self._count_limit, match_fields(plan.ranking.facets))
            # The keyword matches hold no phrase nor exclusion: with them, the window counts.
            if cached is None and plan.counts_matches and not plan.constrained
            else None
        )
        budget = Budget.of(plan.budget_s, started=clock.started)
        retrieval = await self._retrieval.run_legs(
            plan, budget=budget, clock=clock, matches=matches
        )
        try:
            fused = self._retrieval.fuse(plan, retrieval, clock=clock)
        except SearchUnavailableError:
            _record(plan, retrieval.outcomes, outcome="error")
            raise
        outcomes, ranked = fused.outcomes, fused.ranked
        counted = (
            cached if cached is not None else self._count(plan, fused, key=key, version=version)
        )
        clock.lap(Stage.FACETS)
        texts: dict[str, str] = dict(fused.retrieval.texts)
        expansions = fused.retrieval.expansions
        units, rerank_scores = await self._rerank(plan, ranked, texts)
        clock.lap(Stage.RERANK)
        spec = plan.ranking
        window = min(len(units), spec.window)
        if spec.sort:
            # The window in the requested order: pages, cursors' snapshots and offsets
            # are all cut from this list.
            units = sort_window(
                units[:window], spec.sort, fields=lambda unit: ranked.fields[unit[0].id]
            )
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
                fused,
                unit=unit,
                text=texts.get(unit[0].id, ""),
                rerank_scores=rerank_scores,
                snippet=not snapshot or spec.offset <= i < end,
                expansions=expansions,
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
            degraded=fused.degraded,
            legs=fused.legs,
            took_ms=0.0,
            weights=ranked.weights,
            applied_weights=ranked.applied_weights,
            keyword_coverage=fused.retrieval.keyword_coverage,
            embedding_cached=fused.retrieval.embedding_cached,
            expansions=expansions,
            sort=spec.sort,
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

    def _count(
        self,
        plan: SearchPlan,
        fused: Fused,
        *,
        key: tuple[SearchPlan, str] | None,
        version: DataVersion | None,
    ) -> Counted:
        """The total and facets of ``fused``, kept for the query's other pages when they
        are complete and the data settled."""
        legs = taking_part(
            {o.leg: o.hits for o in fused.outcomes if o.hits is not None},
            [o.leg for o in fused.outcomes if o.report.status in DEGRADED],
        )
        for leg in fused.retrieval.filled:
            # Conditions dropped some of a full leg's candidates: more would follow.
            if legs.get(leg) is not None:
                legs[leg] = max(legs[leg] or 0, plan.ranking.window)
        counted = count(
            plan.ranking,
            fused.ranked,
            legs=legs,
            tracking=plan.track_total,
            matches=fused.retrieval.matches,
            # A term's document frequency counts chunks that may fail a phrase or an
            # exclusion: with conditions, only what the legs returned is known.
            known_matches=0 if plan.constrained else fused.retrieval.known_matches,
        )
        # Never a degraded answer, nor a bound given because the matches could not be
        # counted.
        complete = not any(n is None for n in legs.values()) and not counted.fallback
        settled = version is not None and version.age_s >= self._settle_s
        if self._counted is not None and key is not None and complete and settled:
            self._counted[key] = counted
        return counted

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
        scores = await anyio.to_thread.run_sync(reranker.score, plan.text, passages)
        ordered = rerank(head, scores)
        return [unit for unit, _ in ordered] + list(tail), {u[0].id: s for u, s in ordered}

    async def _texts(self, plan: SearchPlan, chunk_ids: Sequence[str]) -> dict[str, str]:
        return await self._retrieval.texts(plan, chunk_ids)

    async def _page_of(
        self, window: SearchResult, *, plan: SearchPlan, snapshot: str, clock: StageClock
    ) -> SearchResult:
        """The page ``plan`` asks for, cut from a kept window (a cursor's snapshot), with
        its texts read afresh (a chunk deleted since is left out)."""
        spec = plan.ranking
        end = min(spec.offset + spec.top_k, len(window.hits))
        listed = window.hits[spec.offset : end]
        texts = await self._texts(plan, [hit.chunk_id for hit in listed])
        marked = highlighted_query(plan.text, window.expansions)
        hits = tuple(
            replace(
                hit,
                text=texts[hit.chunk_id],
                snippet=make_snippet(texts[hit.chunk_id], marked) if plan.highlight else None,
                explanation=replace(
                    hit.explanation,
                    matches=term_matches(texts[hit.chunk_id], window.expansions),
                ),
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
        legs=[(o.leg, o.report.status.value, o.report.took_ms) for o in outcomes],
        stages_ms=(
            None
            if timings is None
            else {stage.value: getattr(timings, f"{stage.value}_ms") for stage in Stage}
        ),
    )


def _hydrate(
    fused: Fused,
    *,
    unit: Unit,
    text: str,
    rerank_scores: Mapping[str, float],
    snippet: bool = True,
    expansions: tuple[TermExpansion, ...] = (),
) -> SearchHit:
    """One hit of the page: its stored fields and ``text``, its explanation (with the
    ``expansions`` its text holds) and (with ``snippet``, when the plan highlights) its
    snippet."""
    hit, matching = unit
    plan = fused.plan
    rerank_score = rerank_scores.get(hit.id)
    explanation = explain(hit, plan=plan, outcomes=fused.outcomes, rerank_score=rerank_score)
    if expansions and text:
        explanation = replace(explanation, matches=term_matches(text, expansions))
    marked = highlighted_query(plan.text, expansions)
    return SearchHit(
        chunk_id=hit.id,
        text=text,
        score=hit.score if rerank_score is None else rerank_score,
        explanation=explanation,
        snippet=make_snippet(text, marked) if plan.highlight and snippet else None,
        matching_chunks=matching,
        **stored_fields(fused.ranked.fields[hit.id]),
    )


def _passage(fields: Mapping[str, Any], text: str) -> str:
    title = str(fields.get("title", ""))
    return f"{title}\n{text}" if title else text
