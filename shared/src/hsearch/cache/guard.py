"""A cache store that degrades, never breaks: failures bypass the cache.

:class:`GuardedCache` wraps a :class:`~hsearch.cache.protocol.CacheBackend` with a
circuit breaker. The first failed call opens it: a warning is logged (once per outage,
not per request) and for ``retry_after_s`` the store is not dialled at all, every call
answering as the store being away; then one call probes it, and each further failure
doubles the wait up to ``retry_max_s``. The first call that succeeds closes it (logged),
so caching resumes without a restart. What callers see of an open circuit is
:class:`~hsearch.errors.CacheUnavailableError` from :meth:`GuardedCache.get` (counted by
them as an ``error`` outcome) and no-ops from the writes.

:class:`CacheCounters` counts every lookup's outcome per cache (``result``,
``embedding``) and outcome (``hit``, ``miss``, ``error``): the numbers behind
``hsearch_cache_requests_total{cache,result}``, handed to listeners as they happen.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from hsearch.cache.protocol import CacheBackend
from hsearch.errors import CacheUnavailableError

__all__ = ["CacheCounters", "CacheKind", "CacheOutcome", "GuardedCache", "LockGrant"]

logger = logging.getLogger(__name__)


class CacheKind(StrEnum):
    RESULT = "result"
    EMBEDDING = "embedding"


class CacheOutcome(StrEnum):
    HIT = "hit"
    MISS = "miss"
    ERROR = "error"
    """The store was away (or its circuit open): the cache was bypassed."""


Listener = Callable[[CacheKind, CacheOutcome], None]


class CacheCounters:
    """Lookups per cache and outcome, since the process started; thread-safe."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[CacheKind, CacheOutcome]] = Counter()
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener(cache, outcome)`` on every lookup from now on (a metrics
        counter's ``inc``); a listener that raises is logged, never propagated."""
        self._listeners.append(listener)

    def record(self, cache: CacheKind, outcome: CacheOutcome) -> None:
        with self._lock:
            self._counts[cache, outcome] += 1
        for listener in self._listeners:
            try:
                listener(cache, outcome)
            except Exception as exc:  # metrics never fail a search
                logger.warning("cache.listener.failed error=%s", exc)

    def count(self, cache: CacheKind, outcome: CacheOutcome) -> int:
        with self._lock:
            return self._counts[cache, outcome]

    def snapshot(self) -> dict[tuple[CacheKind, CacheOutcome], int]:
        with self._lock:
            return dict(self._counts)


@dataclass(frozen=True, slots=True)
class LockGrant:
    """What asking for a single-flight lock gave."""

    token: str | None
    """Set: this caller holds the lock and computes."""
    held_elsewhere: bool
    """Another caller computes: wait for its result (bounded), then compute."""


class _CircuitOpenError(CacheUnavailableError):
    """Raised without dialling the store: its circuit is open."""


class GuardedCache:
    """A cache store behind a circuit breaker (see the module docstring)."""

    def __init__(
        self,
        backend: CacheBackend,
        *,
        retry_after_s: float = 0.5,
        retry_max_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self._retry_after = retry_after_s
        self._retry_max = max(retry_max_s, retry_after_s)
        self._clock = clock
        self._down_since: float | None = None
        self._backoff = retry_after_s
        self._retry_at = 0.0
        self.outages = 0
        """Outages seen since the process started (one per circuit opening)."""

    @property
    def shared(self) -> bool:
        return self.backend.shared

    @property
    def available(self) -> bool:
        """Whether the last call reached the store (the circuit is closed)."""
        return self._down_since is None

    async def get(self, key: str) -> bytes | None:
        """The value under ``key`` or ``None``; raises CacheUnavailableError when the
        store is away (then the caller bypasses the cache)."""
        self._admit()
        try:
            value = await self.backend.get(key)
        except CacheUnavailableError as exc:
            self._failed(exc)
            raise
        self._succeeded()
        return value

    async def set(self, key: str, value: bytes, *, ttl_s: float) -> None:
        """Store ``value``; nothing happens when the store is away."""
        try:
            self._admit()
            await self.backend.set(key, value, ttl_s=ttl_s)
        except CacheUnavailableError as exc:
            self._failed(exc)
            return
        self._succeeded()

    async def acquire(self, key: str, *, ttl_s: float) -> LockGrant:
        """Ask for the lock ``key``; with the store away nobody holds it (compute)."""
        try:
            self._admit()
            token = await self.backend.acquire(key, ttl_s=ttl_s)
        except CacheUnavailableError as exc:
            self._failed(exc)
            return LockGrant(token=None, held_elsewhere=False)
        self._succeeded()
        return LockGrant(token=token, held_elsewhere=token is None)

    async def release(self, key: str, token: str) -> None:
        try:
            self._admit()
            await self.backend.release(key, token)
        except CacheUnavailableError as exc:
            self._failed(exc)  # the lock lapses on its own
            return
        self._succeeded()

    def _admit(self) -> None:
        """Raise while the circuit is open; let one call through when it is due."""
        if self._down_since is None:
            return
        now = self._clock()
        if now < self._retry_at:
            raise _CircuitOpenError("cache store unavailable (circuit open)")
        # This call probes the store; concurrent ones keep bypassing it meanwhile.
        self._retry_at = now + self._backoff

    def _failed(self, exc: CacheUnavailableError) -> None:
        if isinstance(exc, _CircuitOpenError):
            return  # not dialled: nothing learnt about the store
        now = self._clock()
        if self._down_since is None:
            self._down_since = now
            self._backoff = self._retry_after
            self.outages += 1
            logger.warning(
                "cache.store.unavailable error=%s: caches bypassed, retrying in %.1f s",
                exc.message,
                self._backoff,
            )
        else:  # a probe failed: wait longer
            self._backoff = min(self._backoff * 2, self._retry_max)
        self._retry_at = now + self._backoff

    def _succeeded(self) -> None:
        if self._down_since is None:
            return
        logger.warning(
            "cache.store.recovered after %.1f s: caching resumed", self._clock() - self._down_since
        )
        self._down_since = None
        self._backoff = self._retry_after
        self._retry_at = 0.0
