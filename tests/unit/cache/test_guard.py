"""The circuit breaker in front of the cache store: an outage is logged once, the store
is not dialled while the circuit is open, and caching resumes when it answers again."""

from __future__ import annotations

import logging

import pytest

from hsearch.cache.guard import GuardedCache
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.errors import CacheUnavailableError


class SwitchableBackend(InMemoryCacheBackend):
    """The in-process store, which can be taken down; counts the calls that reach it."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.calls = 0

    def _dial(self) -> None:
        self.calls += 1
        if self.down:
            raise CacheUnavailableError("redis: ConnectionError: refused")

    async def get(self, key: str) -> bytes | None:
        self._dial()
        return await super().get(key)

    async def set(self, key: str, value: bytes, *, ttl_s: float) -> None:
        self._dial()
        await super().set(key, value, ttl_s=ttl_s)

    async def acquire(self, key: str, *, ttl_s: float) -> str | None:
        self._dial()
        return await super().acquire(key, ttl_s=ttl_s)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_an_outage_is_logged_once_and_not_dialled_until_the_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend, clock = SwitchableBackend(), Clock()
    cache = GuardedCache(backend, retry_after_s=1.0, retry_max_s=4.0, clock=clock)
    await cache.set("k", b"v", ttl_s=60)
    assert await cache.get("k") == b"v"
    backend.down = True
    dialled = backend.calls
    with caplog.at_level(logging.WARNING, logger="hsearch.cache.guard"):
        for _ in range(50):
            with pytest.raises(CacheUnavailableError):
                await cache.get("k")
            await cache.set("k", b"w", ttl_s=60)  # a no-op, never raised
            grant = await cache.acquire("lock", ttl_s=1)
            assert (grant.token, grant.held_elsewhere) == (None, False), "compute, do not wait"
    assert backend.calls == dialled + 1, "one failed call opens the circuit"
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "cache.store.unavailable" in caplog.records[0].message
    assert cache.outages == 1
    assert not cache.available

    clock.now += 1.0  # the retry is due: one probe, which fails: the wait doubles
    with pytest.raises(CacheUnavailableError):
        await cache.get("k")
    assert backend.calls == dialled + 2
    clock.now += 1.5
    with pytest.raises(CacheUnavailableError):
        await cache.get("k")
    assert backend.calls == dialled + 2, "2 s now, not 1"

    backend.down = False
    clock.now += 0.5
    with caplog.at_level(logging.WARNING, logger="hsearch.cache.guard"):
        assert await cache.get("k") == b"v"
    assert cache.available
    assert "cache.store.recovered" in caplog.records[-1].message
    assert cache.outages == 1

    backend.down = True  # a second outage is logged again
    with (
        caplog.at_level(logging.WARNING, logger="hsearch.cache.guard"),
        pytest.raises(CacheUnavailableError),
    ):
        await cache.get("k")
    assert cache.outages == 2
    assert "cache.store.unavailable" in caplog.records[-1].message


async def test_the_in_process_store_expires_and_locks() -> None:
    store = InMemoryCacheBackend(max_bytes=1000)
    await store.set("big", b"x" * 1000, ttl_s=60)
    assert await store.get("big") is None, "larger than the store: not kept"
    for i in range(20):
        await store.set(f"k{i}", b"x" * 100, ttl_s=60)
    assert await store.get("k0") is None, "the least recently used went first"
    assert await store.get("k19") == b"x" * 100
    await store.set("a", b"1", ttl_s=60)
    await store.set("gone", b"1", ttl_s=1e-9)
    assert await store.get("a") == b"1"
    assert await store.get("gone") is None
    token = await store.acquire("l", ttl_s=60)
    assert token is not None
    assert await store.acquire("l", ttl_s=60) is None
    await store.release("l", "not-the-token")
    assert await store.acquire("l", ttl_s=60) is None, "only its holder releases a lock"
    await store.release("l", token)
    assert await store.acquire("l", ttl_s=60) is not None
    assert await store.acquire("lapsed", ttl_s=1e-9) is not None
    assert await store.acquire("lapsed", ttl_s=60) is not None, "a lapsed lock is free"
