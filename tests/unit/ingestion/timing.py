"""A clock and timers that move only when a test says so (for the flush schedule)."""

from __future__ import annotations

from collections.abc import Callable


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Timers:
    """Timers that fire only when a test says so."""

    def __init__(self) -> None:
        self.waiting: list[tuple[float, Callable[[], None], Timers.Timer]] = []

    class Timer:
        def __init__(self) -> None:
            self.cancelled = False

        def cancel(self) -> None:
            self.cancelled = True

    def __call__(self, delay: float, action: Callable[[], None]) -> Timers.Timer:
        timer = Timers.Timer()
        self.waiting.append((delay, action, timer))
        return timer

    def live(self) -> list[float]:
        return [delay for delay, _, timer in self.waiting if not timer.cancelled]

    def fire(self) -> None:
        """Run the live timers (a cancelled threading.Timer never runs its action)."""
        due, self.waiting = self.waiting, []
        for _, action, timer in due:
            if not timer.cancelled:
                action()
