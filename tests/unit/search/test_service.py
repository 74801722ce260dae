"""The search service on embedded parts (SQLite, fake encoder, in-memory store):
validation, fusion weights, the language check, grouping and reranking, the stage
timings, and the same results as running every leg of the mode."""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import Any, cast

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import UNMEASURED_FUSION, SparseKind
from hsearch.errors import (
    InvalidFilterError,
    InvalidRequestError,
    SearchUnavailableError,
    VectorStoreError,
)
from hsearch.ingestion.models import DocumentInput
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.rerank.fake import FakeReranker
from hsearch.search.caching import GenerationReader
from hsearch.search.facets import FacetRequest
from hsearch.search.fusion import LegHit, fuse_explained
from hsearch.search.models import SearchQuery, SearchResult
from hsearch.search.ranking import query_weights
from hsearch.search.service import SearchService
from hsearch.search.sorting import SCORE, SortClause, SortOrder
from hsearch.search.timings import StageTimings
from hsearch.search.totals import FacetBasis
from hsearch.types import (
    MODE_LEGS,
    CountScope,
    CountUnit,
    FusionDefault,
    FusionMethod,
    Leg,
    LegStatus,
    SearchMode,
    TotalRelation,
    TotalTracking,
)
from hsearch.vectorstore.filters import FilterNode, Not, parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import StoredHit
from tests.unit.budget import UNHURRIED
from tests.unit.outage import Outage
from tests.unit.search.corpus import (
    TENANT,
    DeclaringEmbedder,
    LatinOnlyEmbedder,
    ScriptedStore,
    build,
    index,
)


async def test_default_is_the_encoders_fusion(sessions: sessionmaker[Session]) -> None:
    declared = FusionDefault.of("adaptive", {"dense": 0.95, "sparse": 0.05})
    service, _ = build(sessions, DeclaringEmbedder(declared))
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert result.method == "adaptive"
    assert result.weights == {"dense": 0.95, "sparse": 0.05}
    assert result.hits[0].external_id == "rivers"
    rrf = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", fusion=FusionMethod.RRF)
    )
    assert rrf.weights == {"dense": 0.7, "sparse": 0.3}, "another method: its fallback"
    assert rrf.applied_weights == pytest.approx({"dense": 0.7, "sparse": 0.3})
    # Adaptive reports its per-query mixture weights: a share per leg, summing to 1.
    assert set(result.applied_weights) == {"dense", "sparse"}
    assert math.fsum(result.applied_weights.values()) == pytest.approx(1.0)
    semantic = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", mode=SearchMode.SEMANTIC)
    )
    assert semantic.applied_weights == {"dense": 1.0}


async def test_an_encoder_that_declares_nothing_gets_plain_rrf(
    sessions: sessionmaker[Session],
) -> None:
    assert FakeEmbedder().info.fusion == UNMEASURED_FUSION
    assert FusionDefault.of("rrf", {"dense": 0.5, "sparse": 0.5}, k=60) == UNMEASURED_FUSION
    service, _ = build(sessions)
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert (result.method, result.weights) == ("rrf", {"dense": 0.5, "sparse": 0.5})


async def test_the_sum_of_raw_scores_runs_end_to_end(sessions: sessionmaker[Session]) -> None:
    declared = FusionDefault.of("sum", {"dense": 1.0, "sparse": 0.3})
    service, _ = build(sessions, DeclaringEmbedder(declared))
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert result.method == "sum"
    assert result.weights == {"dense": 1.0, "sparse": 0.3}
    assert result.applied_weights == pytest.approx({"dense": 1 / 1.3, "sparse": 0.3 / 1.3})
    for hit in result.hits:
        e = hit.explanation
        expected = (1.0 * (e.score_of("dense") or 0.0) + 0.3 * (e.score_of("sparse") or 0.0)) / 1.3
        assert e.fused_score == pytest.approx(expected)


