"""Progress figures and the plain lines written when stdout is not a terminal."""

from __future__ import annotations

import io

import pytest

from hsearch.client.progress import PlainProgress, RateMeter, RichProgress, duration


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_rate_is_measured_over_the_recent_window() -> None:
    meter = RateMeter(window_s=30)
    meter.add(0, 0)
    assert meter.rate is None
    meter.add(10, 100)
    assert meter.rate == 10.0
    assert meter.eta(500) == 50.0
    meter.add(40, 400)  # the first sample is out of the window now
    meter.add(50, 400)
    assert meter.rate == pytest.approx(300 / 40)  # from t=10 on: still within 30 s of 40
    meter.add(100, 400)
    assert meter.rate == 0.0  # stalled for the whole window
    assert meter.eta(10) is None
    assert meter.eta(0) == 0.0


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "?"), (4.4, "4 s"), (59.6, "1 min 0 s"), (185, "3 min 5 s"), (7620, "2 h 7 min")],
)
def test_durations_read_as_people_say_them(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def test_plain_lines_come_every_few_seconds_and_at_the_end() -> None:
    out = io.StringIO()
    clock = Clock()
    progress = PlainProgress(out, every_s=5, clock=clock)
    progress.sent(documents=500, jobs=1)
    clock.now = 1
    progress.sent(documents=1000, jobs=2)  # within 5 s: held back...
    clock.now = 2
    progress.indexing(done=0, total=1000, failed=0)  # ...and written before this line
    clock.now = 4
    progress.indexing(done=100, total=1000, failed=0)  # within 5 s of the last line
    clock.now = 12
    progress.indexing(done=500, total=1000, failed=2)
    clock.now = 13
    progress.indexing(done=1000, total=1000, failed=3)  # the end is always written
    progress.close()
    assert out.getvalue().splitlines() == [
        "sent: 500 documents in 1 jobs",
        "sent: 1000 documents in 2 jobs",
        "indexing: 0/1000 documents (0%), ? documents/s, ETA ?, 0 failed",
        "indexing: 500/1000 documents (50%), 50.0 documents/s, ETA 10 s, 2 failed",
        "indexing: 1000/1000 documents (100%), 90.9 documents/s, 3 failed",
    ]
    assert "\x1b" not in out.getvalue()


def test_a_terminal_gets_a_bar() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    progress = RichProgress(out)
    progress.sent(documents=10, jobs=1)
    progress.indexing(done=4, total=10, failed=1)
    progress.close()
    screen = out.getvalue()
    assert "\x1b[" in screen  # drawn with terminal control sequences, not lines
    assert "indexing" in screen
    assert "4/10" in screen
    assert "1 failed" in screen
