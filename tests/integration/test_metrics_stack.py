"""Metrics, request ids and stats over real processes: the API in two uvicorn worker
processes and a Celery worker, sharing one PROMETHEUS_MULTIPROC_DIR, on Postgres, Redis
and the session's Milvus Lite server. Traffic (an ingest job and searches) moves the
scraped figures by exactly what was sent, and the samples of both API processes are
added up; the request id goes from the API into the worker's log lines and the job's
record; no key or query text reaches a log; /v1/stats reads the aggregated figures."""

from __future__ import annotations

import json
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from hsearch.local.processes import Child, free_port, start_api
from hsearch.metrics.exposition import MULTIPROC_ENV, prepare_multiprocess_dir
from hsearch.tenancy.factory import open_tenancy
from tests.integration.conftest import settings_from_env, stack_env
from tests.integration.services import private_redis, start_test_worker

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

QUERY = "quokka-lantern-query"  # must never be logged
DOCS = [
    {"external_id": f"doc-{i}", "title": f"Doc {i}", "text": f"{word} sits in the garden."}
    for i, word in enumerate(["A fox", "A cat", "A heron", "An otter", "A badger"])
]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Running:
    base: str
    auth: dict[str, str]
    operator: dict[str, str]
    tenant: str
    metrics_dir: Path
    root: Path
    api: Child
    worker: Child
    worker_port: int


@pytest.fixture(scope="module")
def running(
    tmp_path_factory: pytest.TempPathFactory, pg_url: str, milvus_uri: str, tiny_bge_m3: Path
) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("metrics-stack")
    # A broker of its own: neither the session's worker nor another test session
    # beside it on the machine takes these jobs.
    with private_redis(root / "redis") as broker:
        env = stack_env(
            database_url=pg_url,
            broker_url=broker,
            milvus_uri=milvus_uri,
            collection=f"mx_{uuid.uuid4().hex[:8]}",
            encoder={"kind": "bge-m3", "bge_m3_path": str(tiny_bge_m3), "max_length": "128"},
            data_dir=root,
        )
        metrics_dir = prepare_multiprocess_dir(root / "metrics")
        env[MULTIPROC_ENV] = str(metrics_dir)
        with open_tenancy(settings_from_env(env)) as tenancy:
            tenant = f"mx{uuid.uuid4().hex[:8]}"
            created = tenancy.create_tenant("metrics", tenant_id=tenant, actor="test")
            operator = tenancy.create_operator_key(name="metrics test", actor="test")
        worker_port = free_port()
        worker = start_test_worker(
            {**env, "HSEARCH_METRICS__WORKER_PORT": str(worker_port)}, root, name="metrics"
        )
        try:
            api, base = start_api(env, log=root / "api.log", workers=2)
        except BaseException:
            worker.stop()
            raise
        try:
            yield Running(
                base=base,
                auth={"Authorization": f"Bearer {created.key.key}"},
                operator={"Authorization": f"Bearer {operator.key}"},
                tenant=tenant,
                metrics_dir=metrics_dir,
                root=root,
                api=api,
                worker=worker,
                worker_port=worker_port,
            )
        finally:
            api.stop()
            worker.stop()


def scrape(base: str) -> Samples:
    resp = httpx.get(f"{base}/metrics", timeout=30)
    assert resp.status_code == 200, resp.text
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(resp.text)
        for s in family.samples
    }


