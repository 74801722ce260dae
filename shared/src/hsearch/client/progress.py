"""Progress of an upload: a bar on a terminal (rich), plain lines anywhere else.

Both show the same numbers: documents done of the total, documents per second over the
last half minute, the time left at that pace, and failures. Plain lines come at most
every few seconds (and once at the end), so a log of a long upload stays short.
"""

from __future__ import annotations

import math
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TextIO

if TYPE_CHECKING:
    from rich.progress import TaskID

__all__ = ["PlainProgress", "Progress", "RateMeter", "RichProgress", "create_progress", "duration"]


class RateMeter:
    """Documents per second over the last ``window_s`` seconds, and the time the rest
    takes at that pace."""

    def __init__(self, window_s: float = 30.0) -> None:
        self._window = window_s
        self._samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> None:
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
            self._samples.popleft()

    @property
    def rate(self) -> float | None:
        """``None`` until two samples a moment apart exist."""
        if len(self._samples) < 2:
            return None
        (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else None

    def eta(self, remaining: int) -> float | None:
        rate = self.rate
        if remaining <= 0:
            return 0.0
        return remaining / rate if rate else None


def duration(seconds: float | None) -> str:
    """``42 s``, ``3 min 5 s``, ``2 h 7 min``; ``?`` when unknown."""
    if seconds is None or math.isinf(seconds):
        return "?"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


class Progress(Protocol):
    def sent(self, *, documents: int, jobs: int) -> None:
        """So many documents are accepted so far, in so many jobs."""
        ...

    def indexing(self, *, done: int, total: int, failed: int) -> None:
        """Of the waited-on jobs' ``total`` documents, ``done`` are finished (indexed,
        unchanged or failed), ``failed`` of them failed."""
        ...

    def note(self, text: str) -> None: ...

    def close(self) -> None: ...


def _figures(meter: RateMeter, *, done: int, total: int, failed: int) -> str:
    rate = meter.rate
    parts = [f"{rate:.1f} documents/s" if rate is not None else "? documents/s"]
    if done < total:
        parts.append(f"ETA {duration(meter.eta(total - done))}")
    parts.append(f"{failed} failed")
    return ", ".join(parts)


class PlainProgress:
    """One line per report at most every ``every_s`` seconds, and the last one."""

    def __init__(
        self,
        stream: TextIO,
        *,
        every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._out = stream
        self._every = every_s
        self._clock = clock
        self._meter = RateMeter()
        self._last_sent = -math.inf
        self._last_indexing = -math.inf
        self._pending_sent: str | None = None
        self._last_done: tuple[int, int, int] | None = None

    def sent(self, *, documents: int, jobs: int) -> None:
        line = f"sent: {documents} documents in {jobs} jobs"
        now = self._clock()
        if now - self._last_sent >= self._every:
            self._write(line)
            self._last_sent = now
            self._pending_sent = None
        else:
            self._pending_sent = line  # written before the next other line

    def indexing(self, *, done: int, total: int, failed: int) -> None:
        now = self._clock()
        self._meter.add(now, done)
        finished = done >= total
        if (done, total, failed) == self._last_done and not finished:
            return  # nothing new since the line before
        if finished or now - self._last_indexing >= self._every:
            share = f" ({100 * done // total}%)" if total else ""
            figures = _figures(self._meter, done=done, total=total, failed=failed)
            self._write(f"indexing: {done}/{total} documents{share}, {figures}")
            self._last_indexing = now
            self._last_done = (done, total, failed)

    def note(self, text: str) -> None:
        self._write(text)

    def close(self) -> None:
        self._flush_sent()

    def _flush_sent(self) -> None:
        if self._pending_sent is not None:
            line, self._pending_sent = self._pending_sent, None
            self._out.write(line + "\n")

    def _write(self, line: str) -> None:
        if not line.startswith("sent: "):
            self._flush_sent()
        self._out.write(line + "\n")
        self._out.flush()


class RichProgress:
    """Two live bars on a terminal: documents sent, then documents indexed."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console  # noqa: PLC0415 - keep `--help` fast
        from rich.progress import (  # noqa: PLC0415
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
        )
        from rich.progress import Progress as Bars  # noqa: PLC0415

        self._bars = Bars(
            TextColumn("{task.description:<9}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[figures]}"),
            console=Console(file=stream),
        )
        self._meter = RateMeter()
        self._sending: TaskID | None = None
        self._sent = 0
        self._indexing: TaskID | None = None
        self._bars.start()

    def sent(self, *, documents: int, jobs: int) -> None:
        if self._sending is None:
            self._sending = self._bars.add_task("sending", total=None, figures="")
        self._sent = documents
        self._bars.update(self._sending, completed=documents, figures=f"{jobs} jobs")

    def indexing(self, *, done: int, total: int, failed: int) -> None:
        if self._sending is not None:
            self._bars.update(self._sending, total=self._sent)  # sending is over
        self._meter.add(time.monotonic(), done)
        figures = _figures(self._meter, done=done, total=total, failed=failed)
        if self._indexing is None:
            self._indexing = self._bars.add_task("indexing", total=total, figures=figures)
        self._bars.update(self._indexing, completed=done, total=total, figures=figures)

    def note(self, text: str) -> None:
        self._bars.console.print(text, markup=False, highlight=False)

    def close(self) -> None:
        self._bars.stop()


def create_progress(stream: TextIO | None = None) -> Progress:
    """A bar when ``stream`` (default: stdout) is a terminal, else plain lines."""
    out = stream or sys.stdout
    if out.isatty():
        return RichProgress(out)
    return PlainProgress(out)
