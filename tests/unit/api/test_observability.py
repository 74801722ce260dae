"""Through the real app: request ids (echoed, made, refused when malformed, stored on
jobs), request and search metrics by route template, /metrics, JSON logs that never
hold a key or a query, and who may read /v1/stats."""

from __future__ import annotations

import io
import json
import logging
import re
import uuid
from collections.abc import Iterator

import pytest
from prometheus_client import REGISTRY

from hsearch.logging import configure_logging
from hsearch.types import Scope
from tests.unit.api.conftest import Api

DOCS = [
    {"external_id": "fox", "title": "Fox", "text": "The quick brown fox jumps over the dog."},
    {"external_id": "cat", "title": "Cat", "text": "A cat sleeps on the warm windowsill."},
]


def value(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


async def test_a_well_formed_request_id_is_echoed(api: Api) -> None:
    resp = await api.client.get("/healthz", headers={"X-Request-Id": "req-42.a:b"})
    assert resp.headers["x-request-id"] == "req-42.a:b"


@pytest.mark.parametrize("sent", [None, "", "has space", "x" * 200, "-leading", "a\tb"])
async def test_otherwise_a_new_one_is_made(api: Api, sent: str | None) -> None:
    headers = {} if sent is None else {"X-Request-Id": sent}
    resp = await api.client.get("/healthz", headers=headers)
    assert re.fullmatch(r"[0-9a-f]{32}", resp.headers["x-request-id"])


async def test_errors_and_refused_bodies_carry_one_too(api: Api) -> None:
    resp = await api.client.get(f"/v1/jobs/{uuid.uuid4()}", headers={"X-Request-Id": "r-404"})
    assert (resp.status_code, resp.headers["x-request-id"]) == (404, "r-404")


async def test_a_job_records_the_request_that_submitted_it(api: Api) -> None:
    resp = await api.client.post(
        "/v1/documents", json={"documents": DOCS}, headers={"X-Request-Id": "submit-1"}
    )
    assert resp.status_code == 202, resp.text
    job = (await api.client.get(resp.json()["status_url"])).json()
    assert job["request_id"] == "submit-1"


async def test_requests_are_counted_by_route_template(api: Api) -> None:
    route = "/v1/jobs/{job_id}"
    before = value("hsearch_http_requests_total", route=route, method="GET", status="404")
    unmatched = value("hsearch_http_requests_total", route="unmatched", method="GET", status="404")
    for _ in range(3):
        await api.client.get(f"/v1/jobs/{uuid.uuid4()}")
    await api.client.get("/no/such/path/at/all")
    assert value("hsearch_http_requests_total", route=route, method="GET", status="404") == (
        before + 3
    )
    assert value("hsearch_http_requests_total", route="unmatched", method="GET", status="404") == (
        unmatched + 1
    )
    text = (await api.client.get("/metrics")).text
    assert "/no/such/path" not in text


async def test_searches_and_ingest_are_counted(api: Api) -> None:
    accepted = (await api.client.post("/v1/documents", json={"documents": DOCS})).json()
    indexed = value("hsearch_ingest_documents_total", outcome="indexed")
    searchable = value("hsearch_time_to_searchable_seconds_count")
    assert api.services.indexing().process_job(uuid.UUID(accepted["job_id"])) == "succeeded"
    assert value("hsearch_ingest_documents_total", outcome="indexed") == indexed + 2
    assert value("hsearch_time_to_searchable_seconds_count") == searchable + 1

    ok = value("hsearch_search_requests_total", mode="hybrid", outcome="ok", tenant="other")
    dense = value("hsearch_search_leg_outcomes_total", leg="dense", status="ok")
    hydrate = value("hsearch_search_stage_duration_seconds_count", stage="hydrate")
    for _ in range(2):
        resp = await api.client.post("/v1/search", json={"query": "fox"})
        assert resp.status_code == 200
    assert value("hsearch_search_requests_total", mode="hybrid", outcome="ok", tenant="other") == (
        ok + 2
    )
    assert value("hsearch_search_leg_outcomes_total", leg="dense", status="ok") == dense + 2
    assert value("hsearch_search_stage_duration_seconds_count", stage="hydrate") == hydrate + 2


async def test_unchanged_documents_are_counted_as_skipped_when_their_job_ends(api: Api) -> None:
    first = (await api.client.post("/v1/documents", json={"documents": DOCS})).json()
    api.services.indexing().process_job(uuid.UUID(first["job_id"]))
    skipped = value("hsearch_ingest_documents_total", outcome="skipped")
    indexed = value("hsearch_ingest_documents_total", outcome="indexed")
    again = (await api.client.post("/v1/documents", json={"documents": DOCS})).json()
    api.services.indexing().process_job(uuid.UUID(again["job_id"]))
    assert value("hsearch_ingest_documents_total", outcome="skipped") == skipped + 2
    assert value("hsearch_ingest_documents_total", outcome="indexed") == indexed


async def test_metrics_reads_jobs_queue_and_dependencies_when_scraped(api: Api) -> None:
    await api.client.post("/v1/documents", json={"documents": DOCS})
    resp = await api.client.get("/metrics")
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/plain")
    text = resp.text
    assert re.search(r'^hsearch_jobs\{status="queued"\} [1-9]', text, re.MULTILINE)
    assert 'hsearch_jobs{status="failed"} 0.0' in text
    assert re.search(r'^hsearch_queue_depth\{queue="ingest"\} [1-9]', text, re.MULTILINE)
    for component in ("database", "milvus", "encoder", "broker"):
        assert f'hsearch_dependency_up{{component="{component}"}} 1.0' in text
    assert "hsearch_build_info{" in text
    assert "hsearch_http_requests_total{" in text


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """Everything logged, as the process writes it (JSON lines), at DEBUG."""
    out = io.StringIO()
    configure_logging("DEBUG", "json")
    root = logging.getLogger()
    ours = next(h for h in root.handlers if getattr(h, "_hsearch_handler", False))
    capture = logging.StreamHandler(out)
    capture.setFormatter(ours.formatter)
    for f in ours.filters:
        capture.addFilter(f)
    root.addHandler(capture)
    yield out
    root.removeHandler(capture)
    configure_logging("INFO", "json")


async def test_logs_are_json_with_the_request_id_and_never_the_key_or_query(
    api: Api, json_logs: io.StringIO
) -> None:
    query = "zebra-secret-query-7f3a"
    resp = await api.client.post(
        "/v1/search", json={"query": query}, headers={"X-Request-Id": "search-77"}
    )
    assert resp.status_code == 200
    # An unknown key too: its refusal must not log it either.
    bad = "hsk_000000000000_" + "b" * 43
    refused = await api.anonymous().post(
        "/v1/search", json={"query": query}, headers={"Authorization": f"Bearer {bad}"}
    )
    assert refused.status_code == 401
    text = json_logs.getvalue()
    records = [json.loads(line) for line in text.splitlines()]
    assert records
    mine = [r for r in records if r.get("request_id") == "search-77"]
    events = {r["event"] for r in mine}
    assert {"search.done", "http.request"} <= events
    assert all({"time", "level", "logger", "message"} <= r.keys() for r in records)
    for secret in (api.key, api.key.split("_")[-1], bad, query):
        assert secret not in text


async def test_a_tenant_admin_reads_its_own_stats(api: Api) -> None:
    accepted = (await api.client.post("/v1/documents", json={"documents": DOCS})).json()
    api.services.indexing().process_job(uuid.UUID(accepted["job_id"]))
    await api.client.post("/v1/search", json={"query": "fox"})
    resp = await api.client.get("/v1/stats")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    (tenant,) = body["tenants"]
    assert tenant["tenant"] == api.services.settings.api.default_tenant
    assert (tenant["documents"], tenant["chunks"]) == (2, 2)
    assert tenant["jobs"]["succeeded"] == 1
    assert tenant["last_ingest_at"] is not None
    assert tenant["time_to_searchable"]["jobs"] == 1
    assert tenant["time_to_searchable"]["p50_s"] >= 0
    search = body["search"]
    assert search["scope"] == "service"  # not in the allow-list: every tenant's figures
    assert "since" in search
    assert search["searches"] >= 1
    assert search["legs"]["dense"]["count"] >= 1
    assert search["legs"]["dense"]["p95_ms"] > 0


async def test_stats_need_the_admin_scope_or_an_operator(api: Api) -> None:
    tenancy = api.services.tenancy
    tenant = api.services.settings.api.default_tenant
    search_only = tenancy.create_key(tenant, scopes=[Scope.SEARCH], actor="test").key
    async with api.anonymous() as anonymous:
        refused = await anonymous.get(
            "/v1/stats", headers={"Authorization": f"Bearer {search_only}"}
        )
        assert (refused.status_code, refused.json()["error"]) == (403, "insufficient_scope")
        other = await anonymous.get(
            "/v1/stats",
            headers={"Authorization": f"Bearer {api.key}", "X-Hsearch-Tenant": "someone-else"},
        )
        assert other.status_code == 403

        tenancy.ensure_tenant("second", actor="test")
        operator = tenancy.create_operator_key(name="ops", actor="test").key
        every = await anonymous.get("/v1/stats", headers={"Authorization": f"Bearer {operator}"})
        assert every.status_code == 200, every.text
        assert {t["tenant"] for t in every.json()["tenants"]} >= {tenant, "second"}
        one = await anonymous.get(
            "/v1/stats",
            headers={"Authorization": f"Bearer {operator}", "X-Hsearch-Tenant": "second"},
        )
        assert [t["tenant"] for t in one.json()["tenants"]] == ["second"]
    audited = [(e.action, e.tenant_id, e.target) for e in tenancy.audit_log(limit=10)]
    assert ("api.request", "second", "GET /v1/stats") in audited
    assert ("api.request", None, "GET /v1/stats") in audited
