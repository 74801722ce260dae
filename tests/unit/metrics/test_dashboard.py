"""The /ops page's figures: counters and leg histograms added up over their other labels
(tenants, modes), +Inf as null, and the gauges a scrape read passed through."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from hsearch.metrics.dashboard import dashboard_figures
from hsearch.metrics.exposition import ScrapeFigures


def test_totals_are_summed_over_tenants_and_modes() -> None:
    registry = CollectorRegistry()
    searches = Counter(
        "hsearch_search_requests", "s", ["mode", "outcome", "tenant"], registry=registry
    )
    legs = Histogram(
        "hsearch_search_leg_duration_seconds",
        "l",
        ["leg", "tenant"],
        buckets=(0.01, 0.1),
        registry=registry,
    )
    cache = Counter("hsearch_cache_requests", "c", ["cache", "result"], registry=registry)
    documents = Counter("hsearch_ingest_documents", "d", ["outcome"], registry=registry)
    chunks = Counter("hsearch_ingest_chunks", "c", registry=registry)
    searches.labels("hybrid", "ok", "a").inc(2)
    searches.labels("dense", "ok", "other").inc(3)
    searches.labels("hybrid", "degraded", "a").inc()
    legs.labels("dense", "a").observe(0.005)
    legs.labels("dense", "other").observe(0.05)
    legs.labels("sparse", "a").observe(1.0)
    cache.labels("result", "hit").inc(3)
    cache.labels("result", "miss").inc()
    documents.labels("indexed").inc(4)
    chunks.inc(9)
    scrape = ScrapeFigures(
        version="1",
        encoder="e",
        dependencies={"database": True},
        jobs={"succeeded": 2},
        queue_depth=None,
    )

    figures = dashboard_figures(list(registry.collect()), scrape, at=12.5)

    assert figures.at == 12.5
    assert figures.searches == {"degraded": 1.0, "ok": 5.0}
    assert figures.legs["dense"].buckets == ((0.01, 1.0), (0.1, 2.0), (None, 2.0))
    assert figures.legs["dense"].count == 2.0
    assert figures.legs["sparse"].buckets[-1] == (None, 1.0)
    assert figures.cache == {"result": {"hit": 3.0, "miss": 1.0}}
    assert figures.ingest_documents == {"indexed": 4.0}
    assert figures.ingest_chunks == 9.0
    assert figures.jobs == {"succeeded": 2}
    assert figures.queue_depth is None
    assert figures.dependencies == {"database": True}
