"""bench.cache_hit --http, (d) of bench.search, runs end to end: the API in a process of
its own (uvicorn on the app factory) on a Milvus Lite server of its own, every timed
request a cache hit of ten ~1 kB hits."""

from __future__ import annotations

import pytest
from bench.cache_hit import measure_http

pytestmark = pytest.mark.integration


def test_cache_hits_through_http_to_an_api_process() -> None:
    result = measure_http(20, 2)
    assert result["requests"] == 20
    assert result["hits"] == 10
    assert result["response_bytes"] > 10 * 1000
    assert 0 < result["server_took_p50_ms"] <= result["p50_ms"]
