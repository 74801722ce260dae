"""The search caches against real Redis: the Redis store's contract, single flight
across processes sharing one Redis, an outage of a Redis server this test started
(searches keep answering, one by one and under load from concurrent clients; caching
and shared rate limits resume when it is back, without a restart), and
cache invalidation end to end through the API, a real worker and Milvus Lite."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from hsearch.cache.guard import CacheKind, CacheOutcome
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.cache.redis import RedisCacheBackend
from hsearch.config import CacheSettings, RedisSettings
from hsearch.local.processes import Child, free_port
from hsearch.ratelimit.redis import KEY_PREFIX
from hsearch.types import Leg
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.integration.jobs import ingest
from tests.integration.services import REDIS_URL, start_redis
from tests.unit.api.conftest import api_settings, serve
from tests.unit.search.corpus import ScriptedStore

pytestmark = pytest.mark.integration

REDIS_DB = 13  # not the broker's: the suite flushes that one when a session starts


@pytest.fixture
def namespace() -> Iterator[str]:
    """A key namespace of this test's own on the shared Redis, deleted afterwards."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    yield name
    client = redis.Redis.from_url(f"{REDIS_URL}/{REDIS_DB}")
    keys = list(client.scan_iter(match=f"hsearch:v1:{name}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
async def backend(namespace: str) -> AsyncIterator[RedisCacheBackend]:
    store = RedisCacheBackend(f"{REDIS_URL}/{REDIS_DB}", socket_timeout_s=1.0)
    yield store
    await store.aclose()


async def test_the_redis_store_keeps_values_for_their_ttl_and_locks_for_one_holder(
    backend: RedisCacheBackend, namespace: str
) -> None:
    key = f"hsearch:v1:{namespace}:k"
    assert await backend.get(key) is None
    await backend.set(key, b"\x00value", ttl_s=0.2)
    assert await backend.get(key) == b"\x00value"
    deadline = time.monotonic() + 5
    while await backend.get(key) is not None:
        assert time.monotonic() < deadline, "the value outlived its TTL"
        await asyncio.sleep(0.05)
    lock = f"hsearch:v1:{namespace}:lock"
    token = await backend.acquire(lock, ttl_s=10)
    assert token is not None
    assert await backend.acquire(lock, ttl_s=10) is None
    await backend.release(lock, "another-holder")
    assert await backend.acquire(lock, ttl_s=10) is None, "only its holder releases a lock"
    await backend.release(lock, token)
    assert await backend.acquire(lock, ttl_s=10) is not None


def cache_settings(tmp_path: Path, *, url: str, namespace: str, **redis_options: Any) -> Any:
    settings = api_settings(tmp_path)
    return settings.model_copy(
        update={
            "redis": RedisSettings(url=url, **redis_options),
            "cache": CacheSettings(namespace=namespace),
        }
    )


DOCS = [
    {"external_id": "fox", "title": "Fox", "text": "The quick brown fox jumps."},
    {"external_id": "dog", "title": "Dog", "text": "The lazy dog sleeps all day."},
]


async def test_identical_misses_compute_once_across_api_processes(
    tmp_path: Path, namespace: str
) -> None:
    """Three apps (three API processes: own services, own Redis connections) on one Redis
    and one store; twelve identical searches at once run the legs once."""
    url = f"{REDIS_URL}/{REDIS_DB}"
    rows = InMemoryVectorStore()
    async with serve(api_settings(tmp_path / "seed"), store=rows) as seed:
        resp = await seed.client.post("/v1/documents", json={"documents": DOCS})
        assert resp.status_code == 202
        assert seed.services.indexing().process_job(seed.queue.sent[0]) == "succeeded"
        store = ScriptedStore(rows._rows, dense=0.3, sparse=0.3)
        settings = cache_settings(tmp_path / "seed", url=url, namespace=namespace)
        async with (
            serve(settings, store=store, cache=RedisCacheBackend(url)) as one,
            serve(settings, store=store, cache=RedisCacheBackend(url)) as two,
            serve(settings, store=store, cache=RedisCacheBackend(url)) as three,
        ):
            apps = [one, two, three]
            body = {"query": "lazy dog", "top_k": 2}
            responses = await asyncio.gather(
                *(apps[i % 3].client.post("/v1/search", json=body) for i in range(12))
            )
    assert all(r.status_code == 200 for r in responses)
    flags = sorted(r.json()["cached"] for r in responses)
    assert flags == [False] + [True] * 11
    assert [leg for leg, _ in store.calls] == [Leg.DENSE, Leg.SPARSE], "computed once"
    assert len({str(r.json()["hits"]) for r in responses}) == 1


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[int, list[Child]]]:
    """A redis-server of this test's own on a free port (the shared one is never
    stopped); the list holds the running server, which the test may stop and replace."""
    port = free_port()
    servers = [start_redis(port, tmp_path)]
    yield port, servers
    for server in servers:
        server.stop()


async def test_searches_answer_through_a_redis_outage_and_caching_resumes(
    tmp_path: Path, private_redis: tuple[int, list[Child]], caplog: pytest.LogCaptureFixture
) -> None:
    port, servers = private_redis
    url = f"redis://127.0.0.1:{port}/0"
    settings = cache_settings(
        tmp_path,
        url=url,
        namespace="outage",
        socket_timeout_s=0.1,
        retry_after_s=0.2,
        retry_max_s=0.4,
    )
    async with serve(settings, cache=RedisCacheBackend(url, socket_timeout_s=0.1)) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS})
        assert resp.status_code == 202
        assert api.services.indexing().process_job(api.queue.sent[0]) == "succeeded"

        async def search() -> dict[str, Any]:
            resp = await api.client.post("/v1/search", json={"query": "lazy dog"})
            assert resp.status_code == 200, resp.text
            body: dict[str, Any] = resp.json()
            assert body["hits"][0]["external_id"] == "dog"
            return body

        await search()
        assert (await search())["cached"]

        servers[0].stop()  # Redis goes away
        with caplog.at_level(logging.WARNING, logger="hsearch.cache.guard"):
            started = time.perf_counter()
            outage = [await search() for _ in range(20)]
            per_search = (time.perf_counter() - started) / len(outage)
        assert not any(b["cached"] for b in outage), "the cache is bypassed, searches answer"
        assert per_search < 0.25, f"an outage costs little: {per_search:.3f} s a search"
        warnings = [r for r in caplog.records if "cache.store.unavailable" in r.message]
        assert len(warnings) == 1, "logged once per outage, not per request"
        counters = api.services.cache_counters
        assert counters.count(CacheKind.RESULT, CacheOutcome.ERROR) >= 20
        ready = await api.client.get("/readyz")
        assert ready.status_code == 200, "ready without its cache"
        assert ready.json()["status"] == "degraded"
        assert ready.json()["components"]["redis"]["status"] == "error"

        servers.append(start_redis(port, tmp_path))  # back, on the same address
        deadline = time.monotonic() + 10
        while not (await search())["cached"]:
            assert time.monotonic() < deadline, "caching did not resume"
            await asyncio.sleep(0.05)
        assert api.services.cache is not None
        assert api.services.cache.available


