"""The retrieval stage: encode the query for the legs that run, then run them in parallel.

A leg is a value, :class:`LegRequest` (leg, vector, filter, limit, deadline), like
pymilvus's ``AnnSearchRequest`` or qdrant's ``Prefetch``: another signal is another
request, not another method. The legs of a round run concurrently
(:func:`asyncio.gather`); each answers, fails (``error``) or misses its deadline
(``timeout``) on its own, and a leg that is not run is reported ``skipped``.

One deadline per request: the plan's budget, counted from the start of the request,
covers encoding, the tenant statistics and the legs together; a leg gets what is left
of it when it starts. The encoder computes only the sides the legs about to run read
(a keyword search no dense vector). Legs the plan holds back
(:class:`~hsearch.search.planner.LegRole`) run in a second round, encoded then, only if
the first round's answers make them count.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Collection, Sequence
from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from hsearch.cache.embeddings import QueryEncoder
from hsearch.embedding.protocol import Embedder, SparseKind
from hsearch.errors import BackendError, VectorStoreTimeoutError
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.models import LegReport
from hsearch.search.planner import LegRole, SearchPlan
from hsearch.search.timings import Stage, StageClock
from hsearch.search.totals import Matches
from hsearch.types import Leg, LegStatus, SparseVector
from hsearch.vectorstore.filters import FilterNode
from hsearch.vectorstore.protocol import StoredHit, VectorStore

__all__ = [
    "DEADLINE_MARGIN_S",
    "LegOutcome",
    "LegRequest",
    "MatchRequest",
    "Retrieval",
    "Retriever",
]

logger = logging.getLogger(__name__)

# Extra time granted past a leg's deadline for the store's own timeout to land (it
# then reports why) before the leg is cancelled.
DEADLINE_MARGIN_S = 0.05

Vector = tuple[float, ...] | SparseVector

_NO_TIME_LEFT = "no time left of the request's budget to run it"


@dataclass(frozen=True, slots=True)
class LegRequest:
    """One leg to run: which signal, with what vector, under which filter, how deep,
    and by when (a :func:`time.perf_counter` instant). The tenant goes with every leg."""

    leg: Leg
    tenant_id: str
    vector: Vector
    filter: FilterNode | None
    limit: int
    deadline: float


@dataclass(frozen=True, slots=True)
class LegOutcome:
    """How a leg went: its candidates (``None`` unless it answered) and its report."""

    leg: Leg
    hits: tuple[StoredHit, ...] | None
    report: LegReport


@dataclass(frozen=True, slots=True)
class MatchRequest:
    """Count the keyword matches too (:meth:`VectorStore.match_sparse`): up to ``limit``,
    with ``fields``. Runs after the sparse leg, only if it filled its window, while the
    other legs may still run; under the request's deadline."""

    limit: int
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Retrieval:
    outcomes: tuple[LegOutcome, ...]
    """One per leg of the plan, in its order."""
    matches: Matches | None = None
    """The keyword matches, when asked for and counted in time."""
    embedding_cached: bool = False
    """Every query vector came from the query-embedding cache (the model did not run)."""


