"""One budget for a lazy search: counts that are never exceeded, and a deadline.

A lazy search spends four things: relevance tests (each candidate judged once, by code
or by a model), model calls, the tokens those calls read and write, and wall time.
:class:`LazyLimits` says how much of each a request may use (within the server's
maxima, :class:`~hsearch.config.LazySettings`); :class:`LazySpend` is handed to every
step and is asked *before* anything is started: a step that cannot be paid for in full
is not started, so no count is passed. A model call is paid for before it is made with
the most it can cost (its prompt, estimated high, plus the tokens it may write); once it
ends the reservation is settled at what the endpoint counted. The token count holds as
long as the endpoint counts no more than the estimate (which errs high: a token per
three characters of ASCII, two per other character); an endpoint that counts more is
charged what it counted, the report shows it, and no further call is made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hsearch.budget import Budget
from hsearch.llm.protocol import Usage

__all__ = ["BudgetAsk", "BudgetLine", "LazyLimits", "LazySpend", "usage_tokens"]


def usage_tokens(usage: Usage | None) -> int | None:
    """The tokens a call read and wrote, as the endpoint counted them (``None``: it did
    not say)."""
    if usage is None or (usage.prompt_tokens is None and usage.completion_tokens is None):
        return None
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)


@dataclass(frozen=True, slots=True)
class LazyLimits:
    """What one lazy search may spend."""

    relevance_tests: int = 100
    llm_calls: int = 4
    tokens: int = 6000
    seconds: float = 25.0


@dataclass(frozen=True, slots=True)
class BudgetAsk:
    """What a request asked of the budget: each field it left out (``None``) takes the
    server's default."""

    relevance_tests: int | None = None
    llm_calls: int | None = None
    tokens: int | None = None
    seconds: float | None = None


@dataclass(frozen=True, slots=True)
class BudgetLine:
    used: float
    allowed: float


@dataclass
class LazySpend:
    """What a lazy search has spent of its :class:`LazyLimits` (module docstring)."""

    limits: LazyLimits
    started: float = field(default_factory=time.perf_counter)
    gather_share: float = 1.0
    """The share of the wall time the gathering may take (the rest is the answer's)."""
    tests: int = 0
    calls: int = 0
    tokens: int = 0
    _reserved: int = 0

    @property
    def deadline(self) -> Budget:
        """When the gathering must end."""
        return Budget.of(self.limits.seconds * self.gather_share, started=self.started)

    @property
    def end(self) -> Budget:
        """When everything must end (the answer too)."""
        return Budget.of(self.limits.seconds, started=self.started)

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.started

    def out_of_time(self) -> bool:
        return self.deadline.spent()

    def tests_left(self) -> int:
        return max(0, self.limits.relevance_tests - self.tests)

    def take_tests(self, wanted: int) -> int:
        """Up to ``wanted`` tests, as many as are left (0: none, or out of time)."""
        if self.out_of_time():
            return 0
        granted = min(wanted, self.tests_left())
        self.tests += granted
        return granted

    def can_call(self, tokens: int) -> bool:
        """Whether a model call costing at most ``tokens`` fits (one call left, its
        tokens left, time left)."""
        return (
            not self.out_of_time()
            and self.calls < self.limits.llm_calls
            and self.tokens + self._reserved + tokens <= self.limits.tokens
        )

    def reserve_call(self, tokens: int) -> bool:
        """Pay for a call of at most ``tokens`` before making it; ``False`` (nothing
        taken) when it does not fit."""
        if not self.can_call(tokens):
            return False
        self.calls += 1
        self._reserved += tokens
        return True

    def settle_call(self, reserved: int, used: int | None) -> None:
        """A call reserved at ``reserved`` ended having used ``used`` tokens (``None``:
        the endpoint did not say: the reservation is charged). What the endpoint
        counted is charged, also above the reservation (an estimate that erred low):
        the report then says so, and no call is made past it."""
        self._reserved -= reserved
        self.tokens += reserved if used is None else max(used, 0)

    def release_call(self, reserved: int) -> None:
        """A call reserved at ``reserved`` that was never made: nothing is charged."""
        self._reserved -= reserved
        self.calls -= 1

    def tokens_left(self) -> int:
        return max(0, self.limits.tokens - self.tokens - self._reserved)

    def lines(self) -> dict[str, BudgetLine]:
        return {
            "relevance_tests": BudgetLine(self.tests, self.limits.relevance_tests),
            "llm_calls": BudgetLine(self.calls, self.limits.llm_calls),
            "tokens": BudgetLine(self.tokens, self.limits.tokens),
            "elapsed_ms": BudgetLine(
                round(self.elapsed_s() * 1000, 3), round(self.limits.seconds * 1000, 3)
            ),
        }
