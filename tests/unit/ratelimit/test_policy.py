from __future__ import annotations

import pytest
from pydantic import ValidationError

from hsearch.config import RateLimitSettings
from hsearch.ratelimit.policy import RateLimitPolicy, charged_scope
from hsearch.types import Scope

KEY = "hsk_0123456789ab"


def test_key_then_scope_then_default() -> None:
    policy = RateLimitPolicy(
        RateLimitSettings(
            default="100/minute",
            scopes={Scope.INGEST: "10/minute"},
            keys={KEY: "5/second;1000/hour"},
        )
    )
    default = policy.limit_for(scope=Scope.SEARCH, key_prefix="hsk_other")
    assert (default.text, default.setting) == ("100/minute", "ratelimit.default")
    scoped = policy.limit_for(scope=Scope.INGEST, key_prefix="hsk_other")
    assert (scoped.text, scoped.setting) == ("10/minute", "ratelimit.scopes.ingest")
    own = policy.limit_for(scope=Scope.INGEST, key_prefix=KEY)
    assert own.setting == f"ratelimit.keys.{KEY}"
    assert [(i.amount, i.get_expiry()) for i in own.items] == [(5, 1), (1000, 3600)]


@pytest.mark.parametrize("text", ["", "10", "0/minute", "10/fortnight", "ten/minute", "5/s"])
def test_limits_that_do_not_parse_are_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(ValidationError, match=r"ratelimit\.scopes\.search"):
        RateLimitSettings(scopes={Scope.SEARCH: text})


def test_charged_to_the_scope_that_let_the_request_in() -> None:
    accepted = [Scope.SEARCH, Scope.INGEST]
    assert charged_scope(accepted, {Scope.INGEST}) is Scope.INGEST
    assert charged_scope(accepted, {Scope.SEARCH, Scope.INGEST}) is Scope.SEARCH
    assert charged_scope(accepted, set()) is Scope.SEARCH  # an operator
