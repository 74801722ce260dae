"""Retrieval: legs as values run in parallel under one request deadline, timeouts told
from errors, legs with weight 0 skipped, and only the query sides the legs read encoded."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.budget import Budget
from hsearch.cache.embeddings import QueryEncoder
from hsearch.config import SearchSettings
from hsearch.embedding.batching import QueryBatcher
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError, SearchUnavailableError
from hsearch.search.models import LegReport, SearchQuery, SearchResult
from hsearch.search.planner import QueryPlanner
from hsearch.search.retrieval import DEADLINE_MARGIN_S, KEYWORD_FALLBACK, LegRequest, Retriever
from hsearch.search.service import SearchService
from hsearch.search.sources import SourceQuery, store_sources
from hsearch.search.timings import StageClock
from hsearch.types import Leg, LegStatus, SearchMode
from hsearch.vectorstore.filters import parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.budget import UNHURRIED
from tests.unit.search.corpus import (
    TENANT,
    AilingEmbedder,
    AilingModelSparseEmbedder,
    CountingStatistics,
    LatinOnlyEmbedder,
    ModelSparseEmbedder,
    ScriptedStore,
    index,
)


class Search:
    """A search service over the indexed corpus, with every part within reach."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        embedder: FakeEmbedder | None = None,
        *,
        settings: SearchSettings | None = None,
        queries: QueryEncoder | None = None,
        **behaviour: str | float,
    ) -> None:
        self.embedder = embedder or FakeEmbedder()
        self.store = ScriptedStore(index(sessions, self.embedder)._rows, **behaviour)
        self.statistics = CountingStatistics(sessions)
        self.service = SearchService(
            embedder=self.embedder,
            store=self.store,
            statistics=self.statistics,
            settings=settings or SearchSettings(**UNHURRIED),
            queries=queries,
        )

    async def __call__(self, query: str = "rivers", **options: Any) -> SearchResult:
        return await self.service.search(SearchQuery(tenant_id=TENANT, query=query, **options))

    def computed(self) -> tuple[int, int]:
        """How many queries the encoder computed a dense and a sparse side for."""
        return self.embedder.dense_computed, self.embedder.sparse_computed

    def searched(self) -> list[str]:
        return [leg for leg, _ in self.store.calls]


def statuses(result: SearchResult) -> dict[str, str]:
    return {r.leg: r.status.value for r in result.legs}


# -- parallel legs under one deadline -------------------------------------------------------


async def test_a_stalled_leg_times_out_and_the_other_answers(
    sessions: sessionmaker[Session],
) -> None:
    search = Search(sessions, dense="stall")
    started = time.perf_counter()
    result = await search(leg_timeout_s=5.0)
    elapsed = time.perf_counter() - started
    assert statuses(result) == {"dense": "timeout", "sparse": "ok"}
    assert result.degraded == (Leg.DENSE,)
    assert result.hits
    (dense,) = (r for r in result.legs if r.leg == Leg.DENSE)
    assert dense.error is not None
    assert dense.error.startswith("no answer within")
    # The deadline holds: the stalled leg (an hour) is not waited for. The bound is
    # far above the budget, so a loaded machine cannot miss it; a search that waited
    # for the stalled leg would.
    assert elapsed < 5.0 + DEADLINE_MARGIN_S + 30
    # The store was told how long it had: at most the budget.
    assert all(0 < timeout <= 5.0 for _, timeout in search.store.calls)


async def test_the_legs_run_in_parallel(sessions: sessionmaker[Session]) -> None:
    # Each leg answers only once the other has started: run one after the other, the
    # first would stall until the deadline. No wall-clock bound is involved.
    search = Search(sessions, dense="meet", sparse="meet")
    result = await search(leg_timeout_s=10.0)
    assert statuses(result) == {"dense": "ok", "sparse": "ok"}
    assert result.timings.retrieval_ms < 10_000


async def test_a_leg_is_timed_on_its_own(sessions: sessionmaker[Session]) -> None:
    search = Search(sessions, dense=0.3, sparse=0.3)
    result = await search(leg_timeout_s=10.0)
    assert statuses(result) == {"dense": "ok", "sparse": "ok"}
    assert all(r.took_ms >= 300 for r in result.legs)
    assert result.timings.retrieval_ms >= 300


