"""Where the time of one search went, stage by stage, on one clock.

The stages of the query path run one after another. :class:`StageClock` charges the
time since its previous mark to the stage that just ended, so the stages tile the
request from its first instruction to its last: their sum *is* the request's time
(``took_ms``), and no gap is left unattributed (the little work between two stages,
such as building the leg requests, is charged to the stage that follows it). A stage
that runs twice, such as encoding and retrieval again for a fallback leg, is charged
both times.

The legs inside ``retrieval`` run in parallel; each leg's own time is reported with
the leg (:class:`~hsearch.search.models.LegReport`), and those overlap, so they do not
add up to anything.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, fields
from enum import StrEnum

__all__ = ["Stage", "StageClock", "StageTimings"]


class Stage(StrEnum):
    """The stages of the query path, in the order they run."""

    PLAN = "plan"
    """Validation of the request into a plan (filter parsed, weights and legs chosen)."""
    CACHE = "cache"
    """The result cache: the tenant's data generation read, the lookup, and the wait
    for an identical search another request is computing (0 with no cache)."""
    ENCODE = "encode"
    """The query encoder, for the sides the legs about to run read."""
    STATISTICS = "statistics"
    """The tenant's BM25 statistics applied to the query's term counts."""
    RETRIEVAL = "retrieval"
    """The legs, in parallel: the wall time until the last one answered or timed out."""
    FUSION = "fusion"
    """Weights, fusion, the ``min_score`` threshold and grouping by document."""
    FACETS = "facets"
    """Facet counts over the fused candidates."""
    RERANK = "rerank"
    """The cross-encoder over the best fused hits (0 when not asked for)."""
    HYDRATE = "hydrate"
    """The page cut and mapped to hits: stored fields, explanations, snippets."""


@dataclass(frozen=True, slots=True)
class StageTimings:
    """Milliseconds per :class:`Stage`; :attr:`total_ms` is their sum."""

    plan_ms: float = 0.0
    cache_ms: float = 0.0
    encode_ms: float = 0.0
    statistics_ms: float = 0.0
    retrieval_ms: float = 0.0
    fusion_ms: float = 0.0
    facets_ms: float = 0.0
    rerank_ms: float = 0.0
    hydrate_ms: float = 0.0

    @property
    def total_ms(self) -> float:
        return math.fsum(getattr(self, f.name) for f in fields(self))


class StageClock:
    """Marks the end of each stage of one search on :func:`time.perf_counter`.

    ``started`` is when the request began; deadlines are measured from it on the same
    clock, so the budget a plan carries covers every stage up to the legs.
    """

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self._mark = self.started
        self._spent = dict.fromkeys(Stage, 0.0)

    def lap(self, stage: Stage) -> None:
        """Charge the time since the previous mark to ``stage``."""
        now = time.perf_counter()
        self._spent[stage] += now - self._mark
        self._mark = now

    def timings(self) -> StageTimings:
        """The time charged to each stage so far."""
        return StageTimings(**{f"{stage.value}_ms": s * 1000 for stage, s in self._spent.items()})
