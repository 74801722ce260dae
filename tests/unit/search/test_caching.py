"""The result cache and the query-embedding cache on embedded parts (SQLite, the fake
encoder, the in-memory store, the in-process cache store): hits, what the key follows,
invalidation by the tenant's data generation, single flight, what is never cached."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio.from_thread
import anyio.to_thread
import pytest
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.cache.embeddings import QueryEncoder
from hsearch.cache.guard import CacheCounters, CacheKind, CacheOutcome, GuardedCache
from hsearch.cache.keys import cache_key
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.config import CacheSettings, IngestSettings, SearchSettings
from hsearch.db.engine import transaction
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import InvalidRequestError, SearchUnavailableError, VectorStoreError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.caching import (
    Cursor,
    GenerationReader,
    PageSnapshots,
    ResultCache,
    purge_tenant,
)
from hsearch.search.facets import FacetRequest
from hsearch.search.models import SearchQuery, SearchResult
from hsearch.search.service import SearchService
from hsearch.search.sorting import SortClause, SortOrder
from hsearch.types import Leg, SearchMode, TotalTracking
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.budget import UNHURRIED
from tests.unit.outage import Outage
from tests.unit.search.corpus import TENANT, AilingEmbedder, ScriptedStore, index


class CountingEmbedder(FakeEmbedder):
    """The fake encoder, counting the queries it encoded."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        self.queries.append(text)
        return super().embed_query(text, dense=dense, sparse=sparse)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def caching_service(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    *,
    backend: InMemoryCacheBackend,
    embedder: FakeEmbedder | None = None,
    counters: CacheCounters | None = None,
    clock: Clock | None = None,
    snapshots: bool = True,
    **settings: Any,
) -> SearchService:
    """A search service with both caches on ``backend`` (one per simulated process)."""
    embedder = embedder or FakeEmbedder()
    cache = CacheSettings(**settings)
    guarded = GuardedCache(backend)
    generations = GenerationReader(sessions, clock=clock or time.monotonic)
    return SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
        results=ResultCache(
            guarded,
            generations=generations,
            settings=cache,
            identity={"encoder": embedder.info.fingerprint},
            counters=counters,
        ),
        queries=QueryEncoder(embedder, store=guarded, lru_size=16, ttl_s=60, counters=counters),
        snapshots=PageSnapshots(guarded, namespace="test", ttl_s=60, max_bytes=1 << 20)
        if snapshots
        else None,
    )


def bump(sessions: sessionmaker[Session], tenant: str = TENANT) -> None:
    with transaction(sessions) as session:
        TenantRepository(session).bump_generation(tenant)


def same_answer(a: SearchResult, b: SearchResult) -> bool:
    keep = ("hits", "totals", "facets", "facet_basis", "weights", "applied_weights", "window")
    return all(getattr(a, f) == getattr(b, f) for f in keep)


@pytest.fixture
def rows(sessions: sessionmaker[Session]) -> InMemoryVectorStore:
    return index(sessions, FakeEmbedder())