CLIENTS = 8
QUERIES = ["lazy dog", "quick brown fox", "dog sleeps", "fox jumps"]


async def test_no_search_fails_when_redis_stops_under_load(
    tmp_path: Path, private_redis: tuple[int, list[Child]]
) -> None:
    """Eight clients search at once, repeated and distinct queries, against an API whose
    caches and rate limiter are on a Redis server this test stops mid-run: every
    search answers 200 before, during and after; once Redis is back (same address),
    results are cached and requests counted in it again, without a restart."""
    port, servers = private_redis
    url = f"redis://127.0.0.1:{port}/0"
    settings = cache_settings(
        tmp_path,
        url=url,
        namespace="load",
        socket_timeout_s=0.1,
        retry_after_s=0.2,
        retry_max_s=0.4,
    )
    settings = settings.model_copy(
        update={
            # Limits and the concurrency cap above the offered load: a 429 or 503 here
            # would be the outage's doing.
            "ratelimit": settings.ratelimit.model_copy(
                update={"default": "100000/minute", "redis_timeout_s": 0.1, "redis_retry_s": 0.2}
            ),
            "api": settings.api.model_copy(update={"max_concurrent_searches": 64}),
        }
    )
    async with serve(settings, cache=RedisCacheBackend(url, socket_timeout_s=0.1)) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS})
        assert resp.status_code == 202
        assert api.services.indexing().process_job(api.queue.sent[0]) == "succeeded"
        statuses: list[int] = []
        failures: list[str] = []
        stop = asyncio.Event()

        async def client(n: int) -> None:
            i = 0
            while not stop.is_set():
                # Repeated queries (cache hits while Redis is up) and ones seen once.
                query = QUERIES[i % len(QUERIES)] if i % 2 else f"dog {n} {i}"
                resp = await api.client.post("/v1/search", json={"query": query})
                statuses.append(resp.status_code)
                if resp.status_code != 200:
                    failures.append(resp.text)
                i += 1

        async def served(count: int) -> None:
            deadline = time.monotonic() + 20
            target = len(statuses) + count
            while len(statuses) < target:
                assert time.monotonic() < deadline, f"{len(statuses)} searches answered"
                await asyncio.sleep(0.01)

        load = [asyncio.create_task(client(n)) for n in range(CLIENTS)]
        try:
            await served(80)
            before = len(statuses)
            servers[0].stop()  # Redis goes away mid-run
            await served(160)
            during = len(statuses) - before
        finally:
            stop.set()
            await asyncio.gather(*load)
        assert failures == [], failures[:3]
        assert set(statuses) == {200}
        assert during >= 160
        assert api.services.cache is not None
        assert not api.services.cache.available

        # Back, on the same address and empty: what it holds next, this API put there.
        servers.append(start_redis(port, tmp_path))
        deadline = time.monotonic() + 10
        with redis.Redis.from_url(url) as r:
            while True:
                resp = await api.client.post("/v1/search", json={"query": "lazy dog"})
                assert resp.status_code == 200, resp.text
                if resp.json()["cached"] and r.keys(f"{KEY_PREFIX}*"):
                    break  # results cached and requests counted in Redis again
                assert time.monotonic() < deadline, "caching or shared limits did not resume"
                await asyncio.sleep(0.05)
        assert api.services.cache.available


