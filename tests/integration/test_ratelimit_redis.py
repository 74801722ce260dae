"""Rate limits in a real Redis, shared by API processes, and the per-process fallback
while Redis is away: on a private redis-server this test starts on a free port and
stops (never the machine's shared Redis)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis

from hsearch.config import RateLimitSettings
from hsearch.errors import RateLimitedError
from hsearch.local.processes import free_port
from hsearch.ratelimit.limiter import RateLimiter
from hsearch.ratelimit.policy import RateLimitPolicy
from hsearch.ratelimit.redis import KEY_PREFIX, RedisRateLimitStorage, redis_storage
from hsearch.types import Scope
from tests.integration.services import start_redis

pytestmark = pytest.mark.integration

KEY = "hsk_0123456789ab"


@contextlib.asynccontextmanager
async def limiter_on(url: str, **settings: object) -> AsyncIterator[RateLimiter]:
    storage: RedisRateLimitStorage = redis_storage(url, timeout_s=0.5)
    policy = RateLimitPolicy(RateLimitSettings(**settings))
    try:
        yield RateLimiter(policy, shared=storage.storage, retry_s=0.2)
    finally:
        await storage.aclose()


async def hits_allowed(limiter: RateLimiter, n: int) -> int:
    allowed = 0
    for _ in range(n):
        with contextlib.suppress(RateLimitedError):
            await limiter.hit(scope=Scope.SEARCH, key_prefix=KEY)
            allowed += 1
    return allowed


async def test_processes_share_the_count_and_fall_back_while_redis_is_away(
    tmp_path: Path,
) -> None:
    port = free_port()
    root = tmp_path / "redis"
    root.mkdir()
    url = f"redis://127.0.0.1:{port}/0"
    server = start_redis(port, root)
    try:
        async with (
            limiter_on(url, default="4/minute") as one,
            limiter_on(url, default="4/minute") as two,
        ):
            # Two processes, one budget: 4 pass in all, however the hits are spread.
            assert await hits_allowed(one, 2) == 2
            assert await hits_allowed(two, 5) == 2
            assert await hits_allowed(one, 1) == 0
            with redis.Redis.from_url(url) as r:
                keys = [k.decode() for k in r.keys("*")]
            assert keys, "nothing was counted in Redis"
            assert all(k.startswith(KEY_PREFIX) for k in keys), keys

            server.stop()
            # Redis away: each process counts on its own, answering at once.
            started = time.monotonic()
            assert await hits_allowed(one, 6) == 4
            assert time.monotonic() - started < 3
            assert one.shared_down
            assert one.fallbacks >= 1
            assert await hits_allowed(two, 6) == 4

            # Redis back (empty): after retry_s the processes count in it together again.
            server = start_redis(port, root)
            deadline = time.monotonic() + 10
            while one.shared_down or two.shared_down:
                assert time.monotonic() < deadline, "the limiter never returned to Redis"
                for limiter in (one, two):
                    with contextlib.suppress(RateLimitedError):
                        await limiter.hit(scope=Scope.SEARCH, key_prefix="hsk_probeprobe00")
                await asyncio.sleep(0.05)
            assert await hits_allowed(one, 3) == 3
            assert await hits_allowed(two, 3) == 1
    finally:
        server.stop()