async def test_a_repeated_search_is_answered_from_the_cache(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    store = ScriptedStore(rows._rows)
    counters = CacheCounters()
    service = caching_service(sessions, store, backend=InMemoryCacheBackend(), counters=counters)
    query = SearchQuery(
        tenant_id=TENANT, query="rivers sea", facets=(FacetRequest("source"),), top_k=3
    )
    first = await service.search(query)
    calls = len(store.calls)
    second = await service.search(query)
    assert (first.cached, second.cached) == (False, True)
    assert first.hits
    assert same_answer(first, second)
    assert len(store.calls) == calls, "a hit searches nothing"
    # A hit reports its own time: plan and cache lookup only, summing to took_ms.
    assert second.timings.retrieval_ms == second.timings.encode_ms == 0.0
    assert second.timings.cache_ms > 0
    assert second.took_ms == pytest.approx(second.timings.total_ms)
    assert counters.count(CacheKind.RESULT, CacheOutcome.MISS) == 1
    assert counters.count(CacheKind.RESULT, CacheOutcome.HIT) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"query": "rivers sea flow"},
        {"top_k": 2},
        {"offset": 1},
        {"mode": SearchMode.KEYWORD},
        {"fusion": "sum"},
        {"weights": {Leg.DENSE: 0.9, Leg.SPARSE: 0.1}},
        {"filter": {"source": {"eq": "x"}}},
        {"facets": (FacetRequest("tags"),)},
        {"highlight": False},
        {"group_by_document": True},
        {"sort": (SortClause("source", SortOrder.DESC),)},
        {"min_score": 0.001},
        {"candidates": 50},
        {"tenant_id": "other"},
        {"track_total": TotalTracking.EXACT},
        {"track_total": TotalTracking.WINDOW},
    ],
)
async def test_the_key_follows_everything_that_shapes_the_response(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore, change: dict[str, Any]
) -> None:
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    base: dict[str, Any] = {"tenant_id": TENANT, "query": "rivers sea", "top_k": 3}
    await service.search(SearchQuery(**base))
    assert (await service.search(SearchQuery(**base))).cached
    assert not (await service.search(SearchQuery(**{**base, **change}))).cached


