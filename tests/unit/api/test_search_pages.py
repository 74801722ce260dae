"""Where search pages end: an offset at or past ``candidates`` (the depth asked for) is
refused naming ``offset``; one within it but past the results found is an empty page;
``cursor`` and an explicit ``offset`` together are refused naming both."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.unit.api.conftest import Api, api_settings, serve

CANDIDATES = 8
DOCS = [
    {"external_id": f"v{i}", "title": f"Volcano {i}", "text": f"The volcano {i} erupted."}
    for i in range(3)
]


async def ingest(api: Api, documents: list[dict[str, Any]]) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"


async def test_a_page_past_the_results_found_is_empty_and_past_candidates_refused(
    tmp_path: Path,
) -> None:
    async with serve(api_settings(tmp_path, candidates=CANDIDATES, max_top_k=CANDIDATES)) as api:
        await ingest(api, DOCS)
        body = {"query": "volcano", "mode": "keyword", "top_k": 2}
        first = (await api.client.post("/v1/search", json=body)).json()
        assert first["window"] == len(DOCS) < CANDIDATES

        for offset in (len(DOCS), CANDIDATES - 1):
            resp = await api.client.post("/v1/search", json={**body, "offset": offset})
            assert resp.status_code == 200, resp.text
            page = resp.json()
            assert (page["hits"], page["next_cursor"]) == ([], None)
            assert (page["window"], page["total"]) == (first["window"], first["total"])

        past = await api.client.post("/v1/search", json={**body, "offset": CANDIDATES})
        assert past.status_code == 422, past.text
        assert past.json()["detail"].startswith(
            f"offset: pages end at the window of {CANDIDATES} results"
        )
        assert [e["field"] for e in past.json()["errors"]] == ["offset"]


async def test_cursor_and_offset_together_are_refused_naming_both(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path, candidates=CANDIDATES, max_top_k=CANDIDATES)) as api:
        await ingest(api, DOCS)
        body = {"query": "volcano", "mode": "keyword", "top_k": 1}
        cursor = (await api.client.post("/v1/search", json=body)).json()["next_cursor"]
        assert cursor is not None

        for offset in (0, 1):  # sent, even as the default: which one was meant?
            both = {**body, "cursor": cursor, "offset": offset}
            resp = await api.client.post("/v1/search", json=both)
            assert resp.status_code == 422, resp.text
            assert resp.json()["error"] == "invalid_request"
            assert [e["field"] for e in resp.json()["errors"]] == ["offset", "cursor"]
            assert resp.json()["detail"].startswith("offset: ")

        alone = await api.client.post("/v1/search", json={**body, "cursor": cursor})
        assert alone.status_code == 200, alone.text
        assert [h["external_id"] for h in alone.json()["hits"]] != []
