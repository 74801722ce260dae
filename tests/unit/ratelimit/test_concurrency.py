from __future__ import annotations

import pytest

from hsearch.errors import OverloadedError
from hsearch.ratelimit.concurrency import ConcurrencyGate


def test_refuses_past_the_limit_at_once_and_frees_slots() -> None:
    gate = ConcurrencyGate(2, setting="api.max_concurrent_searches", retry_after=3)
    with gate.slot(), gate.slot():
        with (
            pytest.raises(OverloadedError, match=r"api\.max_concurrent_searches") as info,
            gate.slot(),
        ):
            pass
        assert info.value.retry_after == 3
        assert (info.value.status_code, info.value.code) == (503, "overloaded")
        assert gate.active == 2
    assert gate.active == 0
    assert gate.refused == 1
    with gate.slot():  # free again
        assert gate.active == 1


def test_a_failing_holder_frees_its_slot() -> None:
    gate = ConcurrencyGate(1, setting="s")
    with pytest.raises(RuntimeError), gate.slot():
        raise RuntimeError
    assert gate.active == 0
