"""What the ``/ops`` page charts, read from the aggregated samples of every process.

Counters and histogram buckets are returned as they stand (totals since the stack
started, added up over every API and worker process sharing the multiprocess
directory); the page turns two successive readings into rates and windowed percentiles,
the way Prometheus' ``rate()`` and ``histogram_quantile()`` do. So any API process may
answer any poll and the figures stay right: none of them is one process's memory, and
nothing is kept between polls on the server. A counter that went down (the stack was
restarted) is read by the page as a reset, as Prometheus does.

Gauges read at scrape time (jobs by status, queue depth, dependency health) come from
:class:`~hsearch.metrics.exposition.ScrapeFigures`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from hsearch.metrics.exposition import ScrapeFigures

__all__ = ["DashboardFigures", "LegHistogram", "dashboard_figures"]


@dataclass(frozen=True, slots=True)
class LegHistogram:
    """One leg's latency histogram, summed over tenants: ``(upper bound in seconds,
    cumulative count)`` pairs, ``+Inf`` written as ``None`` (JSON has no infinity)."""

    buckets: tuple[tuple[float | None, float], ...]
    count: float
    sum_s: float


@dataclass(frozen=True, slots=True)
class DashboardFigures:
    at: float
    """When the figures were read (Unix seconds): what the page's rates divide by."""
    searches: Mapping[str, float]
    """Searches by outcome (ok, degraded, error), every mode and tenant."""
    legs: Mapping[str, LegHistogram]
    leg_outcomes: Mapping[str, Mapping[str, float]]
    cache: Mapping[str, Mapping[str, float]]
    """Per cache (result, embedding): lookups by result (hit, miss, error)."""
    ingest_documents: Mapping[str, float]
    """Documents by outcome (indexed, skipped, failed, deleted)."""
    ingest_chunks: float
    jobs: Mapping[str, int] | None
    """Jobs by status now (None: the metadata database did not answer in time)."""
    queue_depth: Mapping[str, int] | None
    dependencies: Mapping[str, bool] = field(default_factory=dict)
    answers: Mapping[str, float] = field(default_factory=dict)
    """Answers by outcome (answered, degraded), every model and tenant."""
    answer_sentences: Mapping[str, float] = field(default_factory=dict)
    """Answer sentences by support (supported, unsupported), every model."""


def _samples(families: Iterable[Metric], name: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (s.name, dict(s.labels), s.value) for f in families if f.name == name for s in f.samples
    ]


def _by(
    samples: Iterable[tuple[str, dict[str, str], float]], *, suffix: str, label: str
) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for name, labels, value in samples:
        if name.endswith(suffix):
            out[labels[label]] += value
    return dict(sorted(out.items()))


def _legs(families: Sequence[Metric]) -> dict[str, LegHistogram]:
    family = "hsearch_search_leg_duration_seconds"
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, float] = defaultdict(float)
    sums: dict[str, float] = defaultdict(float)
    for name, labels, value in _samples(families, family):
        leg = labels["leg"]
        if name == f"{family}_bucket":
            buckets[leg][float(labels["le"])] += value
        elif name == f"{family}_count":
            counts[leg] += value
        elif name == f"{family}_sum":
            sums[leg] += value
    return {
        leg: LegHistogram(
            buckets=tuple(
                (None if bound == float("inf") else bound, cumulative)
                for bound, cumulative in sorted(by_bound.items())
            ),
            count=counts[leg],
            sum_s=sums[leg],
        )
        for leg, by_bound in sorted(buckets.items())
    }


def dashboard_figures(
    families: Sequence[Metric], scrape: ScrapeFigures, *, at: float
) -> DashboardFigures:
    """The page's figures from ``families`` (:func:`~hsearch.metrics.exposition.
    aggregated_families`) and what a scrape read at ``at``."""
    leg_outcomes: dict[str, dict[str, float]] = defaultdict(dict)
    for name, labels, value in _samples(families, "hsearch_search_leg_outcomes"):
        if name.endswith("_total"):
            leg_outcomes[labels["leg"]][labels["status"]] = value
    cache: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in _samples(families, "hsearch_cache_requests"):
        if name.endswith("_total"):
            cache[labels["cache"]][labels["result"]] += value
    chunks = sum(
        v for n, _, v in _samples(families, "hsearch_ingest_chunks") if n.endswith("_total")
    )
    return DashboardFigures(
        at=at,
        searches=_by(
            _samples(families, "hsearch_search_requests"), suffix="_total", label="outcome"
        ),
        legs=_legs(families),
        leg_outcomes=dict(sorted(leg_outcomes.items())),
        cache={c: dict(sorted(r.items())) for c, r in sorted(cache.items())},
        ingest_documents=_by(
            _samples(families, "hsearch_ingest_documents"), suffix="_total", label="outcome"
        ),
        ingest_chunks=chunks,
        jobs=None if scrape.jobs is None else dict(scrape.jobs),
        queue_depth=None if scrape.queue_depth is None else dict(scrape.queue_depth),
        dependencies=dict(scrape.dependencies),
        answers=_by(
            _samples(families, "hsearch_answer_requests"), suffix="_total", label="outcome"
        ),
        answer_sentences=_by(
            _samples(families, "hsearch_answer_sentences"), suffix="_total", label="support"
        ),
    )
