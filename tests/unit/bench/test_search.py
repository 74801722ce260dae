"""The search benchmark's pure parts: client-side RRF, percentiles, the log-log slope,
the generated chunks, the pass-through encoder, the service's requests and the report
on their totals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from bench import search
from bench.search import (
    SERVICE_SIDES,
    Generator,
    PassThroughEmbedder,
    log_slope,
    rrf,
    service_query,
    summary_ms,
    totals_report,
)

from hsearch.search.models import SearchResult
from hsearch.search.totals import Totals
from hsearch.types import CountScope, CountUnit, FusionMethod, SearchMode, TotalTracking


def test_rrf_sums_reciprocal_ranks_across_legs() -> None:
    dense = ["a", "b", "c"]
    sparse = ["c", "d", "a"]
    # a: 1/61 + 1/63, c: 1/63 + 1/61 (a tie: first seen wins), b: 1/62, d: 1/62
    assert rrf([dense, sparse], k=60, limit=4) == ["a", "c", "b", "d"]
    assert rrf([dense, sparse], k=60, limit=2) == ["a", "c"]
    # One leg only: its own order.
    assert rrf([["x", "y", "z"]], limit=10) == ["x", "y", "z"]
    # k = 1: d (1/5 + 1/2) beats a (1/2) and b (1/3 + 1/5).
    assert rrf([["a", "b", "c", "d"], ["d", "e", "f", "b"]], k=1, limit=3) == ["d", "b", "a"]


def test_summary_in_milliseconds_with_percentiles() -> None:
    seconds = [i / 1000 for i in range(1, 101)]  # 1 .. 100 ms
    out = summary_ms(seconds)
    assert out["p50_ms"] == pytest.approx(50.5)
    assert out["p95_ms"] == pytest.approx(95.05)
    assert out["p99_ms"] == pytest.approx(99.01)
    assert out["n"] == 100


def test_log_slope_is_the_exponent_of_a_power_law() -> None:
    sizes = [10_000, 50_000, 200_000]
    assert log_slope(sizes, [5.0, 5.0, 5.0]) == pytest.approx(0.0)
    assert log_slope(sizes, [n / 1000 for n in sizes]) == pytest.approx(1.0)
    assert log_slope(sizes, [math.sqrt(n) for n in sizes]) == pytest.approx(0.5)
    assert log_slope([10_000], [3.0]) is None
    assert log_slope([10_000, 10_000], [3.0, 4.0]) is None


def test_generated_chunks_are_realistic_and_reproducible() -> None:
    generator = Generator(seed=3, dimension=32)
    records = generator.records(0, 20)
    assert [r.tenant_id for r in records[:2]] == list(search.TENANTS)
    for r in records:
        assert np.linalg.norm(np.asarray(r.dense)) == pytest.approx(1.0, abs=1e-5)
        assert 20 <= len(r.sparse) <= search.TERMS_PER_CHUNK[1]
        assert 900 <= len(r.text) <= search.TEXT_BYTES
    assert generator.records(0, 20) == records
    assert generator.records(20, 21)[0].chunk_id == "c0000000020"


def test_the_pass_through_encoder_returns_the_precomputed_vectors() -> None:
    queries = Generator(seed=3, dimension=16).queries(5)
    embedder = PassThroughEmbedder(queries)
    assert embedder.embed_query("q3") == queries[3]
    assert embedder.embed_query(" Q4 ") == queries[4]
    for q in queries:
        assert search.TERMS_PER_QUERY[0] <= len(q.sparse) <= search.TERMS_PER_QUERY[1]
        assert min(q.sparse.indices) >= search.QUERY_SKIP_COMMONEST


def test_the_service_sides_differ_only_in_how_they_count() -> None:
    """(c) is what (a) does; (c+) the default request with facets; (c++) the same with
    the exact count."""
    plain, default, exact = (service_query(7, tracking=t) for t in SERVICE_SIDES.values())
    assert (plain.facets, plain.highlight, plain.track_total) == ((), False, TotalTracking.WINDOW)
    assert default.track_total is TotalTracking.BOUND
    assert default.facets == search.FACETS
    assert default.highlight
    assert exact == dataclasses.replace(default, track_total=TotalTracking.EXACT)


def result(total: int, *, exact: bool) -> SearchResult:
    return SearchResult(
        query="q",
        mode=SearchMode.HYBRID,
        method=FusionMethod.RRF,
        hits=(),
        totals=Totals(total, exact, CountUnit.CHUNK, CountScope.MATCHES),
        window=10,
        offset=0,
        top_k=10,
        degraded=(),
        legs=(),
        took_ms=1.0,
    )


def test_the_totals_report_sets_each_bound_against_its_count() -> None:
    bound = [result(150, exact=False), result(40, exact=True), result(100, exact=False)]
    exact = [result(300, exact=True), result(40, exact=True), result(10_000, exact=False)]
    report = totals_report(bound, exact)
    assert report["queries"] == 3
    assert (report["service_facets_gte"], report["service_exact_gte"]) == (2, 1)
    assert report["bound_over_exact_p50"] == 0.5
    assert report["bound_over_exact_min"] == 0.01
    assert report["service_facets_total_p50"] == 100
    assert report["service_exact_total_p50"] == 300
