"""What a cache stores values in: bytes under string keys, with a time to live, and
locks that let one process compute what others wait for (single flight)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["CacheBackend"]


class CacheBackend(Protocol):
    """A shared (Redis) or in-process byte store.

    Every method may raise :class:`~hsearch.errors.CacheUnavailableError`; callers go
    through :class:`~hsearch.cache.guard.GuardedCache`, which turns that into a miss.
    """

    @property
    def shared(self) -> bool:
        """Whether other processes see what is stored (Redis), or only this one."""
        ...

    async def get(self, key: str) -> bytes | None:
        """The value under ``key``, or ``None`` if absent or expired."""
        ...

    async def set(self, key: str, value: bytes, *, ttl_s: float) -> None:
        """Store ``value`` under ``key`` for ``ttl_s`` seconds."""
        ...

    async def acquire(self, key: str, *, ttl_s: float) -> str | None:
        """Take the lock ``key`` unless another holder has it: its token, or ``None``.
        The lock lapses after ``ttl_s`` if never released (its holder died)."""
        ...

    async def release(self, key: str, token: str) -> None:
        """Release the lock ``key`` if ``token`` still holds it."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Delete every key that starts with ``prefix``; how many there were."""
        ...

    async def ping(self) -> None:
        """Raise CacheUnavailableError unless the store answers."""
        ...

    async def aclose(self) -> None:
        """Release the store's connections."""
        ...
