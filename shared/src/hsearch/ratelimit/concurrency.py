"""The per-process cap on concurrent searches: answer 503 at once instead of queueing."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hsearch.errors import OverloadedError

__all__ = ["ConcurrencyGate"]


class ConcurrencyGate:
    """At most ``limit`` holders at once; one more is refused with :class:`OverloadedError`
    (503 ``overloaded``, ``Retry-After: retry_after``) rather than made to wait: a queue
    without end only turns overload into timeouts for everyone, while a fast refusal lets
    a client or a load balancer try another process.

    Entered and left on the event loop's thread only (no lock needed)."""

    def __init__(self, limit: int, *, setting: str, retry_after: int = 1) -> None:
        if limit < 1:
            msg = f"{setting}: must be at least 1, got {limit}"
            raise ValueError(msg)
        self.limit = limit
        self.setting = setting
        self.retry_after = retry_after
        self.active = 0
        self.refused = 0
        """Requests refused since the start (for metrics)."""

    @contextmanager
    def slot(self) -> Iterator[None]:
        if self.active >= self.limit:
            self.refused += 1
            msg = (
                f"the server is running its maximum of {self.limit} concurrent searches "
                f"({self.setting}); retry after {self.retry_after} s"
            )
            raise OverloadedError(msg, retry_after=self.retry_after)
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1
