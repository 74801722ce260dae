"""The Redis cache store: the product's only import of ``redis`` (ruff TID251).

Short socket timeouts (``redis.socket_timeout_s``) bound what an outage costs a
request; every failure is raised as :class:`~hsearch.errors.CacheUnavailableError`,
which :class:`~hsearch.cache.guard.GuardedCache` turns into a bypassed cache. Locks are
``SET key token NX PX ttl``, released by a compare-and-delete script so a holder whose
lock lapsed never releases another's.
"""

from __future__ import annotations

import secrets
from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from hsearch.errors import CacheUnavailableError

__all__ = ["RedisCacheBackend"]

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
end
return 0
"""


class RedisCacheBackend:
    """A :class:`~hsearch.cache.protocol.CacheBackend` on Redis, shared by every process
    that uses the same URL."""

    shared = True

    def __init__(self, url: str, *, socket_timeout_s: float = 0.1) -> None:
        self._client: redis.asyncio.Redis = redis.asyncio.Redis.from_url(
            url,
            socket_timeout=socket_timeout_s,
            socket_connect_timeout=socket_timeout_s,
            # Failures are handled by the guard's backoff, not by retrying here.
            retry=None,
            health_check_interval=0,
        )
        self._release: Any = self._client.register_script(_RELEASE)

    async def get(self, key: str) -> bytes | None:
        try:
            value = await self._client.get(key)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return value.encode() if isinstance(value, str) else value

    async def set(self, key: str, value: bytes, *, ttl_s: float) -> None:
        if ttl_s <= 0:
            return
        try:
            await self._client.set(key, value, px=max(1, int(ttl_s * 1000)))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def acquire(self, key: str, *, ttl_s: float) -> str | None:
        token = secrets.token_hex(8)
        try:
            taken = await self._client.set(key, token, nx=True, px=max(1, int(ttl_s * 1000)))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return token if taken else None

    async def release(self, key: str, token: str) -> None:
        try:
            await self._release(keys=[key], args=[token])
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def delete_prefix(self, prefix: str) -> int:
        # SCAN, not KEYS: it never blocks the server; UNLINK frees memory in the background.
        pattern = "".join(f"\\{c}" if c in "*?[]\\" else c for c in prefix) + "*"
        deleted = 0
        batch: list[bytes | str] = []
        try:
            async for key in self._client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    deleted += int(await self._client.unlink(*batch))
                    batch = []
            if batch:
                deleted += int(await self._client.unlink(*batch))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return deleted

    async def ping(self) -> None:
        try:
            await self._client.ping()
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def aclose(self) -> None:
        await self._client.aclose()


def _unavailable(exc: BaseException) -> CacheUnavailableError:
    return CacheUnavailableError(f"redis: {type(exc).__name__}: {exc}")
