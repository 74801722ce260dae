"""Figures the stats API reports, read from the aggregated samples of every process.

Percentiles come from histogram buckets, the way Prometheus' ``histogram_quantile``
computes them: the bucket that holds the rank is found and the value is interpolated
linearly inside it, so a percentile is exact only to its bucket's bounds
(:data:`~hsearch.metrics.instruments.LATENCY_BUCKETS`). The figures cover a recent
window: the current samples less a snapshot taken about that long ago
(:mod:`hsearch.metrics.history`, :func:`since`).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric

__all__ = ["Latency", "SearchFigures", "histogram_quantile", "search_figures"]

QUANTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True, slots=True)
class Latency:
    """How many observations a histogram holds and its percentiles, in milliseconds
    (None with no observation)."""

    count: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class SearchFigures:
    """Searches of the label ``tenant`` (``None``: every tenant) as recorded so far."""

    tenant: str | None
    searches: int
    outcomes: Mapping[str, int]
    degraded_share: float | None
    """Degraded searches over searches (None before the first)."""
    legs: Mapping[str, Latency]
    leg_outcomes: Mapping[str, Mapping[str, int]]
    """Per leg, how its runs ended (every tenant: this counter carries no tenant)."""
    cache_hit_ratio: Mapping[str, float | None]
    """Per cache (``result``, ``embedding``), hits over lookups (every tenant)."""


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of a histogram given as ``(upper bound, cumulative count)``
    pairs (``+Inf`` last), interpolated linearly inside its bucket as Prometheus does;
    a rank in the ``+Inf`` bucket gives the highest finite bound. None when empty."""
    if not 0 <= q <= 1:
        msg = f"q: between 0 and 1, not {q}"
        raise ValueError(msg)
    ordered = sorted(buckets)
    if not ordered or ordered[-1][1] <= 0:
        return None
    total = ordered[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in ordered:
        if cumulative >= rank and cumulative > below:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / (cumulative - below)
        if not math.isinf(bound):
            lower = bound
        below = cumulative
    return lower


SampleKey = tuple[str, tuple[tuple[str, str], ...]]
"""A sample's name and its labels, sorted."""
Samples = dict[SampleKey, float]

SEARCH_FAMILIES = (
    "hsearch_search_requests",
    "hsearch_search_leg_duration_seconds",
    "hsearch_search_leg_outcomes",
    "hsearch_cache_requests",
)


def search_samples(families: Iterable[Metric]) -> Samples:
    """The samples the search figures are computed from (counters and buckets only)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families
        if f.name in SEARCH_FAMILIES
        for s in f.samples
        if s.name.endswith(("_total", "_bucket"))
    }


def since(current: Samples, earlier: Samples) -> Samples | None:
    """What was recorded after ``earlier`` was taken: ``current`` less ``earlier``; None
    when a count went down (the stack restarted and the directory was emptied since)."""
    if any(current.get(key, 0.0) < value for key, value in earlier.items()):
        return None
    return {key: value - earlier.get(key, 0.0) for key, value in current.items()}


def _samples(samples: Samples, name: str) -> list[tuple[str, dict[str, str], float]]:
    prefix = f"{name}_"
    return [(n, dict(labels), v) for (n, labels), v in samples.items() if n.startswith(prefix)]


def _latency(
    samples: Iterable[tuple[str, dict[str, str], float]], *, family: str
) -> dict[str, Latency]:
    """Per ``leg`` label: the buckets summed over the other labels, then percentiles."""
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in samples:
        if name == f"{family}_bucket":
            buckets[labels["leg"]][float(labels["le"])] += value
    out: dict[str, Latency] = {}
    for leg, by_bound in sorted(buckets.items()):
        pairs = sorted(by_bound.items())
        count = int(pairs[-1][1]) if pairs else 0
        p50, p95, p99 = (histogram_quantile(q, pairs) for q in QUANTILES)
        out[leg] = Latency(count=count, p50_ms=_ms(p50), p95_ms=_ms(p95), p99_ms=_ms(p99))
    return out


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def search_figures(samples: Samples, *, tenant: str | None = None) -> SearchFigures:
    """The search figures of ``samples`` (:func:`search_samples` of the aggregated
    families, or what :func:`since` left of them) for the ``tenant`` label (an
    allow-listed tenant or ``other``), or for every tenant."""

    def mine(labels: Mapping[str, str]) -> bool:
        return tenant is None or labels.get("tenant") == tenant

    outcomes: dict[str, int] = defaultdict(int)
    for name, labels, value in _samples(samples, "hsearch_search_requests"):
        if name.endswith("_total") and mine(labels):
            outcomes[labels["outcome"]] += int(value)
    searches = sum(outcomes.values())
    leg_family = "hsearch_search_leg_duration_seconds"
    legs = _latency((s for s in _samples(samples, leg_family) if mine(s[1])), family=leg_family)
    leg_outcomes: dict[str, dict[str, int]] = defaultdict(dict)
    for name, labels, value in _samples(samples, "hsearch_search_leg_outcomes"):
        if name.endswith("_total"):
            leg_outcomes[labels["leg"]][labels["status"]] = int(value)
    lookups: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in _samples(samples, "hsearch_cache_requests"):
        if name.endswith("_total"):
            lookups[labels["cache"]][labels["result"]] += value
    return SearchFigures(
        tenant=tenant,
        searches=searches,
        outcomes=dict(outcomes),
        degraded_share=outcomes.get("degraded", 0) / searches if searches else None,
        legs=legs,
        leg_outcomes=dict(leg_outcomes),
        cache_hit_ratio={
            cache: (r.get("hit", 0.0) / sum(r.values()) if sum(r.values()) else None)
            for cache, r in sorted(lookups.items())
        },
    )
