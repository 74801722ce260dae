"""The limiter on the per-process storage, and its fallback when the shared storage fails
(tests/integration/test_ratelimit_redis.py does the same against a real Redis)."""

from __future__ import annotations

from typing import Any

import pytest
from limits.aio.storage import MemoryStorage
from limits.errors import StorageError

from hsearch.config import RateLimitSettings
from hsearch.errors import RateLimitedError
from hsearch.ratelimit.limiter import RateLimiter
from hsearch.ratelimit.policy import RateLimitPolicy
from hsearch.types import Scope

KEY = "hsk_0123456789ab"


def limiter(shared: Any = None, **settings: Any) -> RateLimiter:
    policy = RateLimitPolicy(RateLimitSettings(**settings))
    return RateLimiter(policy, shared=shared, retry_s=5.0, clock=clock)


NOW = [0.0]


def clock() -> float:
    return NOW[0]


async def test_refuses_past_the_limit_naming_it_with_retry_after() -> None:
    rl = limiter(default="3/minute")
    for _ in range(3):
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
    with pytest.raises(RateLimitedError, match=r"3/minute .*ratelimit\.default") as info:
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
    assert 1 <= info.value.retry_after <= 60
    assert (info.value.status_code, info.value.code) == (429, "rate_limited")


async def test_keys_and_scopes_have_budgets_of_their_own() -> None:
    rl = limiter(default="1/minute")
    await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
    await rl.hit(scope=Scope.INGEST, key_prefix=KEY)
    await rl.hit(scope=Scope.SEARCH, key_prefix="hsk_ffffffffffff")
    with pytest.raises(RateLimitedError):
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)


async def test_disabled_counts_nothing() -> None:
    rl = limiter(default="1/minute", enabled=False)
    for _ in range(5):
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)


class FlakyStorage(MemoryStorage):
    """A shared storage that fails while ``down``."""

    down = False

    async def acquire_sliding_window_entry(self, *args: Any, **kwargs: Any) -> bool:
        if self.down:
            raise StorageError(ConnectionError("refused"))
        return await super().acquire_sliding_window_entry(*args, **kwargs)


async def test_falls_back_to_the_process_while_shared_fails_and_returns() -> None:
    NOW[0] = 0.0
    shared = FlakyStorage()
    rl = limiter(shared, default="2/minute")
    await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)  # counted in shared
    shared.down = True
    await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)  # shared fails: counted locally
    assert rl.shared_down
    assert rl.fallbacks == 1
    await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)  # local: 2 of 2, shared not asked
    with pytest.raises(RateLimitedError):  # still limited while shared is away
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
    assert rl.fallbacks == 1
    shared.down = False
    NOW[0] = 10.0  # past retry_s: shared is asked again, and holds 1 of 2
    await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
    assert not rl.shared_down
    with pytest.raises(RateLimitedError):
        await rl.hit(scope=Scope.SEARCH, key_prefix=KEY)