async def test_the_in_process_store_needs_no_redis(tmp_path: Path) -> None:
    """The embedded profile: no Redis URL, caching in the process."""
    settings = api_settings(tmp_path)
    assert settings.redis.url is None
    async with serve(settings, cache=InMemoryCacheBackend()) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS})
        assert resp.status_code == 202
        assert api.services.indexing().process_job(api.queue.sent[0]) == "succeeded"
        first = await api.client.post("/v1/search", json={"query": "fox"})
        second = await api.client.post("/v1/search", json={"query": "fox"})
        assert (first.json()["cached"], second.json()["cached"]) == (False, True)


async def test_the_next_search_after_a_committed_write_sees_it(
    client: httpx.AsyncClient, worker: Child
) -> None:
    """Through the API with Postgres, Redis (the cache), Milvus Lite and a real worker."""
    job = await ingest(client, DOCS)
    assert job["status"] == "succeeded", job

    async def search() -> dict[str, Any]:
        resp = await client.post("/v1/search", json={"query": "sleeping animals", "top_k": 5})
        assert resp.status_code == 200, resp.text
        body: dict[str, Any] = resp.json()
        return body

    first = await search()
    second = await search()
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["hits"] == first["hits"]

    # Re-ingest a document with new text: the job's end (after its flush) is the commit.
    changed = {"external_id": "fox", "title": "Fox", "text": "The fox is sleeping now."}
    job = await ingest(client, [changed])
    assert job["status"] == "succeeded", job
    after = await search()
    assert not after["cached"]
    fox = next(h for h in after["hits"] if h["external_id"] == "fox")
    assert fox["text"] == changed["text"]

    resp = await client.delete("/v1/documents/dog")
    assert resp.status_code in (200, 204), resp.text
    gone = await search()
    assert not gone["cached"]
    assert "dog" not in [h["external_id"] for h in gone["hits"]]


async def test_pages_from_a_cursor_hold_still_while_documents_change(
    client: httpx.AsyncClient, worker: Child
) -> None:
    """Page 1, then a write that changes the ranking, then page 2 from page 1's cursor:
    the pages are the whole list's first four hits, as before the write."""
    docs = [
        {"external_id": f"d{i}", "title": f"River {i}", "text": f"River number {i} flows."}
        for i in range(6)
    ]
    job = await ingest(client, docs)
    assert job["status"] == "succeeded", job
    query = {"query": "river flows", "mode": "keyword"}
    whole = (await client.post("/v1/search", json={**query, "top_k": 4})).json()
    first = (await client.post("/v1/search", json={**query, "top_k": 2})).json()
    assert [h["chunk_id"] for h in first["hits"]] == [h["chunk_id"] for h in whole["hits"][:2]]
    assert first["next_cursor"]

    # The best hit goes away: a live page 2 would skip the third.
    resp = await client.delete(f"/v1/documents/{first['hits'][0]['external_id']}")
    assert resp.status_code in (200, 204), resp.text
    second = (
        await client.post("/v1/search", json={**query, "top_k": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [h["chunk_id"] for h in second["hits"]] == [h["chunk_id"] for h in whole["hits"][2:4]]
    assert second["offset"] == 2
    live = (await client.post("/v1/search", json={**query, "top_k": 2, "offset": 2})).json()
    assert [h["chunk_id"] for h in live["hits"]] != [h["chunk_id"] for h in second["hits"]]
