"""A clock for the client's retry and polling tests."""

from __future__ import annotations


class Clock:
    """Time that passes only when the client pauses."""

    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds
