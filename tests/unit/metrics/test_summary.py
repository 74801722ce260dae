"""Percentiles from histogram buckets (as Prometheus' histogram_quantile) and the
search figures the stats API reads."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from hsearch.metrics.summary import histogram_quantile, search_figures, search_samples, since

INF = math.inf


def test_a_quantile_is_interpolated_inside_its_bucket() -> None:
    # 10 observations at or below 0.1, 10 more up to 0.2.
    buckets = [(0.1, 10.0), (0.2, 20.0), (INF, 20.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.1)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.15)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.05)
    assert histogram_quantile(1.0, buckets) == pytest.approx(0.2)


def test_a_rank_past_the_last_bound_gives_that_bound() -> None:
    assert histogram_quantile(0.99, [(0.1, 1.0), (INF, 10.0)]) == 0.1


def test_an_empty_histogram_has_no_quantile() -> None:
    assert histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None
    assert histogram_quantile(0.5, []) is None
    with pytest.raises(ValueError, match="between 0 and 1"):
        histogram_quantile(1.5, [(INF, 1.0)])


def test_search_figures_per_tenant_label_and_overall() -> None:
    registry = CollectorRegistry()
    searches = Counter(
        "hsearch_search_requests", "", ["mode", "outcome", "tenant"], registry=registry
    )
    legs = Histogram(
        "hsearch_search_leg_duration_seconds",
        "",
        ["leg", "tenant"],
        buckets=(0.01, 0.1, 1.0),
        registry=registry,
    )
    cache = Counter("hsearch_cache_requests", "", ["cache", "result"], registry=registry)
    searches.labels("hybrid", "ok", "acme").inc(3)
    searches.labels("hybrid", "degraded", "acme").inc(1)
    searches.labels("keyword", "ok", "other").inc(4)
    for _ in range(4):
        legs.labels("dense", "acme").observe(0.005)
    legs.labels("dense", "other").observe(0.5)
    cache.labels("result", "hit").inc(3)
    cache.labels("result", "miss").inc(1)
    families = search_samples(registry.collect())

    acme = search_figures(families, tenant="acme")
    assert (acme.searches, acme.degraded_share) == (4, 0.25)
    assert acme.legs["dense"].count == 4
    assert acme.legs["dense"].p50_ms == pytest.approx(5.0)  # half of the first bucket

    every = search_figures(families)
    assert every.searches == 8
    assert every.degraded_share == pytest.approx(1 / 8)
    assert every.legs["dense"].count == 5
    assert every.outcomes == {"ok": 7, "degraded": 1}
    assert every.cache_hit_ratio == {"result": 0.75}


def test_since_subtracts_an_earlier_snapshot_unless_counts_went_down() -> None:
    registry = CollectorRegistry()
    searches = Counter(
        "hsearch_search_requests", "", ["mode", "outcome", "tenant"], registry=registry
    )
    searches.labels("hybrid", "ok", "other").inc(5)
    earlier = search_samples(registry.collect())
    searches.labels("hybrid", "ok", "other").inc(2)
    searches.labels("hybrid", "degraded", "other").inc(2)
    recent = since(search_samples(registry.collect()), earlier)
    assert recent is not None
    figures = search_figures(recent)
    assert (figures.searches, figures.degraded_share) == (4, 0.5)
    # A restart emptied the directory: the earlier snapshot is no baseline.
    assert since(earlier, search_samples(registry.collect())) is None


def test_no_search_yet_is_no_figure() -> None:
    figures = search_figures({})
    assert (figures.searches, figures.degraded_share, dict(figures.legs)) == (0, None, {})
