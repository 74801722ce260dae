"""The API on embedded parts end to end: submit through the API, run the job through
the indexing service (the worker's code, without the broker), search through the API;
readiness and a failing queue."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from hsearch.errors import BackendError, VectorStoreError
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.api.conftest import Api, api_settings, serve

DOCS: list[dict[str, Any]] = [
    {
        "external_id": "fox",
        "title": "Fox",
        "text": "The quick brown fox jumps over the lazy dog.",
        "source": "en-wiki",
        "tags": ["animals"],
    },
    {"external_id": "milvus", "title": "Milvus", "text": "Milvus runs dense and sparse search."},
    {"external_id": "tokyo", "title": "東京", "text": "東京は日本の首都です。"},
]


async def test_submitted_documents_are_found_once_indexed(api: Api) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": DOCS})
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    job_id = uuid.UUID(accepted["job_id"])
    assert (accepted["status"], accepted["total"]) == ("queued", len(DOCS))
    assert api.queue.sent == [job_id]  # enqueued once, after the commit

    before = await api.client.post("/v1/search", json={"query": "fox"})
    assert before.json()["hits"] == []

    assert api.services.indexing().process_job(job_id) == "succeeded"
    job = (await api.client.get(accepted["status_url"])).json()
    assert (job["status"], job["indexed"], job["failed"]) == ("succeeded", len(DOCS), 0)

    for doc in DOCS:
        for mode in ("hybrid", "semantic", "keyword"):
            resp = await api.client.post(
                "/v1/search", json={"query": f"{doc['title']}\n{doc['text']}", "mode": mode}
            )
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["hits"][0]["external_id"] == doc["external_id"], (mode, body["hits"])
            assert body["degraded"] == []
            assert [leg["status"] for leg in body["legs"]] == ["ok"] * len(body["legs"])
    fox = (await api.client.post("/v1/search", json={"query": "fox", "top_k": 1})).json()
    assert fox["hits"][0]["source"] == "en-wiki"
    assert fox["hits"][0]["tags"] == ["animals"]
    assert "<em>fox</em>" in fox["hits"][0]["snippet"]
    text = DOCS[0]["text"]
    assert (fox["hits"][0]["char_start"], fox["hits"][0]["char_end"]) == (0, len(text))


async def test_readyz_checks_the_database_and_the_store(api: Api) -> None:
    resp = await api.client.get("/readyz")
    assert resp.status_code == 200
    body = resp.json()
    assert body["status"] == "ready"
    components = body["components"]
    assert set(components) == {"database", "milvus", "encoder", "broker"}
    for name in ("database", "milvus", "broker"):
        assert components[name]["status"] == "ok"
        assert components[name]["latency_ms"] >= 0
    assert components["encoder"]["detail"] == api.services.embedder.info.fingerprint
    assert [components[n]["required"] for n in ("database", "milvus", "encoder", "broker")] == [
        True,
        True,
        True,
        False,
    ]
    checks = body["checks"]  # the flat form earlier versions answered with
    assert (checks["database"], checks["milvus"]) == ("ok", "ok")
    assert checks["encoder"] == api.services.embedder.info.fingerprint


class UnreachableStore(InMemoryVectorStore):
    def ping(self) -> None:
        raise VectorStoreError("connection refused")


async def test_readyz_reports_an_unreachable_store(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path), store=UnreachableStore()) as api:
        resp = await api.client.get("/readyz")
    assert resp.status_code == 503
    body = resp.json()
    assert body["status"] == "not_ready"
    assert body["components"]["milvus"]["status"] == "error"
    assert body["components"]["milvus"]["detail"] == "VectorStoreError: connection refused"
    assert body["checks"]["milvus"] == "error: VectorStoreError: connection refused"


class HangingStore(InMemoryVectorStore):
    """A store whose ping never answers until released (a server that accepts the
    connection and then says nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def ping(self) -> None:
        self.release.wait()


async def test_readyz_answers_on_time_when_a_dependency_hangs(tmp_path: Path) -> None:
    settings = api_settings(tmp_path)
    settings = settings.model_copy(
        update={"api": settings.api.model_copy(update={"readiness_timeout_s": 0.5})}
    )
    store = HangingStore()
    try:
        async with serve(settings, store=store) as api:
            # The store answers only once released, after this: a probe that waited for
            # it would not answer at all (the bound is a guard, not the probe's time).
            resp = await asyncio.wait_for(api.client.get("/readyz"), timeout=60)
    finally:
        store.release.set()
    assert resp.status_code == 503
    milvus = resp.json()["components"]["milvus"]
    assert milvus["status"] == "timeout"
    assert milvus["detail"] == "no answer within 0.5 s"


class DownBroker(InMemoryJobQueue):
    def ping(self, *, timeout_s: float) -> None:
        raise BackendError("broker unreachable: connection refused")


async def test_a_broker_that_is_down_degrades_readiness_without_failing_it(
    tmp_path: Path,
) -> None:
    async with serve(api_settings(tmp_path), queue=DownBroker()) as api:
        resp = await api.client.get("/readyz")
    assert resp.status_code == 200, "searches answer without the broker"
    body = resp.json()
    assert body["status"] == "degraded"
    assert body["components"]["broker"]["status"] == "error"
    assert "connection refused" in body["components"]["broker"]["detail"]


class DeadBrokerQueue(InMemoryJobQueue):
    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        super().enqueue_job(job_id, turn=turn)
        raise BackendError(f"could not enqueue ingest job {job_id}: broker down")


async def test_a_job_that_cannot_be_enqueued_is_failed_and_answered_503(tmp_path: Path) -> None:
    queue = DeadBrokerQueue()
    async with serve(api_settings(tmp_path), queue=queue) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS[:1]})
        assert resp.status_code == 503
        assert resp.json()["error"] == "backend_unavailable"
        (job_id,) = queue.sent
        job = (await api.client.get(f"/v1/jobs/{job_id}")).json()
    assert job["status"] == "failed"
    assert "broker down" in job["error"]


