"""The values of a lazy search: candidates, judgements, claims, its progress and report."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hsearch.compositions.lazy.budget import BudgetLine

__all__ = [
    "Candidate",
    "Claim",
    "Gathered",
    "Judgement",
    "LazyProgress",
    "LazyReport",
    "Origin",
    "Stage",
]


class Origin(StrEnum):
    """How a candidate was reached."""

    RETRIEVAL = "retrieval"
    """Level 0: the hybrid search of the question."""
    CONCEPTS = "concepts"
    """Level 1: chunks holding the question's concepts, or a relevant chunk's."""
    COMMUNITIES = "communities"
    """Level 1: chunks of a community matching the question's or a relevant chunk's
    concepts."""
    LINKS = "links"
    """A document a relevant chunk's document links to, or is linked from."""
    MEMORY = "memory"
    """A relevant chunk of the turn a follow-up question follows."""


class Stage(StrEnum):
    STARTING = "starting"
    TESTING = "testing"
    DEEPENING = "deepening"
    SUFFICIENT = "sufficient"
    BUDGET_SPENT = "budget_spent"
    EXHAUSTED = "exhausted"
    """No candidate left to test."""


@dataclass(slots=True)
class Candidate:
    """A chunk the search may test; ``text`` is read when it is about to be tested."""

    chunk_id: str
    origin: Origin
    prior: float
    """What it is expected to be worth before it is tested (the queue's order)."""
    depth: int = 0
    """Steps from Level 0: 0 for what the question found, +1 per deepening."""
    parent: str | None = None
    """The relevant chunk it was reached from."""
    via: str = ""
    """The concept, community id or link type it was reached by."""
    rank: int | None = None
    """Its rank in the question's retrieval (Level 0)."""
    document_id: str = ""
    external_id: str = ""
    title: str = ""
    text: str | None = None
    char_start: int | None = None
    char_end: int | None = None
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Judgement:
    chunk_id: str
    relevant: bool
    score: float
    """0..1; the cheap tester's combination, or the model's grade."""
    by: str
    """``cheap`` or ``model``."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A statement taken from a relevant chunk: a verbatim span of its text."""

    text: str
    chunk_id: str
    start: int
    """Where it lies in the chunk's text: ``chunk.text[start:end] == text``."""
    end: int
    score: float
    """How much it bears on the question (the order claims are given in)."""


@dataclass(frozen=True, slots=True)
class LazyProgress:
    """A progress event of the stream."""

    stage: Stage
    tested: int
    relevant: int
    claims: int


@dataclass(frozen=True, slots=True)
class LazyReport:
    """What the lazy search did: its budget, how far it went, what it found."""

    budget: dict[str, BudgetLine]
    stopped: Stage
    levels: dict[str, int]
    """Chunks tested, by how they were first reached (:class:`Origin`)."""
    depth: int
    """The deepest step taken from Level 0."""
    tested: int
    relevant: int
    claims: tuple[Claim, ...]
    tester: str
    degraded: tuple[str, ...] = ()
    """What it went without (``level1_unavailable: ...``, ``links_unavailable: ...``)."""
    session: str | None = None
    """What a follow-up question names to reuse this turn (``follow_up``); ``None`` when
    it could not be kept."""
    followed: bool = False
    """It reused the turn its request named."""


@dataclass(frozen=True, slots=True)
class Gathered:
    """The end of the gathering: the report and the relevant chunks (best first), each
    with its claims."""

    report: LazyReport
    chunks: tuple[tuple[Candidate, Judgement, tuple[Claim, ...]], ...]
    visited: tuple[tuple[str, str | None], ...] = ()
    """Every chunk it tested, with the relevant chunk that led to it."""
