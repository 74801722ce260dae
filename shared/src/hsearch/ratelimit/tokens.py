"""A tenant's model tokens per day (``quotas.answer_tokens_per_day``): checked before an
answer is generated, charged with what the endpoint counted once it is written (or
with what the model read and wrote, estimated high, when a client went away first).

Counted with the ``limits`` library's sliding window counter, in Redis when one is
configured (shared by every API process) or in the process. The answer that crosses the
quota is finished (its tokens are known only at its end); the next is refused with 429
``quota_exceeded`` naming the quota, with ``Retry-After``. A store that fails lets
answers through (logged), as the rate limits do.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItemPerDay
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from limits.errors import StorageError

from hsearch.errors import QuotaExceededError

__all__ = ["ANSWER_TOKENS_QUOTA", "TokenQuota"]

logger = logging.getLogger(__name__)

ANSWER_TOKENS_QUOTA = "quotas.answer_tokens_per_day"


class TokenQuota:
    def __init__(self, *, per_day: int, storage: Storage | None = None) -> None:
        self._item = RateLimitItemPerDay(per_day, namespace="answer-tokens")
        self._storage = storage
        self._strategy: SlidingWindowCounterRateLimiter | None = None

    def _limiter(self) -> SlidingWindowCounterRateLimiter:
        if self._strategy is None:  # built on the event loop: the memory storage starts a task
            self._strategy = SlidingWindowCounterRateLimiter(self._storage or MemoryStorage())
        return self._strategy

    async def check(self, tenant_id: str) -> None:
        """Raise QuotaExceededError (429) when the tenant has used its tokens of the day."""
        limiter = self._limiter()
        try:
            allowed = await limiter.test(self._item, tenant_id)
            if allowed:
                return
            stats = await limiter.get_window_stats(self._item, tenant_id)
        except StorageError as exc:
            logger.warning("quota.tokens.unavailable error=%s", type(exc.storage_error).__name__)
            return
        retry = max(1, math.ceil(stats.reset_time - time.time()))
        msg = (
            f"the tenant's model tokens of the day are used ({ANSWER_TOKENS_QUOTA}); "
            f"retry after {retry} s"
        )
        raise QuotaExceededError(msg, quota=ANSWER_TOKENS_QUOTA, retry_after_s=retry)

    async def charge(self, tenant_id: str, tokens: int) -> None:
        """Count ``tokens`` the tenant's answer used (up to what the day allows)."""
        if tokens <= 0:
            return
        limiter = self._limiter()
        try:
            if not await limiter.hit(self._item, tenant_id, cost=tokens):
                # More than is left: fill the day's allowance, so the next is refused.
                stats = await limiter.get_window_stats(self._item, tenant_id)
                if stats.remaining > 0:
                    await limiter.hit(self._item, tenant_id, cost=stats.remaining)
        except StorageError as exc:
            logger.warning("quota.tokens.unavailable error=%s", type(exc.storage_error).__name__)