def get(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def per_process_searches(metrics_dir: Path, tmp: Path) -> dict[str, float]:
    """POST /v1/search answers counted by each process, from its own file alone."""
    counts: dict[str, float] = {}
    for path in metrics_dir.glob("counter_*.db"):
        one = tmp / path.stem
        one.mkdir(exist_ok=True)
        shutil.copy(path, one / path.name)
        # The ignore: prometheus_client's merge is unannotated.
        for family in MultiProcessCollector.merge([str(one / path.name)], accumulate=True):  # type: ignore[no-untyped-call]
            for s in family.samples:
                labels = s.labels
                if (
                    s.name == "hsearch_http_requests_total"
                    and labels.get("route") == "/v1/search"
                    and labels.get("status") == "200"
                ):
                    counts[path.stem] = counts.get(path.stem, 0.0) + s.value
    return {pid: n for pid, n in counts.items() if n}


def wait_for_job(base: str, url: str, auth: dict[str, str]) -> dict[str, object]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job: dict[str, object] = httpx.get(base + url, headers=auth, timeout=10).json()
        if job["status"] in ("succeeded", "partial", "failed"):
            return job
        time.sleep(0.2)
    pytest.fail(f"job {url} did not finish in time")


def test_traffic_moves_the_scraped_figures_across_processes(
    running: Running, tmp_path: Path
) -> None:
    base, auth = running.base, running.auth
    before = scrape(base)
    request_id = f"it-metrics-{uuid.uuid4().hex[:8]}"
    resp = httpx.post(
        f"{base}/v1/documents",
        json={"documents": DOCS},
        headers={**auth, "X-Request-Id": request_id},
        timeout=30,
    )
    assert resp.status_code == 202, resp.text
    assert resp.headers["x-request-id"] == request_id
    job = wait_for_job(base, resp.json()["status_url"], auth)
    assert (job["status"], job["indexed"]) == ("succeeded", len(DOCS))
    assert job["request_id"] == request_id

    # Searches on fresh connections until both API processes have answered some; each
    # its own text, so that each runs its legs (an identical one is a cache hit).
    sent = 0
    deadline = time.monotonic() + 60
    while len(per_process_searches(running.metrics_dir, tmp_path)) < 2 or sent < 6:
        assert time.monotonic() < deadline, "one API process answered every search"
        query = {"query": f"{QUERY} {sent}"}
        answer = httpx.post(f"{base}/v1/search", json=query, headers=auth, timeout=30)
        assert answer.status_code == 200, answer.text
        sent += 1
    # A request is counted once its response is sent (the middleware's last step): the
    # last answer can reach the client a moment before its count does.
    by_process = per_process_searches(running.metrics_dir, tmp_path)
    settle = time.monotonic() + 10
    while sum(by_process.values()) < sent and time.monotonic() < settle:
        time.sleep(0.05)
        by_process = per_process_searches(running.metrics_dir, tmp_path)
    after = scrape(base)

    def moved(name: str, **labels: str) -> float:
        return get(after, name, **labels) - get(before, name, **labels)

    # Both processes' samples are in one scrape, and nothing else is.
    assert len(by_process) >= 2
    assert sum(by_process.values()) == sent
    assert (
        moved("hsearch_http_requests_total", route="/v1/search", method="POST", status="200")
        == sent
    )
    assert (
        moved("hsearch_http_requests_total", route="/v1/documents", method="POST", status="202")
        == 1
    )
    assert (
        moved("hsearch_search_requests_total", mode="hybrid", outcome="ok", tenant="other") == sent
    )
    assert moved("hsearch_search_leg_outcomes_total", leg="dense", status="ok") == sent
    assert moved("hsearch_search_leg_duration_seconds_count", leg="sparse", tenant="other") == sent
    assert moved("hsearch_search_stage_duration_seconds_count", stage="retrieval") == sent
    assert moved("hsearch_cache_requests_total", cache="result", result="miss") == sent
    # The worker recorded the ingest into the same directory.
    assert moved("hsearch_ingest_documents_total", outcome="indexed") == len(DOCS)
    assert moved("hsearch_ingest_chunks_total") >= len(DOCS)
    assert moved("hsearch_time_to_searchable_seconds_count") == 1
    # Read at scrape time.
    assert get(after, "hsearch_jobs", status="succeeded") >= 1
    assert ("hsearch_queue_depth", frozenset({("queue", "ingest")})) in after
    for component in ("database", "milvus", "encoder", "broker"):
        assert get(after, "hsearch_dependency_up", component=component) == 1.0

    # The worker serves its samples on its own port too (one per pod).
    own = httpx.get(f"http://127.0.0.1:{running.worker_port}/metrics", timeout=10).text
    worker_indexed = next(
        s.value
        for f in text_string_to_metric_families(own)
        for s in f.samples
        if s.name == "hsearch_ingest_documents_total" and s.labels == {"outcome": "indexed"}
    )
    assert worker_indexed == get(after, "hsearch_ingest_documents_total", outcome="indexed")

    # The request id went with the job into the worker, and no log holds a secret.
    worker_records = [
        json.loads(line) for line in running.worker.log_text().splitlines() if line.startswith("{")
    ]
    indexed = [r for r in worker_records if r.get("event") == "ingest.document.indexed"]
    assert indexed
    assert {r["request_id"] for r in indexed} == {request_id}
    api_log = (running.root / "api.log").read_text()
    assert request_id in api_log
    key = auth["Authorization"].split()[1]
    for log in (api_log, running.worker.log_text()):
        assert key not in log
        assert QUERY not in log

    # The stats API reads the same aggregated figures.
    stats = httpx.get(f"{base}/v1/stats", headers=auth, timeout=30).json()
    (mine,) = stats["tenants"]
    assert (mine["tenant"], mine["documents"], mine["jobs"]["succeeded"]) == (
        running.tenant,
        len(DOCS),
        1,
    )
    assert mine["chunks"] == moved("hsearch_ingest_chunks_total")
    assert mine["time_to_searchable"]["jobs"] == 1
    assert stats["search"]["searches"] == sent  # every process's, not the answering one's
    assert stats["search"]["legs"]["dense"]["count"] == sent
    every = httpx.get(f"{base}/v1/stats", headers=running.operator, timeout=30)
    assert every.status_code == 200
    assert running.tenant in {t["tenant"] for t in every.json()["tenants"]}
