"""Ingest through the API, index in a real Celery worker, search through the API:
Postgres, Redis (broker), Milvus Lite server and the tiny BGE-M3 checkpoint."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from hsearch.local.processes import Child
from tests.integration.conftest import Stack, api_client
from tests.integration.jobs import ingest, wait_job

pytestmark = pytest.mark.integration

DOCS: list[dict[str, Any]] = [
    {
        "external_id": "fox",
        "title": "Fox",
        "text": "The quick brown fox jumps over the lazy dog.",
        "tags": ["animals"],
        "source": "en-wiki",
        "metadata": {"year": 2001},
    },
    {
        "external_id": "milvus",
        "title": "Milvus",
        "text": "Milvus runs dense and sparse search.",
        "tags": ["search"],
        "source": "docs",
        "metadata": {"year": 2023},
    },
    {
        "external_id": "tokyo",
        "title": "東京",
        "text": "東京は日本の首都です。人口が多い都市です。",
        "tags": ["city"],
        "source": "ja-wiki",
        "lang": "ja",
        "metadata": {"year": 2010},
    },
    {
        "external_id": "coffee",
        "title": "Coffee",
        "text": "Espresso needs a fine grind and hot water.",
        "tags": ["food"],
        "source": "en-wiki",
        "metadata": {"year": 1999},
    },
]

MODE_LEG = {"semantic": "dense", "keyword": "sparse"}


def exact_query(doc: dict[str, Any]) -> str:
    # The worker embeds "title\ntext": the same string gives the same dense vector.
    return f"{doc['title']}\n{doc['text']}"


async def test_ingest_then_find_every_document_in_every_mode(
    client: httpx.AsyncClient, worker: Child
) -> None:
    job = await ingest(client, DOCS)
    assert job["status"] == "succeeded", job
    assert (job["indexed"], job["skipped"], job["failed"]) == (4, 0, 0)

    for doc in DOCS:
        for mode in ("hybrid", "semantic", "keyword"):
            resp = await client.post(
                "/v1/search", json={"query": exact_query(doc), "top_k": 4, "mode": mode}
            )
            assert resp.status_code == 200, resp.text
            body = resp.json()
            ids = [h["external_id"] for h in body["hits"]]
            assert doc["external_id"] in ids, (mode, ids)
            assert body["degraded"] == []
            # The stages run one after another and account for the whole search.
            assert abs(sum(body["timings"].values()) - body["took_ms"]) <= 2.0, body
            assert body["timings"]["retrieval_ms"] >= max(leg["took_ms"] for leg in body["legs"])
            hit = body["hits"][ids.index(doc["external_id"])]
            assert hit["title"] == doc["title"]
            assert hit["text"] == doc["text"]
            assert hit["document_id"]
            assert hit["chunk_id"]
            exp = hit["explanation"]
            if mode == "semantic":
                # Identical input, identical vector: inner product 1, rank 1.
                assert ids[0] == doc["external_id"]
                assert exp["dense_rank"] == 1
                assert exp["dense_score"] == pytest.approx(1.0, abs=1e-3)
                assert exp["sparse_rank"] is None
            if mode == "keyword":
                assert exp["dense_rank"] is None
                assert exp["sparse_rank"] is not None
            if mode == "hybrid":
                assert exp["dense_rank"] is not None or exp["sparse_rank"] is not None
                # The per-query shares the legs carried (adaptive: moved from the prior).
                assert set(body["applied_weights"]) == {"dense", "sparse"}
                assert sum(body["applied_weights"].values()) == pytest.approx(1.0)
            else:
                assert body["applied_weights"] == {MODE_LEG[mode]: 1.0}


async def test_reingest_is_idempotent_and_changes_replace_chunks(
    client: httpx.AsyncClient, worker: Child, stack: Stack, tenant: str
) -> None:
    from hsearch.vectorstore.factory import create_vector_store

    first = await ingest(client, DOCS[:2])
    assert first["indexed"] == 2
    again = await ingest(client, DOCS[:2])
    assert (again["status"], again["indexed"], again["skipped"]) == ("succeeded", 0, 2)

    store = create_vector_store(stack.settings.milvus, uri=stack.milvus_uri)
    try:
        from hsearch.ingestion.ids import document_id

        doc_id = str(document_id(tenant, "fox"))
        before = store.chunk_ids(tenant_id=tenant, document_id=doc_id)
        changed = {**DOCS[0], "text": "A completely different text about red foxes in winter."}
        job = await ingest(client, [changed])
        assert (job["indexed"], job["skipped"]) == (1, 0)
        after = store.chunk_ids(tenant_id=tenant, document_id=doc_id)
        assert after
        assert not (after & before), "stale chunks must be replaced"
        assert store.count(tenant_id=tenant) == len(after) + len(
            store.chunk_ids(tenant_id=tenant, document_id=str(document_id(tenant, "milvus")))
        )
    finally:
        store.close()

    resp = await client.post(
        "/v1/search",
        json={"query": changed["title"] + "\n" + changed["text"], "mode": "semantic", "top_k": 1},
    )
    assert resp.json()["hits"][0]["text"] == changed["text"]


async def test_a_metadata_patch_merges_into_milvus_and_the_row(
    client: httpx.AsyncClient, worker: Child
) -> None:
    doc = {**DOCS[0], "metadata": {"year": 2001, "rank": 3, "author": {"name": "Ada"}}}
    assert (await ingest(client, [doc]))["indexed"] == 1

    async def hits(flt: dict[str, object]) -> list[dict[str, object]]:
        body = {"query": exact_query(doc), "top_k": 3, "filter": flt}
        found = await client.post("/v1/search", json=body)
        assert found.status_code == 200, found.text
        return list(found.json()["hits"])

    assert len(await hits({"metadata.rank": {"exists": True}})) == 1
    patch = {"metadata": {"rank": None, "author": {"org": "Uni"}}}
    resp = await client.patch("/v1/documents/fox", json=patch)
    assert resp.status_code == 200, resp.text
    merged = {"year": 2001, "author": {"name": "Ada", "org": "Uni"}}
    assert resp.json()["metadata"] == merged
    assert (await client.get("/v1/documents/fox")).json()["metadata"] == merged

    # The chunks in Milvus carry the merged metadata: what filters and hits read.
    [hit] = await hits({"metadata.year": {"eq": 2001}})
    assert hit["metadata"] == merged
    assert await hits({"metadata.rank": {"exists": True}}) == []
    assert len(await hits({"metadata.author.name": {"eq": "Ada"}})) == 1
    assert len(await hits({"metadata.author.org": {"eq": "Uni"}})) == 1


async def test_tenants_do_not_see_each_other(
    client: httpx.AsyncClient, worker: Child, stack: Stack
) -> None:
    job = await ingest(client, DOCS[:1])
    assert job["indexed"] == 1

    async with api_client(stack.settings, tenant=f"other{uuid.uuid4().hex[:8]}") as c2:
        resp = await c2.post("/v1/search", json={"query": exact_query(DOCS[0])})
        assert resp.status_code == 200
        assert resp.json()["hits"] == []
        # Nor its jobs.
        resp = await c2.get(f"/v1/jobs/{job['id']}")
        assert resp.status_code == 404
        assert resp.json()["error"] == "job_not_found"


async def test_a_blank_document_is_refused_at_submission_and_nothing_is_written(
    client: httpx.AsyncClient, worker: Child
) -> None:
    docs = [DOCS[0], {"external_id": "blank", "title": "Blank", "text": " \n\n "}]
    resp = await client.post("/v1/documents", json={"documents": docs})
    assert resp.status_code == 422
    assert resp.json()["detail"].startswith("documents[1].text: only white space")
    assert "'blank'" in resp.json()["detail"]
    job = await ingest(client, docs[:1])
    assert (job["status"], job["indexed"], job["failed"]) == ("succeeded", 1, 0)


async def test_readyz_checks_dependencies(client: httpx.AsyncClient) -> None:
    resp = await client.get("/readyz")
    assert resp.status_code == 200
    body = resp.json()
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["milvus"] == "ok"
    assert body["checks"]["encoder"].startswith("bge-m3|32|")
    # The real broker (Redis) answers too.
    assert body["status"] == "ready"
    assert body["components"]["broker"]["status"] == "ok"
    # The caches' Redis, optional: searches answer uncached without it.
    assert body["components"]["redis"]["status"] == "ok"
    assert body["components"]["redis"]["required"] is False


async def test_job_status_reports_progress_fields(client: httpx.AsyncClient, worker: Child) -> None:
    resp = await client.post("/v1/documents", json={"documents": DOCS[:1]})
    accepted = resp.json()
    assert accepted["status"] == "queued"
    assert accepted["total"] == 1
    job = await wait_job(client, accepted["job_id"])
    assert job["processed"] == job["total"] == 1
    assert job["started_at"]
    assert job["finished_at"]


async def test_rerank_through_the_api_with_a_real_cross_encoder(
    stack: Stack, tenant: str, worker: Child, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tests.fixtures.tiny_reranker import build_tiny_reranker

    path = build_tiny_reranker(tmp_path_factory.mktemp("reranker"))
    rerank = stack.settings.rerank.model_copy(update={"model_path": path, "depth": 3})
    settings = stack.settings.model_copy(update={"rerank": rerank})
    async with api_client(settings, tenant=tenant) as c:
        job = await ingest(c, DOCS)
        assert job["status"] == "succeeded"
        resp = await c.post("/v1/search", json={"query": "fox", "top_k": 4, "rerank": True})
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["rerank_ms"] is not None
        head = [h["explanation"]["rerank_score"] for h in body["hits"][:3]]
        assert all(s is not None for s in head)
        assert head == sorted(head, reverse=True)
        assert all(h["explanation"]["rerank_score"] is None for h in body["hits"][3:])


async def test_phrases_and_exclusions_hold_on_milvus(
    client: httpx.AsyncClient, worker: Child
) -> None:
    """The syntax's conditions on the real store: the candidates' texts read by id and
    checked (docs/search.md, Syntax). The dense leg returns every chunk of so small a
    collection, so what the conditions leave is all that shows."""
    job = await ingest(client, DOCS)
    assert job["status"] == "succeeded", job
    for mode in ("semantic", "hybrid"):
        resp = await client.post(
            "/v1/search", json={"query": '"quick brown fox"', "mode": mode, "top_k": 4}
        )
        assert resp.status_code == 200, resp.text
        assert [h["external_id"] for h in resp.json()["hits"]] == ["fox"], mode
        resp = await client.post(
            "/v1/search", json={"query": "fox espresso search -grind", "mode": mode, "top_k": 4}
        )
        assert resp.status_code == 200, resp.text
        found = {h["external_id"] for h in resp.json()["hits"]}
        assert "coffee" not in found
        assert {"fox", "milvus"} <= found, mode


async def test_a_typo_is_corrected_with_a_learned_sparse_encoder(
    client: httpx.AsyncClient, worker: Child
) -> None:
    """BGE-M3's sparse side has no document frequencies: a word is known when the
    tenant's vocabulary (written by the worker, in Postgres) lists it, and a correction
    is encoded by the model (docs/search.md, Typos)."""
    job = await ingest(client, DOCS)
    assert job["status"] == "succeeded", job
    resp = await client.post("/v1/search", json={"query": "espreso grind", "mode": "keyword"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert [(e["query"], e["matched"], e["kind"]) for e in body["expansions"]] == [
        ("espreso", "espresso", "typo")
    ]
    assert body["hits"][0]["external_id"] == "coffee"
    matches = body["hits"][0]["explanation"]["matches"]
    assert [m["matched"] for m in matches] == ["espresso"]
    off = await client.post(
        "/v1/search",
        json={"query": "espreso grind", "mode": "keyword", "typo_tolerance": False},
    )
    assert off.json()["expansions"] == []
