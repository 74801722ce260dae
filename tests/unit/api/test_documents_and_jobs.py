"""The document and job API on embedded parts: read, list and delete documents; list
jobs newest first, by status, page by page."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import select

from hsearch.config import WebhookSettings
from hsearch.db.models import JobItem, LexicalCorpusStats
from hsearch.ingestion.api.documents import DELETED_AFTER_SUBMISSION
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.api.conftest import Api, api_settings, serve

TENANT = "default"
DOCS = [
    {"external_id": f"doc/{i:02d}", "text": f"Volcano {i} erupted. " * (1 + i % 3), "source": s}
    for i, s in enumerate(["atlas", "news", "atlas", "blog", "atlas"])
]


async def submit(api: Api, documents: list[dict[str, Any]], *, run: bool = True) -> uuid.UUID:
    resp = await api.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    job_id = uuid.UUID(resp.json()["job_id"])
    if run:
        assert api.services.indexing().process_job(job_id) == "succeeded"
    return job_id


def stored_rows(api: Api) -> dict[str, ChunkRecord]:
    """The rows of the app's store (the fixture's in-memory one), by chunk id."""
    store = api.services.store
    assert isinstance(store, InMemoryVectorStore)
    return store._rows


def corpus_chunks(api: Api) -> int:
    with api.services.sessions() as session:
        stats = session.get(LexicalCorpusStats, TENANT)
        return stats.chunk_count if stats else 0


async def test_read_and_list_documents(api: Api) -> None:
    await submit(api, DOCS)
    one = (await api.client.get("/v1/documents/doc/01")).json()
    assert (one["external_id"], one["status"], one["source"]) == ("doc/01", "indexed", "news")
    assert one["chunk_count"] >= 1
    assert one["pending_jobs"] == []

    first = (await api.client.get("/v1/documents", params={"limit": 2})).json()
    assert [d["external_id"] for d in first["documents"]] == ["doc/00", "doc/01"]
    second = (
        await api.client.get("/v1/documents", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    assert [d["external_id"] for d in second["documents"]] == ["doc/02", "doc/03"]
    atlas = (await api.client.get("/v1/documents", params={"source": "atlas"})).json()
    assert [d["external_id"] for d in atlas["documents"]] == ["doc/00", "doc/02", "doc/04"]
    assert atlas["next_cursor"] is None

    missing = await api.client.get("/v1/documents/nope")
    assert missing.status_code == 404
    assert missing.json()["error"] == "document_not_found"
    assert "'nope'" in missing.json()["detail"]


async def test_a_submitted_document_is_pending_until_indexed(api: Api) -> None:
    job_id = await submit(api, DOCS[:1], run=False)
    pending = (await api.client.get("/v1/documents/doc/00")).json()
    assert (pending["status"], pending["chunk_count"]) == ("pending", 0)
    assert pending["pending_jobs"] == [str(job_id)]
    api.services.indexing().process_job(job_id)
    indexed = (await api.client.get("/v1/documents/doc/00")).json()
    assert (indexed["status"], indexed["pending_jobs"]) == ("indexed", [])


async def test_delete_removes_chunks_metadata_and_statistics(api: Api) -> None:
    await submit(api, DOCS[:2])
    only_first = corpus_chunks(api)
    await submit(api, DOCS[2:3])
    chunks = api.services.store.count(tenant_id=TENANT)
    gone = (await api.client.get("/v1/documents/doc/02")).json()["chunk_count"]

    resp = await api.client.delete("/v1/documents/doc/02")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {"external_id": "doc/02", "deleted_chunks": gone, "superseded_jobs": []}
    assert api.services.store.count(tenant_id=TENANT) == chunks - gone
    assert corpus_chunks(api) == only_first, "its statistics are counted out"
    assert (await api.client.get("/v1/documents/doc/02")).status_code == 404
    hits = (await api.client.post("/v1/search", json={"query": "Volcano 2"})).json()["hits"]
    assert "doc/02" not in {h["external_id"] for h in hits}
    again = await api.client.delete("/v1/documents/doc/02")
    assert again.status_code == 404
    assert (await api.client.get("/v1/documents/doc/00")).json()["status"] == "indexed"


async def test_deleting_a_pending_document_skips_its_submissions(api: Api) -> None:
    """A delete comes after the submissions still waiting in jobs: they are never
    indexed, whichever job runs first; the other documents of their jobs are."""
    first = await submit(api, DOCS[:2], run=False)
    second = await submit(api, [{**DOCS[0], "text": "A newer text."}], run=False)
    assert (await api.client.get("/v1/documents/doc/00")).json()["status"] == "pending"

    resp = await api.client.delete("/v1/documents/doc/00")
    assert resp.status_code == 200, resp.text
    assert resp.json() == {
        "external_id": "doc/00",
        "deleted_chunks": 0,
        "superseded_jobs": sorted([str(first), str(second)]),
    }
    assert api.services.indexing().process_job(second) == "succeeded"
    assert api.services.indexing().process_job(first) == "succeeded"
    assert (await api.client.get("/v1/documents/doc/00")).status_code == 404
    assert (await api.client.get("/v1/documents/doc/01")).json()["status"] == "indexed"
    job = (await api.client.get(f"/v1/jobs/{first}")).json()
    assert (job["indexed"], job["skipped"], job["total"]) == (1, 1, 2)
    with api.services.sessions() as session:
        reasons = session.scalars(
            select(JobItem.error).where(JobItem.external_id == "doc/00")
        ).all()
    assert reasons == [DELETED_AFTER_SUBMISSION] * 2
    assert {r.external_id for r in stored_rows(api).values()} == {"doc/01"}
    again = await api.client.delete("/v1/documents/doc/00")
    assert again.status_code == 404


async def test_deleting_an_indexed_document_also_skips_its_pending_version(api: Api) -> None:
    await submit(api, DOCS[:1])
    newer = await submit(api, [{**DOCS[0], "text": "A newer text."}], run=False)
    resp = await api.client.delete("/v1/documents/doc/00")
    assert resp.json()["superseded_jobs"] == [str(newer)]
    assert resp.json()["deleted_chunks"] >= 1
    assert api.services.indexing().process_job(newer) == "succeeded"
    assert (await api.client.get("/v1/documents/doc/00")).status_code == 404
    assert api.services.store.count(tenant_id=TENANT) == 0


async def test_a_pending_document_cannot_be_patched(api: Api) -> None:
    job_id = await submit(api, DOCS[:1], run=False)
    resp = await api.client.patch("/v1/documents/doc/00", json={"tags": ["x"]})
    assert resp.status_code == 409, resp.text
    assert resp.json()["error"] == "document_pending"
    assert str(job_id) in resp.json()["detail"]
    missing = await api.client.patch("/v1/documents/nope", json={"tags": ["x"]})
    assert missing.status_code == 404


async def test_list_jobs_newest_first_by_status_page_by_page(api: Api) -> None:
    done = [await submit(api, [doc]) for doc in DOCS[:3]]
    queued = await submit(api, DOCS[3:4], run=False)
    every = (await api.client.get("/v1/jobs")).json()
    assert [j["id"] for j in every["jobs"]] == [str(queued), *(str(j) for j in reversed(done))]
    assert every["next_cursor"] is None
    waiting = (await api.client.get("/v1/jobs", params={"status": "queued"})).json()
    assert [j["id"] for j in waiting["jobs"]] == [str(queued)]

    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await api.client.get("/v1/jobs", params=params)).json()
        seen += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [j["id"] for j in every["jobs"]]

    bad = await api.client.get("/v1/jobs", params={"cursor": "not-a-cursor"})
    assert bad.status_code == 422
    assert bad.json()["detail"].startswith("cursor: ")
    wrong = await api.client.get("/v1/jobs", params={"status": "done"})
    assert wrong.status_code == 422
    assert "status" in wrong.json()["detail"]


async def test_cancel_a_queued_job(api: Api) -> None:
    job_id = await submit(api, DOCS[:2], run=False)
    resp = await api.client.post(f"/v1/jobs/{job_id}/cancel")
    assert resp.status_code == 200, resp.text
    assert (resp.json()["status"], resp.json()["indexed"]) == ("cancelled", 0)
    assert api.services.indexing().process_job(job_id) == "cancelled"
    assert api.services.store.count(tenant_id=TENANT) == 0
    assert (await api.client.get("/v1/documents/doc/00")).status_code == 404
    again = await api.client.post(f"/v1/jobs/{job_id}/cancel")
    assert again.status_code == 409
    assert again.json()["error"] == "job_finished"
    unknown = await api.client.post(f"/v1/jobs/{uuid.uuid4()}/cancel")
    assert unknown.status_code == 404


async def test_a_job_says_when_its_documents_became_searchable(api: Api) -> None:
    queued = await submit(api, DOCS[:1], run=False)
    waiting = (await api.client.get(f"/v1/jobs/{queued}")).json()
    assert waiting["searchable_at"] is None
    api.services.indexing().process_job(queued)
    done = (await api.client.get(f"/v1/jobs/{queued}")).json()
    assert done["status"] == "succeeded"
    assert done["searchable_at"] == done["finished_at"] is not None


async def test_update_fields_without_reencoding(api: Api) -> None:
    await submit(api, DOCS[:2])
    before = {cid: row.dense for cid, row in stored_rows(api).items()}
    body = {"source": "gazette", "tags": ["geology"], "metadata": {"year": 2001}}
    resp = await api.client.patch("/v1/documents/doc/00", json=body)
    assert resp.status_code == 200, resp.text
    assert (resp.json()["source"], resp.json()["tags"]) == ("gazette", ["geology"])
    assert resp.json()["metadata"] == {"year": 2001}
    rows = stored_rows(api)
    assert {cid: row.dense for cid, row in rows.items()} == before, "no re-encoding"
    found = await api.client.post(
        "/v1/search",
        json={
            "query": "Volcano",
            "filter": {"tags": {"contains": "geology"}},
            "facets": ["source"],
        },
    )
    assert {h["external_id"] for h in found.json()["hits"]} == {"doc/00"}
    assert found.json()["facets"][0]["buckets"][0]["value"] == "gazette"
    # The same submission as now stored is unchanged: nothing to re-index.
    job = await submit(
        api, [{**DOCS[0], "source": "gazette", "tags": ["geology"], "metadata": {"year": 2001}}]
    )
    assert (await api.client.get(f"/v1/jobs/{job}")).json()["skipped"] == 1
    refused = await api.client.patch("/v1/documents/doc/00", json={"text": "new text"})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("text: ")
    missing = await api.client.patch("/v1/documents/nope", json={"source": "x"})
    assert missing.status_code == 404


async def test_metadata_patch_is_a_json_merge_patch(api: Api) -> None:
    meta = {"year": 2001, "rank": 3, "author": {"name": "Ada", "org": "Lab"}}
    await submit(api, [{**DOCS[0], "metadata": meta}, DOCS[1]])

    patch = {"metadata": {"rank": None, "topic": "geology", "author": {"org": "Uni"}}}
    resp = await api.client.patch("/v1/documents/doc/00", json=patch)
    assert resp.status_code == 200, resp.text
    merged = {"year": 2001, "topic": "geology", "author": {"name": "Ada", "org": "Uni"}}
    assert resp.json()["metadata"] == merged
    assert (await api.client.get("/v1/documents/doc/00")).json()["metadata"] == merged
    rows = stored_rows(api).values()
    assert [r.metadata for r in rows if r.external_id == "doc/00"] == [merged], "the chunks"

    async def found(flt: dict[str, Any]) -> set[str]:
        body = {"query": "Volcano", "filter": flt}
        resp = await api.client.post("/v1/search", json=body)
        assert resp.status_code == 200, resp.text
        return {h["external_id"] for h in resp.json()["hits"]}

    assert await found({"metadata.year": {"eq": 2001}}) == {"doc/00"}, "a key not named stays"
    assert await found({"metadata.rank": {"eq": 3}}) == set(), "a null removes the key"
    assert await found({"metadata.topic": {"eq": "geology"}}) == {"doc/00"}
    assert await found({"metadata.author.org": {"eq": "Uni"}}) == {"doc/00"}
    # An empty object changes nothing; the stored content hash follows the merged value.
    same = await api.client.patch("/v1/documents/doc/00", json={"metadata": {}})
    assert same.json()["metadata"] == merged
    job = await submit(api, [{**DOCS[0], "metadata": merged}])
    assert (await api.client.get(f"/v1/jobs/{job}")).json()["skipped"] == 1


async def test_a_lang_the_analyzer_does_not_read_is_refused(api: Api) -> None:
    documents = [
        {**DOCS[0], "lang": "en-GB"},
        {**DOCS[1], "lang": "und"},
        {**DOCS[2], "lang": "english"},
        {**DOCS[3], "lang": "klingon"},
    ]
    resp = await api.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert [e["field"] for e in body["errors"]] == ["documents[2].lang", "documents[3].lang"]
    assert "did you mean 'en'" in body["errors"][0]["message"]
    assert "ISO 639-1" in body["errors"][1]["message"]
    assert body["detail"].startswith("documents[2].lang: ")
    assert api.queue.sent == [], "nothing is accepted"
    accepted = await api.client.post("/v1/documents", json={"documents": documents[:2]})
    assert accepted.status_code == 202, accepted.text


async def test_a_webhook_needs_a_server_secret_and_the_job_shows_its_delivery(
    api: Api, tmp_path: Path
) -> None:
    body = {"documents": DOCS[:1], "webhook_url": "https://hooks.example.com/x"}
    refused = await api.client.post("/v1/documents", json=body)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("webhook_url:")

    secret = "whsec_" + base64.b64encode(b"s" * 32).decode()
    settings = api_settings(tmp_path / "hooks").model_copy(
        update={"webhooks": WebhookSettings.model_validate({"secret": secret})}
    )
    async with serve(settings) as hooked:
        accepted = await hooked.client.post("/v1/documents", json=body)
        assert accepted.status_code == 202, accepted.text
        job = (await hooked.client.get(accepted.json()["status_url"])).json()
        assert job["webhook"] == {
            "url": "https://hooks.example.com/x",
            "attempts": 0,
            "delivered_at": None,
            "next_attempt_at": None,
            "error": None,
        }
        private = {**body, "webhook_url": "http://10.0.0.1/x"}
        refused = await hooked.client.post("/v1/documents", json=private)
        assert refused.status_code == 422
        assert "not a public address" in refused.json()["detail"]


async def test_delete_by_filter_is_a_job_the_job_list_shows(api: Api) -> None:
    await submit(api, DOCS)
    resp = await api.client.post(
        "/v1/documents:delete", json={"filter": {"source": {"eq": "atlas"}}}
    )
    assert resp.status_code == 202, resp.text
    # Its documents are selected when it starts: until then the total is not known.
    assert (resp.json()["status"], resp.json()["total"]) == ("queued", None)
    job_id = uuid.UUID(resp.json()["job_id"])
    queued = (await api.client.get(f"/v1/jobs/{job_id}")).json()
    assert (queued["status"], queued["total"], queued["processed"]) == ("queued", None, 0)
    assert api.services.indexing().process_job(job_id) == "succeeded"
    job = (await api.client.get(f"/v1/jobs/{job_id}")).json()
    assert (job["kind"], job["total"], job["deleted"], job["processed"]) == ("delete", 3, 3, 3)
    left = (await api.client.get("/v1/documents")).json()["documents"]
    assert [d["external_id"] for d in left] == ["doc/01", "doc/03"]

    refused = await api.client.post("/v1/documents:delete", json={})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("filter: empty")
    refused = await api.client.post("/v1/documents:delete", json={"filter": {"source": "x"}})
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("filter.source:")

    everything = await api.client.post("/v1/documents:delete", json={"all": True})
    assert everything.status_code == 202
    assert api.services.indexing().process_job(uuid.UUID(everything.json()["job_id"])) == (
        "succeeded"
    )
    assert (await api.client.get("/v1/documents")).json()["documents"] == []

    # Cancelled before it started, it never selected anything: still not known.
    again = (await api.client.post("/v1/documents:delete", json={"all": True})).json()
    cancelled = (await api.client.post(f"/v1/jobs/{again['job_id']}/cancel")).json()
    assert (cancelled["status"], cancelled["total"], cancelled["deleted"]) == ("cancelled", None, 0)
