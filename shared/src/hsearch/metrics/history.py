"""Snapshots of the search samples, so the stats API can report a recent window.

Counters and histogram buckets only grow; the figures of the last ``window_s`` seconds
are the samples now less the samples then. Every ``/metrics`` scrape and every stats
read offers a snapshot; one is kept when the newest is at least ``every_s`` old, and
the oldest are dropped once a newer one is old enough to serve as the baseline.

The snapshots are shared by every process: a JSON file in the multiprocess directory,
read and rewritten under an exclusive ``flock`` (a name that does not end in ``.db``,
so prometheus-client never reads it as samples); with no such directory (one process),
a list in memory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hsearch.metrics.summary import Samples

__all__ = ["HISTORY_FILE", "SampleHistory", "Snapshot"]

HISTORY_FILE = "search-history.json"

Snapshot = tuple[float, Samples]
"""When it was taken (seconds since the epoch) and the samples then."""


class SampleHistory:
    def __init__(
        self,
        directory: Path | None,
        *,
        window_s: float,
        every_s: float = 15.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._path = None if directory is None else directory / HISTORY_FILE
        self._window = window_s
        self._every = every_s
        self._clock = clock
        self._memory: list[Snapshot] = []
        self._lock = threading.Lock()

    def record(self, samples: Samples) -> None:
        """Keep ``samples`` as a snapshot if the newest one is ``every_s`` old."""
        now = self._clock()
        with self._snapshots() as snapshots:
            if snapshots and now - snapshots[-1][0] < self._every:
                return
            snapshots.append((now, samples))
            # Drop what is older than the newest snapshot that can serve as a baseline.
            old_enough = [i for i, (at, _) in enumerate(snapshots) if at <= now - self._window]
            if old_enough:
                del snapshots[: old_enough[-1]]

    def snapshots(self) -> list[Snapshot]:
        """The snapshots kept, oldest first: about the last ``window_s`` seconds, one
        every ``every_s`` at most (what the ``/ops`` page draws on opening)."""
        with self._snapshots() as snapshots:
            return list(snapshots)

    def baseline(self) -> Snapshot | None:
        """The snapshot to subtract: the newest at least ``window_s`` old; else the
        oldest at least ``every_s`` old (a shorter window); else None (the figures are
        then everything since the stack started)."""
        now = self._clock()
        with self._snapshots() as snapshots:
            old_enough = [s for s in snapshots if s[0] <= now - self._window]
            if old_enough:
                return old_enough[-1]
            usable = [s for s in snapshots if s[0] <= now - self._every]
            return usable[0] if usable else None

    @contextlib.contextmanager
    def _snapshots(self) -> Iterator[list[Snapshot]]:
        if self._path is None:
            with self._lock:
                yield self._memory
            return
        with self._lock, open(self._path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                snapshots = _load(self._path)
                before = list(snapshots)
                yield snapshots
                if snapshots != before:
                    _save(self._path, snapshots)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _load(path: Path) -> list[Snapshot]:
    try:
        raw: list[dict[str, Any]] = json.loads(path.read_text())
    except (OSError, ValueError):
        return []  # none yet, or cut short by a crash: start again
    return [
        (
            float(entry["at"]),
            {
                (name, tuple((k, v) for k, v in labels)): value
                for name, labels, value in entry["samples"]
            },
        )
        for entry in raw
    ]


def _save(path: Path, snapshots: list[Snapshot]) -> None:
    data = [
        {"at": at, "samples": [[name, labels, value] for (name, labels), value in samples.items()]}
        for at, samples in snapshots
    ]
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)  # readers see the old file or the new one, never half of one
