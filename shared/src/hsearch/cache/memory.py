"""The in-process cache store: what the caches use with no Redis configured (the
embedded profile, ``hsearch run``) and what unit tests use.

Entries live in one LRU map bounded in bytes (``cache.memory_max_bytes``), each with a
deadline; locks are kept beside them, so single flight works between the requests of
one process exactly as it does across processes through Redis.
"""

from __future__ import annotations

import secrets
import time

from cachetools import LRUCache

__all__ = ["InMemoryCacheBackend"]


class InMemoryCacheBackend:
    """A :class:`~hsearch.cache.protocol.CacheBackend` local to this process."""

    shared = False

    def __init__(self, *, max_bytes: int = 256 * 1024 * 1024) -> None:
        self._entries: LRUCache[str, tuple[float, bytes]] = LRUCache(
            maxsize=max_bytes, getsizeof=_size
        )
        self._max_bytes = max_bytes
        self._locks: dict[str, tuple[float, str]] = {}

    async def get(self, key: str) -> bytes | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if expires <= time.monotonic():
            self._entries.pop(key, None)
            return None
        return value

    async def set(self, key: str, value: bytes, *, ttl_s: float) -> None:
        if ttl_s > 0 and _size((0.0, value)) <= self._max_bytes:
            self._entries[key] = (time.monotonic() + ttl_s, value)

    async def acquire(self, key: str, *, ttl_s: float) -> str | None:
        now = time.monotonic()
        held = self._locks.get(key)
        if held is not None and held[0] > now:
            return None
        if len(self._locks) > 1024:  # drop lapsed locks (holders that never released)
            self._locks = {k: v for k, v in self._locks.items() if v[0] > now}
        token = secrets.token_hex(8)
        self._locks[key] = (now + ttl_s, token)
        return token

    async def release(self, key: str, token: str) -> None:
        held = self._locks.get(key)
        if held is not None and held[1] == token:
            del self._locks[key]

    async def delete_prefix(self, prefix: str) -> int:
        keys = [key for key in self._entries if key.startswith(prefix)]
        for key in keys:
            self._entries.pop(key, None)
        return len(keys)

    async def ping(self) -> None:
        return None

    async def aclose(self) -> None:
        self._entries.clear()
        self._locks.clear()


def _size(entry: tuple[float, bytes]) -> int:
    return len(entry[1]) + 64  # the value, and about what keeping it costs besides
