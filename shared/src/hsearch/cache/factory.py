"""The cache store the settings ask for: Redis when ``redis.url`` is set, else one in
this process (the embedded profile: caching works, within one process)."""

from __future__ import annotations

from hsearch.cache.guard import GuardedCache
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.cache.protocol import CacheBackend
from hsearch.cache.redis import RedisCacheBackend
from hsearch.config import CacheSettings, RedisSettings

__all__ = ["create_cache"]


def create_cache(
    redis: RedisSettings, cache: CacheSettings, *, backend: CacheBackend | None = None
) -> GuardedCache:
    """A guarded store: ``backend`` if given, else Redis or the in-process fallback."""
    if backend is None:
        if redis.url is not None:
            backend = RedisCacheBackend(
                redis.url.get_secret_value(), socket_timeout_s=redis.socket_timeout_s
            )
        else:
            backend = InMemoryCacheBackend(max_bytes=cache.memory_max_bytes)
    return GuardedCache(backend, retry_after_s=redis.retry_after_s, retry_max_s=redis.retry_max_s)
