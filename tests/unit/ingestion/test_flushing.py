"""The flush schedule: at most one flush per interval, at least one after every request."""

from __future__ import annotations

import pytest

from hsearch.errors import VectorStoreError
from hsearch.ingestion.worker.flushing import RETRY_S, FlushSchedule
from tests.unit.ingestion.timing import Clock, Timers


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def timers() -> Timers:
    return Timers()


def schedule(flushes: list[float], clock: Clock, timers: Timers) -> FlushSchedule:
    return FlushSchedule(
        lambda: flushes.append(clock.now), min_interval_s=10, clock=clock, start_timer=timers
    )


def test_the_first_request_flushes_at_once(clock: Clock, timers: Timers) -> None:
    flushes: list[float] = []
    assert schedule(flushes, clock, timers).request() is True
    assert flushes == [100.0]
    assert timers.live() == []


def test_requests_within_the_interval_share_one_timed_flush(clock: Clock, timers: Timers) -> None:
    flushes: list[float] = []
    s = schedule(flushes, clock, timers)
    s.request()
    for _ in range(5):
        clock.now += 1
        assert s.request() is False
    assert flushes == [100.0]
    assert timers.live() == [9.0], "one timer, for the end of the interval"
    assert s.pending
    clock.now = 110.0
    timers.fire()
    assert flushes == [100.0, 110.0]
    assert not s.pending


def test_a_due_request_flushes_at_once_and_cancels_the_timer(clock: Clock, timers: Timers) -> None:
    flushes: list[float] = []
    s = schedule(flushes, clock, timers)
    s.request()
    clock.now += 3
    s.request()
    clock.now += 20  # the timer is late (a busy machine); a new request comes first
    assert s.request() is True
    timers.fire()
    assert flushes == [100.0, 123.0]


def test_drain_runs_the_waiting_flush(clock: Clock, timers: Timers) -> None:
    flushes: list[float] = []
    s = schedule(flushes, clock, timers)
    s.drain()
    assert flushes == [], "nothing waiting, nothing to do"
    s.request()
    clock.now += 1
    s.request()
    s.drain()
    assert flushes == [100.0, 101.0]
    timers.fire()
    assert flushes == [100.0, 101.0]


def test_a_failed_timed_flush_is_tried_again(clock: Clock, timers: Timers) -> None:
    outcomes = [None, VectorStoreError("down"), None]
    flushes: list[float] = []

    def flush() -> None:
        if outcomes.pop(0) is not None:
            raise VectorStoreError("down")
        flushes.append(clock.now)

    s = FlushSchedule(flush, min_interval_s=1, clock=clock, start_timer=timers)
    s.request()
    clock.now += 0.5
    s.request()
    timers.fire()  # fails
    assert timers.live() == [RETRY_S]
    timers.fire()
    assert flushes == [100.0, 100.5]


def test_an_interval_of_zero_flushes_every_request(clock: Clock, timers: Timers) -> None:
    flushes: list[float] = []
    s = FlushSchedule(
        lambda: flushes.append(clock.now), min_interval_s=0, clock=clock, start_timer=timers
    )
    assert [s.request() for _ in range(3)] == [True, True, True]
    assert len(flushes) == 3