@pytest.mark.parametrize(
    ("behaviour", "status", "error"),
    [
        ("timeout", LegStatus.TIMEOUT, "VectorStoreTimeoutError: sparse search missed its"),
        ("fail", LegStatus.ERROR, "VectorStoreError: sparse index offline"),
    ],
)
async def test_the_store_tells_a_missed_deadline_from_a_failure(
    sessions: sessionmaker[Session], behaviour: str, status: LegStatus, error: str
) -> None:
    search = Search(sessions, sparse=behaviour)
    result = await search()
    (sparse,) = (r for r in result.legs if r.leg == Leg.SPARSE)
    assert sparse.status is status
    assert sparse.error is not None
    assert sparse.error.startswith(error)
    assert result.degraded == (Leg.SPARSE,)


class SlowEmbedder(FakeEmbedder):
    """Takes ``seconds`` to encode a query."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        time.sleep(self.seconds)
        return super().embed_query(text, dense=dense, sparse=sparse)


class SlowModelSparseEmbedder(SlowEmbedder, ModelSparseEmbedder):
    """:class:`SlowEmbedder` declared like BGE-M3: no keyword fallback, so encoding may
    take the whole budget."""


async def test_one_deadline_covers_encoding_and_the_legs(sessions: sessionmaker[Session]) -> None:
    search = Search(sessions, SlowEmbedder(0.2))
    result = await search(leg_timeout_s=20.0)
    assert statuses(result) == {"dense": "ok", "sparse": "ok"}
    # The legs got what encoding left of the budget, not a budget of their own.
    assert all(timeout <= 19.8 for _, timeout in search.store.calls)
    assert result.timings.encode_ms >= 200


async def test_a_budget_spent_by_encoding_leaves_the_legs_no_time(
    sessions: sessionmaker[Session],
) -> None:
    search = Search(sessions, SlowModelSparseEmbedder(0.2))
    with pytest.raises(SearchUnavailableError) as info:
        await search(leg_timeout_s=0.1)
    # Encoding is held to the deadline: it ends every leg, none reaches the store.
    assert "dense: query encoding missed its deadline" in info.value.message
    assert "sparse: query encoding missed its deadline" in info.value.message
    assert KEYWORD_FALLBACK not in info.value.message
    assert search.store.calls == [], "a leg with no time left never reaches the store"


async def test_a_leg_is_a_value(sessions: sessionmaker[Session]) -> None:
    # Two requests on the same leg with different filters: data, not another method.
    embedder = FakeEmbedder()
    store = index(sessions, embedder)
    retriever = Retriever(
        embedder=embedder,
        store=store,
        statistics=CountingStatistics(sessions),
        sources=store_sources(store),
    )
    vector = embedder.embed_query("rivers", sparse=False).dense
    deadline = time.perf_counter() + 5
    tokyo_only = parse_filter({"external_id": {"eq": "tokyo"}})
    requests = [
        LegRequest(Leg.DENSE, SourceQuery(TENANT, "rivers", None, 10, dense=vector), deadline),
        LegRequest(
            Leg.DENSE, SourceQuery(TENANT, "rivers", tokyo_only, 10, dense=vector), deadline
        ),
    ]
    assert len({*requests}) == 2, "requests are hashable values"
    everything, tokyo = await retriever.run(requests)
    assert everything.hits is not None
    assert tokyo.hits is not None
    assert len(everything.hits) == 4
    assert [h.fields["external_id"] for h in tokyo.hits] == ["tokyo"]
    assert (everything.report.status, everything.report.candidates) == (LegStatus.OK, 4)


# -- no wasted work -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "computed", "searched", "weighed"),
    [
        (SearchMode.HYBRID, (1, 1), [Leg.DENSE, Leg.SPARSE], 1),
        (SearchMode.SEMANTIC, (1, 0), [Leg.DENSE], 0),
        (SearchMode.KEYWORD, (0, 1), [Leg.SPARSE], 1),
    ],
)
async def test_only_the_sides_the_legs_read_are_encoded(
    sessions: sessionmaker[Session],
    mode: SearchMode,
    computed: tuple[int, int],
    searched: Sequence[Leg],
    weighed: int,
) -> None:
    search = Search(sessions)
    before = search.computed()
    result = await search(mode=mode)
    assert result.hits
    after = search.computed()
    assert (after[0] - before[0], after[1] - before[1]) == computed
    assert search.searched() == list(searched)
    assert search.statistics.queries == weighed
    if not weighed:
        assert result.timings.statistics_ms == 0.0


async def test_a_leg_with_weight_0_is_skipped(sessions: sessionmaker[Session]) -> None:
    search = Search(sessions)
    before = search.computed()
    result = await search(weights={Leg.DENSE: 1.0, Leg.SPARSE: 0.0})
    assert statuses(result) == {"dense": "ok", "sparse": "skipped"}
    assert result.degraded == ()
    assert search.searched() == [Leg.DENSE]
    assert search.computed() == (before[0] + 1, before[1])
    assert search.statistics.queries == 0
    assert result.weights == {Leg.DENSE: 1.0, Leg.SPARSE: 0.0}
    (sparse,) = (r for r in result.legs if r.leg == Leg.SPARSE)
    assert (sparse.took_ms, sparse.candidates, sparse.error) == (0.0, 0, None)


async def test_a_leg_with_weight_0_answers_when_the_weighted_leg_fails(
    sessions: sessionmaker[Session],
) -> None:
    search = Search(sessions, dense="fail")
    result = await search(weights={Leg.DENSE: 1.0})
    assert statuses(result) == {"dense": "error", "sparse": "ok"}
    assert search.searched() == [Leg.DENSE, Leg.SPARSE], "the sparse leg ran after the dense"
    assert result.hits[0].external_id == "rivers"
    # As before: the only weighted leg degraded, so the leg that answered gets weight 1.
    assert result.weights == {Leg.SPARSE: 1.0}


async def test_no_time_left_for_a_fallback_leg_is_a_timeout(
    sessions: sessionmaker[Session],
) -> None:
    search = Search(sessions, dense="stall")
    before = search.computed()
    with pytest.raises(SearchUnavailableError) as info:
        await search(weights={Leg.DENSE: 1.0}, leg_timeout_s=3.0)
    assert "sparse: no time left" in info.value.message
    assert search.searched() == [Leg.DENSE]
    assert search.computed()[1] == before[1], "nothing encoded for a leg that cannot run"


async def test_a_dense_leg_that_cannot_read_the_query_is_skipped(
    sessions: sessionmaker[Session],
) -> None:
    search = Search(sessions, LatinOnlyEmbedder())
    before = search.computed()
    result = await search("日本の首都")
    assert statuses(result) == {"dense": "skipped", "sparse": "ok"}
    assert search.computed() == (before[0], before[1] + 1)
    assert result.hits[0].external_id == "tokyo"
    # The dense weight is 0 for this query; the sparse leg keeps the encoder's default.
    sparse = LatinOnlyEmbedder().info.fusion.leg_weights()[Leg.SPARSE]
    assert result.weights == {Leg.DENSE: 0.0, Leg.SPARSE: sparse}


async def test_it_runs_when_the_sparse_leg_finds_nothing(sessions: sessionmaker[Session]) -> None:
    search = Search(sessions, LatinOnlyEmbedder())
    before = search.computed()
    result = await search("火山の噴火")  # no term of it is in the corpus
    assert statuses(result) == {"dense": "ok", "sparse": "ok"}
    assert search.searched() == [Leg.SPARSE, Leg.DENSE]
    assert search.computed() == (before[0] + 1, before[1] + 1)
    assert result.hits, "the dense leg's ranking is all there is"
    assert all(h.explanation.rank_of("sparse") is None for h in result.hits)
    assert all(set(h.explanation.legs) == {"dense", "sparse"} for h in result.hits)


async def test_retrieve_charges_the_clock(sessions: sessionmaker[Session]) -> None:
    embedder = FakeEmbedder()
    store = index(sessions, embedder)
    sources = store_sources(store)
    planner = QueryPlanner(
        SearchSettings(), encoder=embedder.info, can_rerank=False, sources=sources
    )
    retriever = Retriever(
        embedder=embedder, store=store, statistics=CountingStatistics(sessions), sources=sources
    )
    clock = StageClock()
    plan = planner.plan(SearchQuery(tenant_id=TENANT, query="rivers"))
    retrieval = await retriever.retrieve(plan, budget=Budget.of(plan.budget_s), clock=clock)
    assert [o.leg for o in retrieval.outcomes] == [Leg.DENSE, Leg.SPARSE]
    assert retrieval.matches is None, "matches are counted only when asked for"
    timings = clock.timings()
    assert timings.encode_ms > 0
    assert timings.statistics_ms > 0
    assert timings.retrieval_ms > 0
    assert timings.fusion_ms == timings.hydrate_ms == 0.0


async def test_an_empty_store_is_not_a_failure() -> None:
    embedder = FakeEmbedder()
    store = InMemoryVectorStore()
    # No statistics on purpose (the ignore): run() of ready leg requests never weighs a query.
    retriever = Retriever(
        embedder=embedder,
        store=store,
        statistics=None,  # type: ignore[arg-type]
        sources=store_sources(store),
    )
    query = SourceQuery(TENANT, "anything", None, 5, dense=(1.0,) * 32)
    (outcome,) = await retriever.run([LegRequest(Leg.DENSE, query, time.perf_counter() + 1)])
    assert outcome.hits == ()
    assert outcome.report.status is LegStatus.OK


# -- the keyword fallback: the model fails or hangs -----------------------------------------


def leg_report(result: SearchResult, leg: Leg) -> LegReport:
    (report,) = (r for r in result.legs if r.leg == leg)
    return report


QUICK_FALLBACK = SearchSettings(fallback_encode_share=0.1, **UNHURRIED)
"""A hung model is given a tenth of the budget: the keyword leg keeps nine tenths."""


async def test_a_failing_model_leaves_the_keyword_leg(
    sessions: sessionmaker[Session], ailing: AilingEmbedder
) -> None:
    search = Search(sessions, ailing)
    ailing.ailment = "fail"
    result = await search("rivers")
    assert statuses(result) == {"dense": "error", "sparse": "ok"}
    assert result.degraded == (Leg.DENSE,)
    assert result.hits[0].external_id == "rivers"
    dense = leg_report(result, Leg.DENSE)
    assert dense.error == (
        f"query encoding failed (EncoderError: the model ran out of memory); {KEYWORD_FALLBACK}"
    )
    assert search.searched() == [Leg.SPARSE], "the dense leg never reached the store"
    assert search.statistics.queries == 1, "the term counts were weighed with BM25"
    assert not result.embedding_cached
    # Fused from the keyword leg alone, as when the dense leg fails at the store.
    assert result.applied_weights == {Leg.SPARSE: 1.0}


@pytest.mark.parametrize("batched", [False, True], ids=["thread", "batcher"])
async def test_a_hung_model_leaves_the_keyword_leg_the_rest_of_the_budget(
    sessions: sessionmaker[Session], ailing: AilingEmbedder, batched: bool
) -> None:
    batcher = QueryBatcher(ailing) if batched else None
    search = Search(
        sessions, ailing, settings=QUICK_FALLBACK, queries=QueryEncoder(ailing, batcher=batcher)
    )
    ailing.ailment = "hang"
    try:
        result = await search("rivers", leg_timeout_s=20.0)
    finally:
        ailing.release()
        if batcher is not None:
            batcher.close()
    assert ailing.hung.is_set(), "the query reached the model"
    assert statuses(result) == {"dense": "timeout", "sparse": "ok"}
    assert result.degraded == (Leg.DENSE,)
    assert result.hits[0].external_id == "rivers"
    dense = leg_report(result, Leg.DENSE)
    assert dense.error is not None
    assert dense.error.startswith("query encoding missed its deadline (no answer within 2.0")
    assert dense.error.endswith(f"; {KEYWORD_FALLBACK}")
    # The keyword leg ran with what encoding left: about 18 of the 20 s (the bound is
    # far below, for a loaded machine), not a budget of its own.
    ((leg, timeout),) = search.store.calls
    assert leg is Leg.SPARSE
    assert 10.0 < timeout <= 18.0


async def test_a_hung_model_does_not_hold_a_keyword_search(
    sessions: sessionmaker[Session], ailing: AilingEmbedder
) -> None:
    # A keyword search asks the model path for the sparse side only (the offline
    # encoder's batcher may be busy with another query's hung forward pass): past its
    # share of the budget it is made without the model, and nothing is degraded, since
    # it is the same side.
    search = Search(sessions, ailing, settings=QUICK_FALLBACK)
    ailing.ailment = "hang"
    result = await search("rivers", mode=SearchMode.KEYWORD, leg_timeout_s=20.0)
    assert statuses(result) == {"sparse": "ok"}
    assert result.degraded == ()
    assert result.hits[0].external_id == "rivers"


async def test_a_keyword_leg_held_back_runs_once_the_model_failed(
    sessions: sessionmaker[Session], ailing: AilingEmbedder
) -> None:
    # Weight 0 holds the keyword leg back until the dense leg fails: the second round
    # makes its side without asking the model again.
    search = Search(sessions, ailing)
    ailing.ailment = "fail"
    before = search.computed()
    result = await search("rivers", weights={Leg.DENSE: 1.0})
    assert statuses(result) == {"dense": "error", "sparse": "ok"}
    assert result.hits[0].external_id == "rivers"
    assert search.computed() == (before[0], before[1] + 1), "one sparse side, model-free"


async def test_the_fallback_side_is_the_one_the_model_path_makes(
    sessions: sessionmaker[Session], ailing: AilingEmbedder
) -> None:
    search = Search(sessions, ailing)
    healthy = await search("rivers flowing", mode=SearchMode.KEYWORD)
    ailing.ailment = "fail"
    fallen_back = await search("rivers flowing", mode=SearchMode.HYBRID)
    assert [(h.chunk_id, h.score) for h in fallen_back.hits] == [
        (h.chunk_id, h.score) for h in healthy.hits
    ]


async def test_with_a_model_made_sparse_side_a_failing_model_fails_the_search(
    sessions: sessionmaker[Session], ailing_model_sparse: AilingModelSparseEmbedder
) -> None:
    # BGE-M3: both sides come from the model, nothing to fall back on: as before the
    # fallback, the encoder's error ends the search (500 encoder_error).
    search = Search(sessions, ailing_model_sparse)
    ailing_model_sparse.ailment = "fail"
    with pytest.raises(EncoderError, match="ran out of memory"):
        await search("rivers")
    assert search.store.calls == []


async def test_with_a_model_made_sparse_side_a_hung_model_ends_at_the_deadline(
    sessions: sessionmaker[Session], ailing_model_sparse: AilingModelSparseEmbedder
) -> None:
    # Encoding may take the whole budget (there is nothing to keep time for); then
    # every leg missed its deadline: 503, not a search that hangs with the model.
    search = Search(sessions, ailing_model_sparse)
    ailing_model_sparse.ailment = "hang"
    with pytest.raises(SearchUnavailableError) as info:
        await search("rivers", leg_timeout_s=1.0)
    assert ailing_model_sparse.hung.is_set()
    assert "dense: query encoding missed its deadline (no answer within 1.0" in info.value.message
    assert "sparse: query encoding missed its deadline" in info.value.message
    assert KEYWORD_FALLBACK not in info.value.message
    assert search.store.calls == []


async def test_a_search_with_no_keyword_leg_has_no_fallback(
    sessions: sessionmaker[Session], ailing: AilingEmbedder
) -> None:
    search = Search(sessions, ailing)
    ailing.ailment = "fail"
    with pytest.raises(EncoderError):
        await search("rivers", mode=SearchMode.SEMANTIC)


def test_the_encoding_share_of_the_budget_follows_the_fallback(
    sessions: sessionmaker[Session],
) -> None:
    embedder, model_sparse = FakeEmbedder(), ModelSparseEmbedder()
    budget = Budget(deadline=time.perf_counter() + 1000.0)

    def timeout(encoder: FakeEmbedder, mode: SearchMode) -> float:
        store = InMemoryVectorStore()
        sources = store_sources(store)
        planner = QueryPlanner(
            SearchSettings(**UNHURRIED), encoder=encoder.info, can_rerank=False, sources=sources
        )
        retriever = Retriever(
            embedder=encoder,
            store=store,
            statistics=CountingStatistics(sessions),
            sources=sources,
            fallback_encode_share=0.25,
        )
        plan = planner.plan(SearchQuery(tenant_id=TENANT, query="rivers", mode=mode))
        return retriever.encode_timeout(plan, budget)

    assert 240.0 < timeout(embedder, SearchMode.HYBRID) <= 250.0
    assert 240.0 < timeout(embedder, SearchMode.KEYWORD) <= 250.0
    assert timeout(embedder, SearchMode.SEMANTIC) > 990.0, "no keyword leg: the whole budget"
    assert timeout(model_sparse, SearchMode.HYBRID) > 990.0, "no fallback: the whole budget"
