"""The search benchmark's pure parts: client-side RRF, percentiles, the log-log slope,
the generated chunks and the pass-through encoder."""

from __future__ import annotations

import math

import numpy as np
import pytest
from bench import search
from bench.search import Generator, PassThroughEmbedder, log_slope, rrf, summary_ms


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