async def test_the_time_budget_is_not_part_of_the_key(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    again = await service.search(SearchQuery(tenant_id=TENANT, query="rivers", leg_timeout_s=3))
    assert again.cached


async def test_a_bumped_generation_is_a_miss_and_the_change_is_seen(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    before = await service.search(query)
    assert any(h.external_id == "rivers" for h in before.hits)
    # A write (here: the rivers chunks deleted), then its bump, as the services do.
    rows.delete_chunks(
        [h.chunk_id for h in before.hits if h.external_id == "rivers"], tenant_id=TENANT
    )
    assert (await service.search(query)).cached, "no bump yet: the entry stands"
    bump(sessions)
    after = await service.search(query)
    assert not after.cached
    assert all(h.external_id != "rivers" for h in after.hits)


async def test_a_degraded_answer_is_never_cached(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    store = ScriptedStore(rows._rows, sparse="fail")
    service = caching_service(sessions, store, backend=InMemoryCacheBackend())
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    assert (await service.search(query)).degraded == (Leg.SPARSE,)
    again = await service.search(query)
    assert not again.cached
    assert again.degraded == (Leg.SPARSE,)


@pytest.mark.parametrize("ailment", ["fail", "hang"])
async def test_a_keyword_fallback_is_stored_neither_as_a_result_nor_as_an_embedding(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore, ailment: str
) -> None:
    embedder = AilingEmbedder()
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend(), embedder=embedder)
    # The model gets half of the 4 s (the keyword fallback's share), the leg the rest.
    query = SearchQuery(tenant_id=TENANT, query="rivers sea", leg_timeout_s=4.0)
    embedder.ailment = ailment
    try:
        fallen_back = await service.search(query)
    finally:
        embedder.ailment = None
        embedder.release()
    assert fallen_back.degraded == (Leg.DENSE,)
    assert fallen_back.hits
    healed = await service.search(query)
    assert not healed.cached, "the keyword-only answer was not stored"
    assert healed.degraded == ()
    assert not healed.embedding_cached, "nor a query embedding without its dense side"
    assert (await service.search(query)).cached, "the full answer is"


async def test_no_result_is_stored_while_the_generation_settles(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    clock = Clock()
    service = caching_service(
        sessions, rows, backend=InMemoryCacheBackend(), clock=clock, settle_s=5
    )
    query = SearchQuery(tenant_id=TENANT, query="rivers")
    await service.search(query)
    assert not (await service.search(query)).cached, "generation first seen 0 s ago"
    clock.now += 5
    await service.search(query)
    assert (await service.search(query)).cached
    bump(sessions)
    await service.search(query)
    assert not (await service.search(query)).cached, "a new generation settles again"


async def test_concurrent_identical_misses_compute_once_across_processes(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    """Three services on one cache store (three API processes on one Redis), eight
    identical searches at once: the legs run once; the others wait and read the result."""
    backend = InMemoryCacheBackend()
    store = ScriptedStore(rows._rows, dense=0.2, sparse=0.2)  # slow enough to overlap
    embedder = CountingEmbedder()
    services = [
        caching_service(sessions, store, backend=backend, embedder=embedder) for _ in range(3)
    ]
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    results = await asyncio.gather(*(services[i % 3].search(query) for i in range(8)))
    assert sorted(r.cached for r in results) == [False] + [True] * 7
    assert [leg for leg, _ in store.calls] == [Leg.DENSE, Leg.SPARSE], "one computation"
    assert len(embedder.queries) == 1
    assert all(same_answer(r, results[0]) for r in results)


async def test_a_lock_left_by_a_dead_holder_costs_at_most_the_wait(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    backend = InMemoryCacheBackend()
    service = caching_service(sessions, rows, backend=backend, lock_wait_s=0.2)
    query = SearchQuery(tenant_id=TENANT, query="rivers")
    results = service._results
    assert results is not None
    plan = service.plan(query)
    with transaction(sessions) as session:
        generation = TenantRepository(session).data_version(TENANT)
    key = results.key(plan, generation=generation)
    assert await backend.acquire(f"{key}:lock", ttl_s=60) is not None  # never released
    started = time.perf_counter()
    result = await service.search(query)
    waited = time.perf_counter() - started
    assert not result.cached
    assert result.hits
    # It waited its lock_wait_s, not the lock's 60 s (a bound a loaded machine keeps).
    assert 0.2 <= waited < 30, waited
    assert (await service.search(query)).cached, "and stored for the next"


async def test_a_repeated_query_text_skips_the_model_for_every_tenant(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    embedder = CountingEmbedder()
    counters = CacheCounters()
    service = caching_service(
        sessions, rows, backend=InMemoryCacheBackend(), embedder=embedder, counters=counters
    )
    ours = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    theirs = await service.search(SearchQuery(tenant_id="empty", query="rivers sea"))
    assert embedder.queries == ["rivers sea"], "one encoding, whatever the tenant"
    assert not ours.embedding_cached
    assert theirs.embedding_cached
    assert ours.hits, "each tenant's own data and statistics"
    assert not theirs.hits
    assert counters.count(CacheKind.EMBEDDING, CacheOutcome.HIT) == 1
    # A keyword search reads only the sparse side: cached too.
    await service.search(SearchQuery(tenant_id="x", query="rivers sea", mode=SearchMode.KEYWORD))
    assert len(embedder.queries) == 1


async def test_query_vectors_from_the_shared_store_equal_the_models(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    """A second process (no LRU of its own yet) reads the vectors from the shared store,
    bit for bit, and the tenant's BM25 weights are applied to them as to fresh ones."""
    backend = InMemoryCacheBackend()
    embedder = CountingEmbedder()
    one = QueryEncoder(embedder, store=GuardedCache(backend), lru_size=0, ttl_s=60)
    two = QueryEncoder(embedder, store=GuardedCache(backend), lru_size=0, ttl_s=60)
    computed, cached = await one.embed_query("rivers sea", dense=True, sparse=True)
    assert not cached
    read, cached = await two.embed_query("rivers sea", dense=True, sparse=True)
    assert cached
    assert read == computed
    assert len(embedder.queries) == 1
    plain = SearchService(
        embedder=FakeEmbedder(),
        store=rows,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    via_cache = SearchService(
        embedder=embedder,
        store=rows,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
        queries=two,
    )
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    fresh, again = await plain.search(query), await via_cache.search(query)
    assert again.embedding_cached
    assert same_answer(fresh, again)


class LaggingStore(InMemoryVectorStore):
    """Searches see written chunks only once a flush has run, as with a store whose
    searches lag its writes; ``before_flush`` runs as a flush starts (a search racing it)."""

    def __init__(self) -> None:
        super().__init__()
        self.unflushed: list[ChunkRecord] = []
        self.before_flush: Callable[[], None] | None = None

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.unflushed.extend(records)

    def flush(self) -> None:
        if self.before_flush is not None:
            self.before_flush()
        super().upsert(self.unflushed)
        self.unflushed = []


async def test_a_search_racing_the_flush_caches_nothing_the_next_search_reads(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    """The indexer bumps the generation again once the flush has made a job's chunks
    searchable: a result cached between the write and the flush is never served after."""
    store = LaggingStore()
    InMemoryVectorStore.upsert(store, list(rows._rows.values()))
    embedder = FakeEmbedder()
    service = caching_service(sessions, store, backend=InMemoryCacheBackend(), embedder=embedder)
    query = SearchQuery(tenant_id=TENANT, query="lakes calm water")
    racing: list[SearchResult] = []
    store.before_flush = lambda: racing.append(anyio.from_thread.run(service.search, query))
    indexing = IndexingService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        chunker=Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0),
    )
    queue = InMemoryJobQueue()
    lakes = DocumentInput(external_id="lakes", title="Lakes", text="Lakes hold calm water.")
    with unit_of_work(sessions, queue=queue) as uow:
        JobService(uow, settings=IngestSettings()).submit(tenant_id=TENANT, documents=[lakes])
    await anyio.to_thread.run_sync(indexing.process_job, queue.sent[0])
    (raced,) = racing
    assert "lakes" not in [h.external_id for h in raced.hits], "written, not yet searchable"
    after = await service.search(query)
    assert not after.cached
    assert after.hits[0].external_id == "lakes"


def chunk_ids(result: SearchResult) -> list[str]:
    return [h.chunk_id for h in result.hits]


@pytest.mark.parametrize("snapshots", [True, False])
async def test_pages_from_a_cursor_neither_repeat_nor_skip_across_writes(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore, snapshots: bool
) -> None:
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend(), snapshots=snapshots)
    whole = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=4))
    assert len(whole.hits) == 4
    assert whole.next_cursor is None, "the window's last page"
    first = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2))
    assert chunk_ids(first) == chunk_ids(whole)[:2]
    assert first.next_cursor is not None
    # A committed write between the pages: the best hit deleted.
    rows.delete_chunks([first.hits[0].chunk_id], tenant_id=TENANT)
    bump(sessions)
    second = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2, cursor=first.next_cursor)
    )
    if snapshots:
        assert chunk_ids(second) == chunk_ids(whole)[2:4], "the same fused list"
        assert [h.snippet for h in second.hits] == [h.snippet for h in whole.hits[2:4]]
        assert second.cached
        assert second.next_cursor is None
        assert second.totals == first.totals
    else:  # no snapshot kept: the live list, in which every hit moved up one place
        assert Cursor.decode(first.next_cursor).snapshot is None
        assert chunk_ids(second) == chunk_ids(whole)[3:4], "a hit skipped"


