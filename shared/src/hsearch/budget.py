"""What a request may spend: a value passed down the call chain, never held globally.

A :class:`Budget` is made once, where a request starts (the search service, an answer),
and handed to every stage that spends from it; each stage checks it before it starts a
call and reports what it used. Today it bounds wall time (a deadline on
:func:`time.perf_counter`); the compositions built on retrieval (answers, lazy search)
add counted limits (model calls, tokens) to the same value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = ["Budget"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A deadline on :func:`time.perf_counter`'s clock."""

    deadline: float

    @classmethod
    def of(cls, seconds: float, *, started: float | None = None) -> Budget:
        """``seconds`` from ``started`` (default: now)."""
        start = time.perf_counter() if started is None else started
        return cls(start + seconds)

    def remaining_s(self, *, now: float | None = None) -> float:
        """Seconds left (negative once spent)."""
        return self.deadline - (time.perf_counter() if now is None else now)

    def spent(self, *, now: float | None = None) -> bool:
        """Whether nothing is left to start another call with."""
        return self.remaining_s(now=now) <= 0