TIMINGS = (
    "plan_ms",
    "cache_ms",
    "encode_ms",
    "statistics_ms",
    "retrieval_ms",
    "fusion_ms",
    "facets_ms",
    "rerank_ms",
    "hydrate_ms",
)


async def test_every_response_says_where_the_time_went(api: Api) -> None:
    await api.client.post("/v1/documents", json={"documents": DOCS})
    (job_id,) = api.queue.sent
    assert api.services.indexing().process_job(job_id) == "succeeded"
    requests: list[dict[str, object]] = [
        {"query": "fox"},
        {"query": "fox", "mode": "keyword", "facets": ["source"]},
        {"query": "東京", "mode": "semantic", "group_by_document": True},
        {"query": "fox", "weights": {"dense": 1.0, "sparse": 0.0}},
    ]
    for request in requests:
        resp = await api.client.post("/v1/search", json=request)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        timings = body["timings"]
        assert tuple(timings) == TIMINGS
        assert all(ms >= 0 for ms in timings.values())
        # The stages run one after another and account for the whole search.
        assert abs(sum(timings.values()) - body["took_ms"]) <= 2.0, body
        assert timings["retrieval_ms"] > 0
        # The legs' own times overlap inside the retrieval stage.
        assert all(leg["took_ms"] <= timings["retrieval_ms"] for leg in body["legs"])
    assert [leg["status"] for leg in body["legs"]] == ["ok", "skipped"]


async def test_the_response_shows_the_keyword_coverage_the_fusion_read(tmp_path: Path) -> None:
    from hsearch_client.models import SearchResponse

    settings = api_settings(tmp_path, fusion="adaptive", keyword_coverage=True)
    async with serve(settings) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS})
        assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"
        body = (await api.client.post("/v1/search", json={"query": "quick fox"})).json()
        assert body["keyword_coverage"] == 1.0  # the fox document holds both words
        partial = (await api.client.post("/v1/search", json={"query": "fox zebra"})).json()
        assert 0.0 < partial["keyword_coverage"] < 1.0
        assert SearchResponse.model_validate(partial).keyword_coverage == pytest.approx(
            partial["keyword_coverage"]
        )
        rrf = (await api.client.post("/v1/search", json={"query": "fox", "fusion": "rrf"})).json()
        assert rrf["keyword_coverage"] is None