async def test_only_a_pages_texts_are_read_and_a_chunk_deleted_since_is_not_served(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[list[str]] = []
    read = rows.texts

    async def texts(chunk_ids: Sequence[str], *, tenant_id: str, timeout: float) -> dict[str, str]:
        asked.append(list(chunk_ids))
        return await read(chunk_ids, tenant_id=tenant_id, timeout=timeout)

    monkeypatch.setattr(rows, "texts", texts)
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    whole = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=4))
    assert asked == [chunk_ids(whole)]
    assert all(h.text and h.snippet for h in whole.hits)
    first = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2))
    assert asked[-1] == chunk_ids(whole)[:2], "the page's texts, not the window's"
    assert first.next_cursor is not None
    # Deleted after the first page: the kept window still lists it, its text is gone.
    rows.delete_chunks([whole.hits[3].chunk_id], tenant_id=TENANT)
    bump(sessions)
    second = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2, cursor=first.next_cursor)
    )
    assert second.cached, "cut from the kept window"
    assert asked[-1] == chunk_ids(whole)[2:4]
    assert second.hits == whole.hits[2:3], "the deleted chunk is left out, the rest as before"


async def test_a_cursor_serves_only_its_own_search_and_tenant(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    first = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=1))
    cursor = first.next_cursor
    assert cursor is not None
    with pytest.raises(InvalidRequestError, match="cursor: it belongs to another search"):
        await service.search(SearchQuery(tenant_id=TENANT, query="mountains", cursor=cursor))
    # Refused as another search's before its offset is read against that search's
    # window (which may be narrower than the window the cursor was issued from).
    deep = Cursor(10_000, None, Cursor.decode(cursor).search).encode()
    with pytest.raises(InvalidRequestError, match="cursor: it belongs to another search"):
        await service.search(SearchQuery(tenant_id=TENANT, query="mountains", cursor=deep))
    # The tenant is part of the search: another tenant's use of it is refused, as
    # another search's (its snapshot is under the issuing tenant's keys besides).
    with pytest.raises(InvalidRequestError, match="cursor: it belongs to another search"):
        await service.search(SearchQuery(tenant_id="other", query="rivers sea", cursor=cursor))
    # A total counted another way is another search: its pages' totals would differ.
    for tracking in (TotalTracking.EXACT, TotalTracking.WINDOW):
        with pytest.raises(InvalidRequestError, match="cursor: it belongs to another search"):
            await service.search(
                SearchQuery(
                    tenant_id=TENANT, query="rivers sea", track_total=tracking, cursor=cursor
                )
            )
    # A cursor of a release that did not record its search pages as before.
    legacy = dataclasses.replace(Cursor.decode(cursor), search=None).encode()
    other = await service.search(SearchQuery(tenant_id="other", query="rivers sea", cursor=legacy))
    assert other.hits == ()
    bad_cursors = (
        "garbage",
        Cursor(1, "../../x").encode(),
        Cursor(-1).encode(),
        Cursor(1, None, "not-hex").encode(),
        "x" * 300,
    )
    for bad in bad_cursors:
        with pytest.raises(InvalidRequestError, match="cursor"):
            await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", cursor=bad))
    # A page size of its own, from the same list.
    two = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2, cursor=cursor)
    )
    assert len(two.hits) == 2
    assert two.offset == 1


