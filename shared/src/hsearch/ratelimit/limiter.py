"""Counting requests against the policy: in Redis, shared by every API process, or in
the process while Redis does not answer (docs/api.md, Limits).

The counting itself is the ``limits`` library's sliding window counter: two counters per
key and window (this one and the previous, weighted by how much of it still overlaps),
so a key cannot double its rate across a window boundary as with fixed windows, at a
constant cost per check (a moving window keeps one entry per request).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from limits import RateLimitItem
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from hsearch.errors import RateLimitedError
from hsearch.ratelimit.policy import AppliedLimit, RateLimitPolicy
from hsearch.types import Scope

__all__ = ["RateLimiter"]

logger = logging.getLogger(__name__)


class RateLimiter:
    """Charges a request to its key and scope; raises :class:`RateLimitedError` (429,
    ``Retry-After``) once the key is over its limit.

    ``shared`` is the storage every process counts in (Redis). While it fails, each
    process counts on its own (so a key may pass up to the limit once per process) and
    tries ``shared`` again every ``retry_s``; without ``shared`` (no Redis configured),
    limits are per process. Both are logged and counted (``fallbacks``)."""

    def __init__(
        self,
        policy: RateLimitPolicy,
        *,
        shared: Storage | None,
        retry_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self._shared = None if shared is None else SlidingWindowCounterRateLimiter(shared)
        self._local: SlidingWindowCounterRateLimiter | None = None
        self._retry_s = retry_s
        self._clock = clock
        self._shared_down_until: float | None = None
        self.fallbacks = 0
        """How many times the shared storage failed and the process counted on its own."""

    @property
    def shared_down(self) -> bool:
        """Whether the last attempt at the shared storage failed (counting is local)."""
        return self._shared_down_until is not None

    async def hit(self, *, scope: Scope, key_prefix: str) -> None:
        """Count one request of the key ``key_prefix`` in ``scope``."""
        if not self.policy.enabled:
            return
        applied = self.policy.limit_for(scope=scope, key_prefix=key_prefix)
        ids = (scope.value, key_prefix)
        strategy = self._strategy()
        if strategy is not self._local:
            try:
                await self._count(strategy, applied, ids)
            except StorageError as exc:
                self._shared_failed(exc)
            else:
                if self._shared_down_until is not None:
                    logger.info("ratelimit.redis.recovered")
                    self._shared_down_until = None
                return
        await self._count(self._local_strategy(), applied, ids)

    def _strategy(self) -> SlidingWindowCounterRateLimiter:
        if self._shared is None:
            return self._local_strategy()
        down_until = self._shared_down_until
        if down_until is not None and self._clock() < down_until:
            return self._local_strategy()
        return self._shared

    def _local_strategy(self) -> SlidingWindowCounterRateLimiter:
        if self._local is None:  # built on the event loop: the storage starts a task there
            self._local = SlidingWindowCounterRateLimiter(MemoryStorage())
        return self._local

    def _shared_failed(self, exc: StorageError) -> None:
        if self._shared_down_until is None:
            logger.warning(
                "ratelimit.redis.unavailable error=%s: counting per process, retrying in %s s",
                type(exc.storage_error).__name__,
                self._retry_s,
            )
        self.fallbacks += 1
        self._shared_down_until = self._clock() + self._retry_s

    async def _count(
        self,
        strategy: SlidingWindowCounterRateLimiter,
        applied: AppliedLimit,
        ids: tuple[str, str],
    ) -> None:
        for item in applied.items:
            if not await strategy.hit(item, *ids):
                raise await _refusal(strategy, item, applied, ids)


async def _refusal(
    strategy: SlidingWindowCounterRateLimiter,
    item: RateLimitItem,
    applied: AppliedLimit,
    ids: tuple[str, str],
) -> RateLimitedError:
    stats = await strategy.get_window_stats(item, *ids)
    retry_after = max(1, math.ceil(stats.reset_time - time.time()))
    msg = (
        f"rate limit of {applied.text} per key for {ids[0]} requests reached "
        f"({applied.setting}); retry after {retry_after} s"
    )
    return RateLimitedError(msg, retry_after=retry_after)
