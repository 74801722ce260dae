"""The instruments: names and labels as agreed (docs/metrics.md), bounded tenant labels,
and what each recording function adds."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from hsearch.metrics import instruments
from hsearch.metrics.instruments import (
    configure,
    record_cache,
    record_http,
    record_ingest,
    record_search,
    record_time_to_searchable,
    tenant_label,
)


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture(autouse=True)
def allow_list() -> Iterator[None]:
    configure(tenant_allow_list=["acme"])
    yield
    configure(tenant_allow_list=[])


def test_only_allow_listed_tenants_are_named() -> None:
    assert tenant_label("acme") == "acme"
    assert tenant_label("t0123456789") == instruments.OTHER_TENANT == "other"


def test_a_search_counts_its_outcome_legs_and_stages() -> None:
    before = {
        "ok": value("hsearch_search_requests_total", mode="hybrid", outcome="ok", tenant="acme"),
        "dense": value("hsearch_search_leg_duration_seconds_count", leg="dense", tenant="acme"),
        "sparse_skipped": value(
            "hsearch_search_leg_outcomes_total", leg="sparse", status="skipped"
        ),
        "sparse_timed": value(
            "hsearch_search_leg_duration_seconds_count", leg="sparse", tenant="acme"
        ),
        "fusion": value("hsearch_search_stage_duration_seconds_count", stage="fusion"),
        "fusion_sum": value("hsearch_search_stage_duration_seconds_sum", stage="fusion"),
    }
    record_search(
        tenant="acme",
        mode="hybrid",
        outcome="ok",
        legs=[("dense", "ok", 12.0), ("sparse", "skipped", 0.0)],
        stages_ms={"plan": 0.1, "fusion": 2.0},
    )
    assert value("hsearch_search_requests_total", mode="hybrid", outcome="ok", tenant="acme") == (
        before["ok"] + 1
    )
    dense = value("hsearch_search_leg_duration_seconds_count", leg="dense", tenant="acme")
    assert dense == before["dense"] + 1
    # A skipped leg is counted, never timed.
    skipped = value("hsearch_search_leg_outcomes_total", leg="sparse", status="skipped")
    assert skipped == before["sparse_skipped"] + 1
    timed = value("hsearch_search_leg_duration_seconds_count", leg="sparse", tenant="acme")
    assert timed == before["sparse_timed"]
    fusion = value("hsearch_search_stage_duration_seconds_count", stage="fusion")
    assert fusion == before["fusion"] + 1
    fusion_sum = value("hsearch_search_stage_duration_seconds_sum", stage="fusion")
    assert fusion_sum == pytest.approx(before["fusion_sum"] + 0.002)


def test_a_tenant_outside_the_allow_list_is_counted_as_other() -> None:
    name = "hsearch_search_requests_total"
    before = value(name, mode="keyword", outcome="degraded", tenant="other")
    record_search(tenant="t-secret-customer", mode="keyword", outcome="degraded")
    assert value(name, mode="keyword", outcome="degraded", tenant="other") == before + 1
    assert value(name, mode="keyword", outcome="degraded", tenant="t-secret-customer") == 0


def test_http_requests_count_by_route_and_status() -> None:
    route = "/v1/jobs/{job_id}"
    before = value("hsearch_http_requests_total", route=route, method="GET", status="404")
    count = value("hsearch_http_request_duration_seconds_count", route=route, method="GET")
    record_http(route=route, method="GET", status=404, seconds=0.01)
    after = value("hsearch_http_requests_total", route=route, method="GET", status="404")
    assert after == before + 1
    latency = value("hsearch_http_request_duration_seconds_count", route=route, method="GET")
    assert latency == count + 1


def test_cache_ingest_and_time_to_searchable() -> None:
    hits = value("hsearch_cache_requests_total", cache="result", result="hit")
    record_cache("result", "hit")
    assert value("hsearch_cache_requests_total", cache="result", result="hit") == hits + 1
    indexed = value("hsearch_ingest_documents_total", outcome="indexed")
    chunks = value("hsearch_ingest_chunks_total")
    record_ingest(outcome="indexed", documents=3, chunks=7)
    assert value("hsearch_ingest_documents_total", outcome="indexed") == indexed + 3
    assert value("hsearch_ingest_chunks_total") == chunks + 7
    searchable = value("hsearch_time_to_searchable_seconds_count")
    bucket = value("hsearch_time_to_searchable_seconds_bucket", le="5.0")
    record_time_to_searchable(4.2)
    assert value("hsearch_time_to_searchable_seconds_count") == searchable + 1
    assert value("hsearch_time_to_searchable_seconds_bucket", le="5.0") == bucket + 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: record_search(tenant="a", mode="hybrid", outcome="fine"), "outcome: one of"),
        (lambda: record_cache("result", "maybe"), "result: one of hit, miss, error"),
        (lambda: record_ingest(outcome="lost", documents=1), "outcome: one of indexed"),
    ],
)
def test_unknown_label_values_are_refused(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def test_every_agreed_metric_exists_with_its_labels() -> None:
    """The names and labels the alert rules and the dashboard are written against."""
    agreed = Path(__file__).parents[3] / "docs" / "metrics.md"
    recorded = {
        "hsearch_http_requests": ("route", "method", "status"),
        "hsearch_http_request_duration_seconds": ("route", "method"),
        "hsearch_search_requests": ("mode", "outcome", "tenant"),
        "hsearch_search_leg_duration_seconds": ("leg", "tenant"),
        "hsearch_search_leg_outcomes": ("leg", "status"),
        "hsearch_search_stage_duration_seconds": ("stage",),
        "hsearch_cache_requests": ("cache", "result"),
        "hsearch_ingest_documents": ("outcome",),
        "hsearch_ingest_chunks": (),
        "hsearch_time_to_searchable_seconds": (),
        "hsearch_answer_requests": ("model", "outcome", "tenant"),
        "hsearch_answer_duration_seconds": ("model",),
        "hsearch_answer_first_token_seconds": ("model",),
        "hsearch_answer_tokens": ("model", "direction", "tenant"),
        "hsearch_answer_sentences": ("model", "support"),
    }
    metrics = {
        m._name: m._labelnames
        for m in vars(instruments).values()
        if hasattr(m, "_labelnames") and hasattr(m, "_name")
    }
    assert metrics == recorded
    text = agreed.read_text()
    for name in recorded:
        assert name in text, f"{name} is not documented in docs/metrics.md"