async def test_a_page_from_a_snapshot_whose_texts_cannot_be_read_is_a_counted_error(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prometheus_client import REGISTRY

    def outcomes(outcome: str) -> float:
        labels = {"mode": "hybrid", "outcome": outcome, "tenant": "other"}
        return REGISTRY.get_sample_value("hsearch_search_requests_total", labels) or 0.0

    service = caching_service(sessions, rows, backend=InMemoryCacheBackend())
    first = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2))

    async def texts(chunk_ids: Sequence[str], *, tenant_id: str, timeout: float) -> dict[str, str]:
        raise VectorStoreError("query node gone")

    monkeypatch.setattr(rows, "texts", texts)
    ok, errors = outcomes("ok"), outcomes("error")
    with pytest.raises(SearchUnavailableError, match="texts could not be read"):
        await service.search(
            SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2, cursor=first.next_cursor)
        )
    assert (outcomes("ok"), outcomes("error")) == (ok, errors + 1)


async def test_a_cursor_whose_snapshot_is_gone_pages_the_live_list(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    backend = InMemoryCacheBackend()
    service = caching_service(sessions, rows, backend=backend)
    first = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2))
    await backend.aclose()  # everything kept is gone (expired, evicted)
    second = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", top_k=2, cursor=first.next_cursor)
    )
    assert not second.cached
    assert second.offset == 2
    assert set(chunk_ids(second)).isdisjoint(chunk_ids(first))
    # Still refused with another search, though no snapshot is left to compare.
    with pytest.raises(InvalidRequestError, match="cursor: it belongs to another search"):
        await service.search(
            SearchQuery(tenant_id=TENANT, query="mountains", top_k=2, cursor=first.next_cursor)
        )