async def test_dense_leg_is_ignored_for_queries_its_encoder_cannot_read(
    sessions: sessionmaker[Session],
) -> None:
    service, _ = build(sessions, LatinOnlyEmbedder())
    ja = await service.search(SearchQuery(tenant_id=TENANT, query="日本の首都"))
    assert ja.weights[Leg.DENSE] == 0.0
    assert ja.hits[0].external_id == "tokyo"
    en = await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    assert en.weights[Leg.DENSE] > 0.0
    # A multilingual encoder (no declared scripts) keeps its weights.
    multi, _ = build(sessions, FakeEmbedder())
    assert (await multi.search(SearchQuery(tenant_id=TENANT, query="日本の首都"))).weights[
        Leg.DENSE
    ] > 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": "  "}, "query"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 5, "candidates": 2}, "candidates"),
        ({"leg_timeout_s": 100.0}, "leg_timeout_ms"),
        ({"weights": {"dense": 2.0}}, "weights.dense"),
        ({"weights": {"dense": 0.0, "sparse": 1.0}, "mode": SearchMode.SEMANTIC}, "weights"),
        ({"rerank": True}, "rerank"),
    ],
)
async def test_invalid_queries_name_the_field(
    sessions: sessionmaker[Session], kwargs: dict[str, Any], field: str
) -> None:
    service, _ = build(sessions)
    query = SearchQuery(**{"tenant_id": TENANT, "query": "rivers", **kwargs})
    with pytest.raises(InvalidRequestError, match=field):
        await service.search(query)


async def test_invalid_filter_is_rejected_before_any_leg_runs(
    sessions: sessionmaker[Session],
) -> None:
    service, _ = build(sessions)
    with pytest.raises(InvalidFilterError, match=r"filter\.or"):
        await service.search(SearchQuery(tenant_id=TENANT, query="x", filter={"or": 1}))


