"""The Redis side of the rate limits, the only module of hsearch.ratelimit that reaches
Redis: the ``limits`` library's asyncio Redis storage (whose Lua scripts count a sliding
window atomically, shared by every API process) on a redis-py connection pool that this
module opens and closes."""

from __future__ import annotations

from dataclasses import dataclass

import redis.asyncio
from limits.aio.storage import RedisStorage, Storage

__all__ = ["KEY_PREFIX", "RedisRateLimitStorage", "redis_storage"]

KEY_PREFIX = "hsearch:v1:ratelimit"
"""Every rate-limit key in Redis starts with this (versioned, as every hsearch key)."""


@dataclass(frozen=True, slots=True)
class RedisRateLimitStorage:
    storage: Storage
    pool: redis.asyncio.ConnectionPool

    async def aclose(self) -> None:
        await self.pool.aclose()


def redis_storage(url: str, *, timeout_s: float) -> RedisRateLimitStorage:
    """A storage on the Redis at ``url``. Connecting is lazy; a command that fails or
    gets no answer within ``timeout_s`` raises ``limits.errors.StorageError``."""
    pool = redis.asyncio.ConnectionPool.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
    )
    storage = RedisStorage(
        "async+redis://",  # the scheme picks the asyncio storage; the pool has the address
        implementation="redispy",
        wrap_exceptions=True,
        key_prefix=KEY_PREFIX,
        connection_pool=pool,  # type: ignore[arg-type]  # passed on to redis-py, typed narrower
    )
    return RedisRateLimitStorage(storage=storage, pool=pool)
