"""Snapshots for the stats API's recent window: kept at most every ``every_s``, the
baseline is the newest at least ``window_s`` old, older ones are dropped; shared
through a file by several processes, or in memory."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from hsearch.metrics.history import HISTORY_FILE, SampleHistory
from hsearch.metrics.summary import Samples

KEY = (
    "hsearch_search_requests_total",
    (("mode", "hybrid"), ("outcome", "ok"), ("tenant", "other")),
)


def samples(n: float) -> Samples:
    return {KEY: n}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("shared", [False, True])
def test_the_baseline_is_the_newest_snapshot_old_enough(tmp_path: Path, shared: bool) -> None:
    clock = Clock()
    history = SampleHistory(tmp_path if shared else None, window_s=60, every_s=10, clock=clock)
    assert history.baseline() is None  # nothing yet: since the stack started
    for n in range(12):  # one offer every 5 s: a snapshot every 10 s
        history.record(samples(n))
        clock.now += 5
    # now = 1060; snapshots at 1000, 1010, ..., 1050 (n = 0, 2, 4, ...)
    assert history.baseline() == (1000.0, samples(0))
    clock.now = 1075.0
    history.record(samples(99))
    assert history.baseline() == (1010.0, samples(2))
    if shared:
        assert (tmp_path / HISTORY_FILE).exists()
        again = SampleHistory(tmp_path, window_s=60, every_s=10, clock=clock)
        assert again.baseline() == (1010.0, samples(2))  # another process sees the same


def test_until_the_window_has_passed_the_oldest_usable_snapshot_serves() -> None:
    clock = Clock()
    history = SampleHistory(None, window_s=300, every_s=10, clock=clock)
    history.record(samples(1))
    clock.now += 5
    assert history.baseline() is None  # younger than every_s: not a window yet
    clock.now += 20
    assert history.baseline() == (1000.0, samples(1))


def test_older_snapshots_are_dropped(tmp_path: Path) -> None:
    clock = Clock()
    history = SampleHistory(tmp_path, window_s=30, every_s=10, clock=clock)
    for n in range(20):
        history.record(samples(n))
        clock.now += 10
    text = (tmp_path / HISTORY_FILE).read_text()
    assert text.count('"at"') <= 5


def _offer(directory: str, n: int) -> None:
    SampleHistory(Path(directory), window_s=60, every_s=0).record(samples(n))


@pytest.mark.process
def test_processes_writing_together_leave_a_readable_file(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_offer, args=(str(tmp_path), n)) for n in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    history = SampleHistory(tmp_path, window_s=3600, every_s=0)
    baseline = history.baseline()
    assert baseline is not None
    assert baseline[1][KEY] in range(6)