class Retriever:
    """Encodes queries and runs legs against one store."""

    def __init__(
        self,
        *,
        embedder: Embedder,
        store: VectorStore,
        statistics: LexicalStatistics,
        queries: QueryEncoder | None = None,
    ) -> None:
        self._embedder = embedder
        self._queries = queries or QueryEncoder(embedder)
        self._store = store
        self._statistics = statistics

    async def retrieve(
        self, plan: SearchPlan, *, clock: StageClock, matches: MatchRequest | None = None
    ) -> Retrieval:
        """Run the plan's legs: the primary ones, then those held back if they are due;
        with ``matches``, count the keyword matches of a primary sparse leg that filled
        its window.

        Charges ``clock`` with the encode, statistics and retrieval stages.
        """
        deadline = clock.started + plan.budget_s
        outcomes = {p.leg: _skipped(p.leg) for p in plan.legs}
        encoded: list[bool] = []
        first, counted = await self._round(
            plan,
            legs=plan.legs_in(LegRole.PRIMARY),
            deadline=deadline,
            clock=clock,
            matches=matches,
            encoded=encoded,
        )
        outcomes.update(first)
        answers = [o.hits for o in first.values()]
        later = [p.leg for p in plan.legs if p.role is not LegRole.PRIMARY and p.role.due(answers)]
        if later:
            second, _ = await self._round(
                plan, legs=later, deadline=deadline, clock=clock, encoded=encoded
            )
            outcomes.update(second)
        return Retrieval(
            tuple(outcomes[p.leg] for p in plan.legs),
            counted,
            embedding_cached=bool(encoded) and all(encoded),
        )

    async def run(self, requests: Sequence[LegRequest]) -> list[LegOutcome]:
        """Run ``requests`` concurrently; one outcome each, in order."""
        return list(await asyncio.gather(*(self.run_leg(r) for r in requests)))

    async def run_leg(self, request: LegRequest) -> LegOutcome:
        """Run one leg under its deadline; a failure or timeout is reported, not raised."""
        started = time.perf_counter()
        remaining = request.deadline - started
        if remaining <= 0:
            return _failed(request.leg, LegStatus.TIMEOUT, _NO_TIME_LEFT, started=started)
        try:
            hits = await asyncio.wait_for(
                self._search(request, timeout=remaining), remaining + DEADLINE_MARGIN_S
            )
        except TimeoutError:
            status, error = LegStatus.TIMEOUT, f"no answer within {remaining:.3f}s"
        except VectorStoreTimeoutError as exc:  # the store's own deadline fired
            status, error = LegStatus.TIMEOUT, f"{type(exc).__name__}: {exc.message}"
        except BackendError as exc:  # a failing backend degrades the leg, not the request
            status, error = LegStatus.ERROR, f"{type(exc).__name__}: {exc.message}"
        else:
            took = (time.perf_counter() - started) * 1000
            report = LegReport(request.leg, LegStatus.OK, took, len(hits))
            return LegOutcome(request.leg, tuple(hits), report)
        return _failed(request.leg, status, error, started=started)

    async def encode(
        self,
        plan: SearchPlan,
        *,
        legs: Collection[Leg],
        clock: StageClock,
        encoded: list[bool] | None = None,
        failed: dict[Leg, str] | None = None,
    ) -> dict[Leg, Vector]:
        """The query vectors ``legs`` read, and nothing else; appends to ``encoded``
        whether they came from the query-embedding cache.

        A leg whose vector cannot be made (the sparse leg when the tenant's statistics
        cannot be read: the metadata database down) is left out, its error put in
        ``failed``: that leg fails, not the search.

        Encoding is tenant-independent (so its cache serves every tenant); raw term
        counts then get the tenant's IDF (BM25 as an inner product: the query side
        carries the IDF) as a stage of its own, after the cache.
        """
        dense, sparse = Leg.DENSE in legs, Leg.SPARSE in legs
        embedding, cached = await self._queries.embed_query(plan.query, dense=dense, sparse=sparse)
        if encoded is not None:
            encoded.append(cached)
        clock.lap(Stage.ENCODE)
        vectors: dict[Leg, Vector] = {}
        if dense:
            vectors[Leg.DENSE] = embedding.dense
        if sparse:
            weights = embedding.sparse
            if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
                weigh = partial(self._statistics.weigh_query, plan.tenant_id, weights)
                try:
                    weights = await anyio.to_thread.run_sync(weigh)
                except BackendError as exc:
                    clock.lap(Stage.STATISTICS)
                    if failed is not None:
                        failed[Leg.SPARSE] = f"{type(exc).__name__}: {exc.message}"
                    return vectors
                clock.lap(Stage.STATISTICS)
            vectors[Leg.SPARSE] = weights
        return vectors

    def _search(self, request: LegRequest, *, timeout: float) -> Awaitable[list[StoredHit]]:
        """The store's search for the request's leg (the leg is data: one branch per
        signal the store can search)."""
        vector = request.vector
        if request.leg is Leg.DENSE and not isinstance(vector, SparseVector):
            return self._store.search_dense(
                vector,
                tenant_id=request.tenant_id,
                filter=request.filter,
                limit=request.limit,
                timeout=timeout,
            )
        if request.leg is Leg.SPARSE and isinstance(vector, SparseVector):
            return self._store.search_sparse(
                vector,
                tenant_id=request.tenant_id,
                filter=request.filter,
                limit=request.limit,
                timeout=timeout,
            )
        msg = f"no search for a {request.leg} leg with a {type(vector).__name__} vector"
        raise TypeError(msg)

    async def count_matches(self, request: LegRequest, matches: MatchRequest) -> Matches | None:
        """The keyword matches of a sparse leg's request, or ``None`` (logged) when the
        store fails or misses the deadline: totals then fall back to the window."""
        vector = request.vector
        if not isinstance(vector, SparseVector):
            msg = f"keyword matches need a sparse vector, not a {type(vector).__name__}"
            raise TypeError(msg)
        remaining = request.deadline - time.perf_counter()
        if remaining <= 0:
            return None
        try:
            hits = await asyncio.wait_for(
                self._store.match_sparse(
                    vector,
                    tenant_id=request.tenant_id,
                    filter=request.filter,
                    limit=matches.limit,
                    fields=matches.fields,
                    timeout=remaining,
                ),
                remaining + DEADLINE_MARGIN_S,
            )
        except (TimeoutError, BackendError) as exc:
            logger.warning("search.count.failed error=%s: %s", type(exc).__name__, exc)
            return None
        return Matches(tuple(hits), matches.limit)

    async def _leg_then_matches(
        self, request: LegRequest, matches: MatchRequest | None
    ) -> tuple[LegOutcome, Matches | None]:
        """The leg, then with ``matches`` its keyword matches if it filled its window
        (else it returned them all, and counting them again would be wasted work)."""
        outcome = await self.run_leg(request)
        if matches is None or outcome.hits is None or len(outcome.hits) < request.limit:
            return outcome, None
        return outcome, await self.count_matches(request, matches)

    async def _round(
        self,
        plan: SearchPlan,
        *,
        legs: Sequence[Leg],
        deadline: float,
        clock: StageClock,
        matches: MatchRequest | None = None,
        encoded: list[bool] | None = None,
    ) -> tuple[dict[Leg, LegOutcome], Matches | None]:
        now = time.perf_counter()
        counted: Matches | None = None
        if now >= deadline:
            # No time left to encode or search: the legs missed the deadline.
            outcomes = [_failed(leg, LegStatus.TIMEOUT, _NO_TIME_LEFT, started=now) for leg in legs]
        else:
            failed: dict[Leg, str] = {}
            vectors = await self.encode(
                plan, legs=legs, clock=clock, encoded=encoded, failed=failed
            )
            requests = [
                LegRequest(
                    leg, plan.tenant_id, vectors[leg], plan.filter, plan.candidates, deadline
                )
                for leg in legs
                if leg in vectors
            ]
            results = await asyncio.gather(
                *(
                    self._leg_then_matches(r, matches if r.leg is Leg.SPARSE else None)
                    for r in requests
                )
            )
            outcomes = [outcome for outcome, _ in results] + [
                _failed(leg, LegStatus.ERROR, error, started=now) for leg, error in failed.items()
            ]
            counted = next((m for _, m in results if m is not None), None)
        clock.lap(Stage.RETRIEVAL)
        return {o.leg: o for o in outcomes}, counted


def _skipped(leg: Leg) -> LegOutcome:
    return LegOutcome(leg, None, LegReport(leg, LegStatus.SKIPPED, 0.0, 0))


def _failed(leg: Leg, status: LegStatus, error: str, *, started: float) -> LegOutcome:
    took = (time.perf_counter() - started) * 1000
    logger.warning("search.leg.degraded leg=%s status=%s error=%s", leg, status, error)
    return LegOutcome(leg, None, LegReport(leg, status, took, 0, error))