async def test_a_tenant_created_again_never_meets_its_predecessors_entries(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    """Its generations start at 0 again: the key holds when the tenant was created."""
    backend = InMemoryCacheBackend()
    service = caching_service(sessions, rows, backend=backend)
    query = SearchQuery(tenant_id="again", query="rivers")
    with transaction(sessions) as session:
        TenantRepository(session).ensure("again")
    await service.search(query)
    assert (await service.search(query)).cached
    with transaction(sessions) as session:
        session.delete(TenantRepository(session).get("again"))
    with transaction(sessions) as session:
        TenantRepository(session).ensure("again")
    assert not (await service.search(query)).cached


async def test_a_reused_generation_sees_a_bump_once_it_is_older_than_its_ttl(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    """``cache.generation_ttl_s`` trades staleness for database reads, bounded by it."""
    clock = Clock()
    service = caching_service(
        sessions, rows, backend=InMemoryCacheBackend(), clock=clock, generation_ttl_s=10
    )
    results = service._results
    assert results is not None
    results._generations = GenerationReader(sessions, ttl_s=10, clock=clock)
    query = SearchQuery(tenant_id=TENANT, query="rivers")
    await service.search(query)
    bump(sessions)
    assert (await service.search(query)).cached, "the generation read 0 s ago is reused"
    clock.now += 10
    assert not (await service.search(query)).cached


class BrokenGenerations(GenerationReader):
    def _read(self, tenant_id: str) -> str:
        raise OperationalError("SELECT", {}, Exception("database is down"))


async def test_without_the_generation_the_search_answers_uncached(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    counters = CacheCounters()
    service = caching_service(sessions, rows, backend=InMemoryCacheBackend(), counters=counters)
    results = service._results
    assert results is not None
    results._generations = BrokenGenerations(sessions)
    for _ in range(2):
        result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
        assert result.hits
        assert not result.cached
    assert counters.count(CacheKind.RESULT, CacheOutcome.ERROR) == 2


async def test_while_the_database_is_down_the_generation_read_within_the_window_is_used(
    sessions: sessionmaker[Session], rows: InMemoryVectorStore
) -> None:
    clock = Clock()
    outage = Outage(sessions)
    counters = CacheCounters()
    service = caching_service(outage, rows, backend=InMemoryCacheBackend(), counters=counters)
    results = service._results
    assert results is not None
    results._generations = GenerationReader(outage, stale_s=30, clock=clock)
    query = SearchQuery(tenant_id=TENANT, query="rivers")
    await service.search(query)
    outage.down = True
    clock.now += 29
    assert (await service.search(query)).cached, "the generation read 29 s ago still keys"
    clock.now += 1
    for _ in range(2):
        result = await service.search(query)  # read 30 s ago: computed, not stored
        assert result.hits
        assert not result.cached
    assert counters.count(CacheKind.RESULT, CacheOutcome.ERROR) == 2
    outage.down = False
    assert (await service.search(query)).cached


async def test_purging_a_tenant_drops_its_results_and_snapshots_only() -> None:
    store = InMemoryCacheBackend()
    mine = [cache_key("ns", "result", "t1", "1.0", "d"), cache_key("ns", "snapshot", "t1", "s")]
    others = [
        cache_key("ns", "result", "t10", "1.0", "d"),  # a tenant whose id starts the same
        cache_key("ns", "result", "t2", "1.0", "d"),
        cache_key("other", "result", "t1", "1.0", "d"),  # another deployment's namespace
        cache_key("ns", "embedding", "dense", "d"),
    ]
    for key in mine + others:
        await store.set(key, b"x", ttl_s=60)
    assert await purge_tenant(store, namespace="ns", tenant_id="t1") == 2
    assert [await store.get(k) for k in mine] == [None, None]
    assert [await store.get(k) for k in others] == [b"x"] * 4


async def test_texts_that_differ_only_in_white_space_or_composition_share_an_entry() -> None:
    embedder = CountingEmbedder()
    queries = QueryEncoder(embedder, store=GuardedCache(InMemoryCacheBackend()), ttl_s=60)
    first, cached = await queries.embed_query("café  au\tlait ", dense=True, sparse=True)
    assert not cached
    again, cached = await queries.embed_query(" cafe\u0301 au lait", dense=True, sparse=True)
    assert cached
    assert again == first
    assert embedder.queries == ["café au lait"]  # the model is given the normalised text
