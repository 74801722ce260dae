"""What the ``/ops`` page charts, read from the aggregated samples of every process.

Counters and histogram buckets are returned as they stand (totals since the stack
started, added up over every API and worker process sharing the multiprocess
directory); the page turns two successive readings into rates and windowed percentiles,
the way Prometheus' ``rate()`` and ``histogram_quantile()`` do. So any API process may
answer any poll and the figures stay right: none of them is one process's memory, and
nothing is kept between polls on the server. A counter that went down (the stack was
restarted) is read by the page as a reset, as Prometheus does.

On opening, the page has no earlier reading of its own to make a rate with: it is also
given the snapshots of the search samples the stats window keeps
(:mod:`hsearch.metrics.history`) as :class:`PastReading` values, so the search panels
(searches, latency, cache, degraded) show the last minutes at once.

Gauges read at scrape time (jobs by status, queue depth, dependency health) come from
:class:`~hsearch.metrics.exposition.ScrapeFigures`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.metrics_core import Metric

from hsearch.metrics.exposition import ScrapeFigures
from hsearch.metrics.history import Snapshot
from hsearch.metrics.summary import Samples

__all__ = [
    "DashboardFigures",
    "LegHistogram",
    "PastLeg",
    "PastReading",
    "dashboard_figures",
    "past_readings",
]


@dataclass(frozen=True, slots=True)
class LegHistogram:
    """One leg's latency histogram, summed over tenants: ``(upper bound in seconds,
    cumulative count)`` pairs, ``+Inf`` written as ``None`` (JSON has no infinity)."""

    buckets: tuple[tuple[float | None, float], ...]
    count: float
    sum_s: float


@dataclass(frozen=True, slots=True)
class PastLeg:
    """A leg's latency buckets in a snapshot (the history keeps no count nor sum)."""

    buckets: tuple[tuple[float | None, float], ...]


@dataclass(frozen=True, slots=True)
class PastReading:
    """The search figures of a snapshot taken at ``at``: the counters and buckets the
    history keeps (no gauges, no ingest or answer counters), in the shape of
    :class:`DashboardFigures`' fields of the same names."""

    at: float
    searches: Mapping[str, float]
    legs: Mapping[str, PastLeg]
    """Per leg, ``(upper bound in seconds, cumulative count)``; ``+Inf`` as ``None``."""
    leg_outcomes: Mapping[str, Mapping[str, float]]
    cache: Mapping[str, Mapping[str, float]]


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
    history: tuple[PastReading, ...] = ()
    """Snapshots of the search samples taken before ``at``, oldest first."""


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
    families: Sequence[Metric],
    scrape: ScrapeFigures,
    *,
    at: float,
    history: tuple[PastReading, ...] = (),
) -> DashboardFigures:
    """The page's figures from ``families`` (:func:`~hsearch.metrics.exposition.
    aggregated_families`), what a scrape read at ``at`` and the earlier ``history``
    (:func:`past_readings`)."""
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
        history=history,
    )


def past_readings(snapshots: Sequence[Snapshot], *, before: float) -> tuple[PastReading, ...]:
    """The snapshots (:meth:`~hsearch.metrics.history.SampleHistory.snapshots`) taken
    before ``before``, as the page reads them, oldest first."""
    return tuple(_past(at, samples) for at, samples in sorted(snapshots) if at < before)


def _past(at: float, samples: Samples) -> PastReading:
    searches: dict[str, float] = defaultdict(float)
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    leg_outcomes: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    cache: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (name, pairs), value in samples.items():
        labels = dict(pairs)
        if name == "hsearch_search_requests_total":
            searches[labels["outcome"]] += value
        elif name == "hsearch_search_leg_duration_seconds_bucket":
            buckets[labels["leg"]][float(labels["le"])] += value
        elif name == "hsearch_search_leg_outcomes_total":
            leg_outcomes[labels["leg"]][labels["status"]] += value
        elif name == "hsearch_cache_requests_total":
            cache[labels["cache"]][labels["result"]] += value
    return PastReading(
        at=at,
        searches=dict(sorted(searches.items())),
        legs={
            leg: PastLeg(
                buckets=tuple(
                    (None if bound == float("inf") else bound, cumulative)
                    for bound, cumulative in sorted(by_bound.items())
                )
            )
            for leg, by_bound in sorted(buckets.items())
        },
        leg_outcomes={leg: dict(sorted(o.items())) for leg, o in sorted(leg_outcomes.items())},
        cache={c: dict(sorted(r.items())) for c, r in sorted(cache.items())},
    )
