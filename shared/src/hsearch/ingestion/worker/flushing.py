"""When the indexer flushes: at most once per interval, and soon after every job.

A chunk is searchable as soon as the store has it, but until a flush seals it Milvus
searches it by brute force in a growing segment: with 5,000 fresh passages the keyword
leg took 1.7 s at p50 instead of 0.22 s after a flush (docs/benchmarks.md, Flush). A
flush has a cost of its own (a segment written, its index built, compactions later)
whatever it seals, so jobs finishing close together share one: the end of a job
flushes at once when the last flush began at least ``min_interval_s`` ago; otherwise a
timer flushes once the interval has passed, for every job that finished meanwhile.

The indexer reports a job finished only after a flush that began once the job's
chunks were written (:mod:`hsearch.ingestion.worker.indexer`), so a finished job is fast to
search.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)

# A timed flush that failed is tried again after the interval, and never sooner than this.
RETRY_S = 5.0


class Timer(Protocol):
    def cancel(self) -> None: ...


TimerFactory = Callable[[float, Callable[[], None]], Timer]


def start_thread_timer(delay: float, action: Callable[[], None]) -> Timer:
    """``action`` on a daemon thread after ``delay`` seconds."""
    timer = threading.Timer(delay, action)
    timer.daemon = True
    timer.start()
    return timer


class FlushSchedule:
    """Runs ``flush`` at most once per ``min_interval_s`` and at least once after every
    :meth:`request`.

    ``flush`` runs on the caller's thread when it is due and on a timer thread when it
    is not; never twice at once. A failed timed flush is retried after another
    interval (the requests it was to serve are still waiting).
    """

    def __init__(
        self,
        flush: Callable[[], None],
        *,
        min_interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        start_timer: TimerFactory = start_thread_timer,
    ) -> None:
        self._flush = flush
        self._interval = min_interval_s
        self._clock = clock
        self._start_timer = start_timer
        self._state = threading.Lock()  # guards _last and _timer
        self._running = threading.Lock()  # one flush at a time
        self._last: float | None = None
        self._timer: Timer | None = None

    def request(self) -> bool:
        """Ask for a flush of everything written so far.

        Returns ``True`` when it ran now (the last one began ``min_interval_s`` ago or
        more), ``False`` when a timer runs it once the interval has passed. An error of
        a flush run now propagates; nothing stays scheduled for it.
        """
        with self._state:
            now = self._clock()
            if self._last is not None and now - self._last < self._interval:
                if self._timer is None:
                    self._timer = self._start_timer(self._last + self._interval - now, self._timed)
                return False
            self._cancel_timer()
            self._last = now
        self._run()
        return True

    @property
    def pending(self) -> bool:
        """Whether a timed flush is waiting."""
        with self._state:
            return self._timer is not None

    def drain(self) -> None:
        """Run a waiting timed flush now (at shutdown, so no request is left behind)."""
        with self._state:
            if self._timer is None:
                return
            self._cancel_timer()
            self._last = self._clock()
        self._run()

    def _timed(self) -> None:
        with self._state:
            if self._timer is None:  # cancelled: drained or run by a request meanwhile
                return
            self._timer = None
            self._last = self._clock()
        try:
            self._run()
        except Exception as exc:
            retry = max(self._interval, RETRY_S)
            logger.warning("ingest.flush.failed error=%s; retrying in %.0fs", exc, retry)
            with self._state:
                if self._timer is None:
                    self._timer = self._start_timer(retry, self._timed)

    def _run(self) -> None:
        with self._running:
            self._flush()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