class RecordingStore(InMemoryVectorStore):
    """Remembers the filter each leg was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.filters: list[FilterNode | None] = []

    async def search_dense(self, *args: Any, **kwargs: Any) -> list[StoredHit]:
        self.filters.append(kwargs["filter"])
        return await super().search_dense(*args, **kwargs)

    async def search_sparse(self, *args: Any, **kwargs: Any) -> list[StoredHit]:
        self.filters.append(kwargs["filter"])
        return await super().search_sparse(*args, **kwargs)


async def test_the_filter_is_parsed_once_and_both_legs_get_the_tree(
    sessions: sessionmaker[Session],
) -> None:
    _, store = build(sessions)
    recording = RecordingStore()
    recording.upsert(list(store._rows.values()))
    service = SearchService(
        embedder=FakeEmbedder(),
        store=recording,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    raw = {"not": {"source": {"eq": "nowhere"}}}
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers", filter=raw))
    assert result.hits
    dense, sparse = recording.filters
    assert isinstance(dense, Not)
    assert dense == parse_filter(raw)
    assert sparse is dense, "one parse per request: the legs share the tree"


class BrokenStore(InMemoryVectorStore):
    async def search_sparse(self, *args: object, **kwargs: object) -> list[StoredHit]:
        from hsearch.errors import VectorStoreError

        raise VectorStoreError("sparse index offline")


async def test_a_failed_leg_degrades_and_a_failed_mode_is_unavailable(
    sessions: sessionmaker[Session],
) -> None:
    _, store = build(sessions)
    broken = BrokenStore()
    broken.upsert([store._rows[c] for c in store._rows])
    degraded = SearchService(
        embedder=FakeEmbedder(),
        store=broken,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    result = await degraded.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    assert list(result.degraded) == ["sparse"]
    assert result.hits
    with pytest.raises(SearchUnavailableError, match="sparse index offline"):
        await degraded.search(
            SearchQuery(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD)
        )


class TextlessStore(InMemoryVectorStore):
    async def texts(self, *args: object, **kwargs: object) -> dict[str, str]:
        from hsearch.errors import VectorStoreError

        raise VectorStoreError("query node gone")


async def test_texts_that_cannot_be_read_make_the_search_unavailable(
    sessions: sessionmaker[Session],
) -> None:
    _, store = build(sessions)
    textless = TextlessStore()
    textless.upsert(list(store._rows.values()))
    service = SearchService(
        embedder=FakeEmbedder(),
        store=textless,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    from prometheus_client import REGISTRY

    def count(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    # Tenants are labelled by name only once configured as such: "other" otherwise.
    errors = count("hsearch_search_requests_total", mode="hybrid", outcome="error", tenant="other")
    legs_ok = count("hsearch_search_leg_outcomes_total", leg="dense", status="ok")
    with pytest.raises(SearchUnavailableError, match=r"texts could not be read.*query node gone"):
        await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    # Counted, with its legs, though they answered: a 503 is a failed search.
    assert count(
        "hsearch_search_requests_total", mode="hybrid", outcome="error", tenant="other"
    ) == (errors + 1)
    assert count("hsearch_search_leg_outcomes_total", leg="dense", status="ok") == legs_ok + 1


async def test_without_the_statistics_the_keyword_leg_degrades_and_dense_answers(
    sessions: sessionmaker[Session],
) -> None:
    """The metadata database down and the tenant's statistics never read: the sparse leg
    fails (degraded), the dense leg answers; a keyword-only search is unavailable."""
    _, store = build(sessions)
    outage = Outage(sessions)
    service = SearchService(
        embedder=FakeEmbedder(),
        store=store,
        statistics=LexicalStatistics(outage, stale_s=30),
        settings=SearchSettings(**UNHURRIED),
    )
    outage.down = True
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    assert result.degraded == (Leg.SPARSE,)
    assert result.hits
    sparse = next(r for r in result.legs if r.leg == Leg.SPARSE)
    assert sparse.status is LegStatus.ERROR
    assert "MetadataUnavailableError" in (sparse.error or "")
    with pytest.raises(SearchUnavailableError):
        await service.search(SearchQuery(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD))
    outage.down = False
    assert not (await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))).degraded


async def test_degraded_and_failed_searches_are_counted(sessions: sessionmaker[Session]) -> None:
    from prometheus_client import REGISTRY

    def count(mode: str, outcome: str) -> float:
        labels = {"mode": mode, "outcome": outcome, "tenant": "other"}
        return REGISTRY.get_sample_value("hsearch_search_requests_total", labels) or 0.0

    def leg(status: str) -> float:
        labels = {"leg": "sparse", "status": status}
        return REGISTRY.get_sample_value("hsearch_search_leg_outcomes_total", labels) or 0.0

    _, store = build(sessions)
    broken = BrokenStore()
    broken.upsert([store._rows[c] for c in store._rows])
    service = SearchService(
        embedder=FakeEmbedder(),
        store=broken,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    degraded, failed, errors = count("hybrid", "degraded"), count("keyword", "error"), leg("error")
    await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    with pytest.raises(SearchUnavailableError):
        await service.search(SearchQuery(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD))
    assert count("hybrid", "degraded") == degraded + 1
    assert count("keyword", "error") == failed + 1
    assert leg("error") == errors + 2


async def test_rerank_reorders_and_reports(sessions: sessionmaker[Session]) -> None:
    reranker = FakeReranker()
    service, _ = build(sessions, reranker=reranker, rerank_depth=10)
    plain = await service.search(SearchQuery(tenant_id=TENANT, query="mountains rise"))
    assert reranker.calls == 0
    assert plain.rerank_ms is None
    result = await service.search(
        SearchQuery(tenant_id=TENANT, query="mountains rise", rerank=True)
    )
    assert reranker.calls == 1
    assert result.rerank_ms is not None
    assert result.hits[0].external_id == "mountains"
    scores = [h.explanation.rerank_score for h in result.hits]
    assert all(s is not None for s in scores)
    reranked = cast("list[float]", scores)  # no None: asserted just above
    assert scores == sorted(reranked, reverse=True)
    assert result.hits[0].score == scores[0]


async def test_a_sort_orders_the_reranked_window_and_score_is_the_reranked_order(
    sessions: sessionmaker[Session],
) -> None:
    service, _ = build(sessions, reranker=FakeReranker(), rerank_depth=10)
    asked = SearchQuery(tenant_id=TENANT, query="mountains rise", rerank=True, top_k=4)
    reranked = await service.search(asked)
    order = [h.external_id for h in reranked.hits]
    assert order[0] == "mountains"

    worst_first = await service.search(
        dataclasses.replace(asked, sort=(SortClause(SCORE, SortOrder.ASC),))
    )
    assert [h.external_id for h in worst_first.hits] == order[::-1]
    assert worst_first.sort == (SortClause(SCORE, SortOrder.ASC),)
    # Hits keep their (rerank) scores; only the order changes.
    assert {h.chunk_id: h.score for h in worst_first.hits} == {
        h.chunk_id: h.score for h in reranked.hits
    }

    by_id = await service.search(
        dataclasses.replace(asked, sort=(SortClause("external_id", SortOrder.ASC),))
    )
    assert [h.external_id for h in by_id.hits] == sorted(order)
    assert by_id.sort == (
        SortClause("external_id", SortOrder.ASC),
        SortClause(SCORE, SortOrder.DESC),
    )
    assert reranked.sort == ()


async def test_the_stage_timings_sum_to_took_ms(sessions: sessionmaker[Session]) -> None:
    service, _ = build(sessions, reranker=FakeReranker())
    for options in ({}, {"mode": SearchMode.KEYWORD}, {"rerank": True, "facets": ()}):
        result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers", **options))
        timings = result.timings
        stages = [getattr(timings, name) for name in StageTimings.__dataclass_fields__]
        assert all(ms >= 0 for ms in stages)
        assert math.fsum(stages) == pytest.approx(result.took_ms, abs=1e-6)
        assert timings.encode_ms > 0
        assert timings.retrieval_ms > 0
        # Each leg's own time lies within the retrieval stage (they overlap).
        assert all(leg.took_ms <= timings.retrieval_ms for leg in result.legs)
        if options.get("rerank"):
            assert result.rerank_ms == timings.rerank_ms > 0
        else:
            assert result.rerank_ms is None
            assert timings.rerank_ms < 1.0  # nothing but the step itself


async def test_the_service_shows_the_plan_it_runs(sessions: sessionmaker[Session]) -> None:
    service, _ = build(sessions, LatinOnlyEmbedder())
    query = SearchQuery(tenant_id=TENANT, query="日本の首都", offset=10)
    plan = service.plan(query)
    assert plan == service.plan(query)
    assert plan.ranking.offset == 10
    assert [(p.leg, p.role.value) for p in plan.legs] == [
        ("dense", "if_no_hits"),
        ("sparse", "primary"),
    ]
    with pytest.raises(InvalidRequestError, match="rerank"):
        service.plan(SearchQuery(tenant_id=TENANT, query="x", rerank=True))


async def every_leg_of_the_mode(
    store: ScriptedStore,
    embedder: FakeEmbedder,
    statistics: LexicalStatistics,
    query: SearchQuery,
    settings: SearchSettings,
) -> tuple[list[tuple[str, float]], dict[str, float]] | None:
    """The ranking as the service computed it before its legs were planned: encode both
    sides, run every leg of the mode, then the weight rule and fusion (None: no leg
    answered)."""
    embedding = embedder.embed_query(query.query)
    sparse = embedding.sparse
    if embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
        sparse = statistics.weigh_query(query.tenant_id, sparse)
    answered: dict[str, list[LegHit]] = {}
    for leg in MODE_LEGS[query.mode]:
        options: dict[str, Any] = {
            "tenant_id": query.tenant_id,
            "filter": None,
            "limit": 100,
            "timeout": 5.0,
        }
        try:
            if leg == Leg.DENSE:
                hits = await store.search_dense(embedding.dense, **options)
            else:
                hits = await store.search_sparse(sparse, **options)
        except VectorStoreError:
            continue
        answered[leg.value] = [LegHit(h.chunk_id, h.score) for h in hits]
    if not answered:
        return None
    fusion = settings.resolve_fusion(embedder.info.fusion, query.fusion)
    method = fusion.method
    configured = {str(leg): w for leg, w in (query.weights or fusion.leg_weights()).items()}
    weights = query_weights(
        query.query,
        answered,
        configured=configured,
        dense_scripts=embedder.info.dense_scripts,
        min_dense_script_coverage=settings.min_dense_script_coverage,
    )
    fused, applied = fuse_explained(answered, method=method, weights=weights, k=fusion.k)
    return [(f.id, f.score) for f in fused], applied


@pytest.mark.parametrize("embedder_type", [FakeEmbedder, LatinOnlyEmbedder])
@pytest.mark.parametrize("text", ["rivers sea", "日本の首都", "火山の噴火", "東京 rivers"])
async def test_skipping_legs_changes_no_result(
    sessions: sessionmaker[Session], embedder_type: type[FakeEmbedder], text: str
) -> None:
    """Legs with weight 0 are skipped and held back as fallbacks; the result must be the
    one of running every leg of the mode, whatever each leg does (answers, finds
    nothing, fails), for every weighting and fusion method."""
    embedder = embedder_type()
    rows = index(sessions, embedder)._rows
    statistics = LexicalStatistics(sessions)
    settings = SearchSettings(**UNHURRIED)
    weightings: list[dict[str, float] | None] = [
        None,
        {Leg.DENSE: 1.0},
        {Leg.SPARSE: 1.0},
        {Leg.DENSE: 0.6, Leg.SPARSE: 0.4},
    ]
    behaviours = ("ok", "empty", "fail")
    skipped = 0
    for dense, sparse, weights, method in itertools.product(
        behaviours,
        behaviours,
        weightings,
        (FusionMethod.RRF, FusionMethod.ADAPTIVE, FusionMethod.SUM),
    ):
        store = ScriptedStore(rows, dense=dense, sparse=sparse)
        service = SearchService(
            embedder=embedder, store=store, statistics=statistics, settings=settings
        )
        query = SearchQuery(
            tenant_id=TENANT, query=text, weights=weights, fusion=method, highlight=False
        )
        expected = await every_leg_of_the_mode(store, embedder, statistics, query, settings)
        case = (dense, sparse, weights, method)
        if expected is None:
            with pytest.raises(SearchUnavailableError):
                await service.search(query)
            continue
        result = await service.search(query)
        ranking, applied = expected
        got = [(h.chunk_id, h.explanation.fused_score) for h in result.hits]
        assert got == ranking, case
        assert result.applied_weights == applied, case
        assert result.window == len(ranking), case
        skipped += sum(r.status is LegStatus.SKIPPED for r in result.legs)
    # The cases exercise skipping (weight 0, and the language rule for LatinOnly).
    assert skipped > 0


# -- totals: counted once per query, reused by its other pages --------------------------


def counting_service(
    sessions: sessionmaker[Session],
    *,
    ttl: float = 30.0,
    rows: ScriptedStore | None = None,
    settle_s: float = 0.0,
    generations: GenerationReader | None = None,
    **behaviour: str | float,
) -> tuple[SearchService, ScriptedStore]:
    embedder = FakeEmbedder()
    indexed = rows._rows if rows is not None else index(sessions, embedder)._rows
    store = ScriptedStore(indexed, **behaviour)
    # A window of one chunk: the sparse leg fills it, so the keyword matches are counted
    # (with ``track_total`` exact).
    settings = SearchSettings(candidates=1, max_top_k=1, totals_cache_ttl_s=ttl)
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=settings,
        generations=generations or GenerationReader(sessions),
        settle_s=settle_s,
    )
    return service, store


def query(text: str = "rivers sea", **options: Any) -> SearchQuery:
    return SearchQuery(tenant_id=TENANT, query=text, top_k=1, **options)


def exact(text: str = "rivers sea", **options: Any) -> SearchQuery:
    """:func:`query` with an exact total asked for (every keyword match counted)."""
    return query(text, track_total=TotalTracking.EXACT, **options)


async def test_the_other_pages_of_a_query_reuse_its_count(sessions: sessionmaker[Session]) -> None:
    service, store = counting_service(sessions)
    first = await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 1
    assert first.totals.exact
    again = await service.search(exact(mode=SearchMode.KEYWORD, highlight=False))
    assert store.match_calls == 1, "the same query's count is reused"
    assert again.totals == first.totals
    assert again.timings.facets_ms <= first.timings.facets_ms + 1.0
    await service.search(exact("mountains", mode=SearchMode.KEYWORD))
    assert store.match_calls == 2, "another query is counted"
    fresh, fresh_store = counting_service(sessions, ttl=0, rows=store)
    await fresh.search(exact(mode=SearchMode.KEYWORD))
    await fresh.search(exact(mode=SearchMode.KEYWORD))
    assert fresh_store.match_calls == 2, "ttl 0: counted for every request"


async def test_another_order_of_a_query_reuses_its_count(
    sessions: sessionmaker[Session],
) -> None:
    service, store = counting_service(sessions)
    first = await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 1
    newest = (SortClause("external_id", SortOrder.DESC),)
    again = await service.search(exact(mode=SearchMode.KEYWORD, sort=newest))
    assert store.match_calls == 1, "an order changes no count"
    assert again.totals == first.totals


async def test_a_count_made_before_the_data_settled_is_not_reused(
    sessions: sessionmaker[Session],
) -> None:
    """Counted on a data version younger than ``settle_s`` (Milvus may not show its
    latest writes yet): every request counts again until the version has settled."""
    service, store = counting_service(sessions, settle_s=60.0)
    await service.search(exact(mode=SearchMode.KEYWORD))
    await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 2


class CountingReader(GenerationReader):
    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__(sessions)
        self.reads = 0

    async def read(self, tenant_id: str) -> tuple[str, float]:
        self.reads += 1
        return await super().read(tenant_id)


async def test_a_search_without_a_total_does_not_read_the_data_version(
    sessions: sessionmaker[Session],
) -> None:
    """The version only keys reused counts: a search that does not count its keyword
    matches (the default bound, or the window) pays no metadata read for it."""
    reader = CountingReader(sessions)
    service, _ = counting_service(sessions, generations=reader)
    await service.search(query(mode=SearchMode.KEYWORD, track_total=TotalTracking.WINDOW))
    await service.search(query(mode=SearchMode.KEYWORD))
    assert reader.reads == 0
    await service.search(exact(mode=SearchMode.KEYWORD))
    assert reader.reads == 1


async def test_window_tracking_counts_the_window_only(sessions: sessionmaker[Session]) -> None:
    service, store = counting_service(sessions)
    result = await service.search(query(mode=SearchMode.KEYWORD, track_total=TotalTracking.WINDOW))
    assert store.match_calls == 0, "no count request"
    assert result.hits
    assert (result.totals.total, result.totals.exact) == (1, False)
    assert result.totals.scope.value == "window"
    counted = await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 1, "the same query with its total asked for is counted"
    assert counted.totals.scope.value == "matches"
    assert counted.totals.exact


async def test_a_degraded_answer_is_not_reused(sessions: sessionmaker[Session]) -> None:
    service, store = counting_service(sessions, dense="fail")
    first = await service.search(exact())
    assert first.degraded == (Leg.DENSE,)
    assert not first.totals.exact
    await service.search(exact())
    assert store.match_calls == 2


async def test_a_failed_count_falls_back_to_the_default_bound(
    sessions: sessionmaker[Session],
) -> None:
    service, store = counting_service(sessions, matches="fail")
    result = await service.search(exact(mode=SearchMode.KEYWORD))
    assert result.hits, "the search still answers"
    assert (result.totals.total, result.totals.relation) == (1, TotalRelation.GTE)
    assert result.totals.scope.value == "matches"
    assert store.match_calls == 1
    await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 2, "a fallback is not kept: the next page counts again"


async def test_a_sparse_leg_short_of_its_window_is_not_counted_again(
    sessions: sessionmaker[Session],
) -> None:
    embedder = FakeEmbedder()
    store = ScriptedStore(index(sessions, embedder)._rows)
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),  # a window of 100: the four documents fit
    )
    result = await service.search(exact(mode=SearchMode.KEYWORD))
    assert store.match_calls == 0, "the sparse leg returned every match"
    assert (result.totals.total, result.totals.exact) == (1, True)


# Eight documents hold "volcano", six "ash" (three of them with "volcano"): eleven match
# "volcano ash", one chunk each.
VOLCANOES = [
    DocumentInput(
        external_id=f"v{i}",
        title=f"Volcano {i}",
        text=f"The volcano {i} erupted." + (" Ash fell." if i % 3 == 0 else ""),
        source=("atlas", "news")[i % 2],
    )
    for i in range(8)
] + [
    DocumentInput(external_id=f"a{i}", title="Ash", text=f"Grey ash {i} everywhere.", source="blog")
    for i in range(3)
]
MATCHING = 11


def volcano_service(sessions: sessionmaker[Session]) -> tuple[SearchService, ScriptedStore]:
    """The volcano corpus behind a window of three candidates per leg."""
    embedder = FakeEmbedder()
    store = ScriptedStore(index(sessions, embedder, VOLCANOES)._rows)
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(candidates=3, max_top_k=3, **UNHURRIED),
    )
    return service, store


def volcano(**options: Any) -> SearchQuery:
    given: dict[str, Any] = {"mode": SearchMode.KEYWORD, "facets": (FacetRequest("source"),)}
    return SearchQuery(tenant_id=TENANT, query="volcano ash", top_k=3, **{**given, **options})


def facet_total(result: SearchResult) -> int:
    (facet,) = result.facets
    return sum(b.count for b in facet.buckets) + facet.missing


async def test_the_default_total_is_exact_when_the_windows_hold_every_match(
    sessions: sessionmaker[Session],
) -> None:
    service, store = volcano_service(sessions)
    result = await service.search(volcano(candidates=20))
    assert store.match_calls == 0
    assert (result.totals.total, result.totals.relation) == (MATCHING, TotalRelation.EQ)
    assert result.totals.exact
    assert result.facet_basis == FacetBasis(CountUnit.DOCUMENT, CountScope.MATCHES, exact=True)
    assert facet_total(result) == MATCHING


async def test_the_default_total_past_the_window_is_a_lower_bound(
    sessions: sessionmaker[Session],
) -> None:
    service, store = volcano_service(sessions)
    bound = await service.search(volcano())
    assert store.match_calls == 0, "nothing is counted past the legs"
    exact_count = await service.search(volcano(track_total=TotalTracking.EXACT))
    assert store.match_calls == 1, "the exact count is one store request more"
    assert (exact_count.totals.total, exact_count.totals.relation) == (MATCHING, TotalRelation.EQ)
    assert exact_count.facet_basis == FacetBasis(CountUnit.DOCUMENT, CountScope.MATCHES, True)
    assert facet_total(exact_count) == MATCHING
    # The statistics know eight chunks hold "volcano": more than the window's three.
    assert (bound.totals.total, bound.totals.relation) == (8, TotalRelation.GTE)
    assert bound.window == 3 < bound.totals.total < exact_count.totals.total
    assert bound.totals.scope is CountScope.MATCHES
    assert bound.facet_basis == FacetBasis(CountUnit.DOCUMENT, CountScope.WINDOW, exact=False)
    assert facet_total(bound) == bound.window
    # Under a filter the statistics (the whole tenant's) tell nothing: the window only.
    everything = {"source": {"in": ["atlas", "news", "blog"]}}
    filtered = await service.search(volcano(filter=everything))
    assert (filtered.totals.total, filtered.totals.relation) == (3, TotalRelation.GTE)
    assert store.match_calls == 1
    counted = await service.search(volcano(filter=everything, track_total=TotalTracking.EXACT))
    assert (counted.totals.total, counted.totals.relation) == (MATCHING, TotalRelation.EQ)


async def test_the_default_bound_without_term_statistics_is_the_window(
    sessions: sessionmaker[Session],
) -> None:
    """A statistics read that failed leaves the sparse leg failed: the dense window is
    what is known, a lower bound."""
    embedder = FakeEmbedder()
    store = ScriptedStore(index(sessions, embedder, VOLCANOES)._rows)
    outage = Outage(sessions)
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(outage),
        settings=SearchSettings(candidates=3, max_top_k=3, **UNHURRIED),
    )
    outage.down = True
    result = await service.search(volcano(mode=SearchMode.HYBRID))
    assert result.degraded == (Leg.SPARSE,)
    assert (result.totals.total, result.totals.relation) == (3, TotalRelation.GTE)
    assert store.match_calls == 0
