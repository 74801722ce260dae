"""``GET /v1/documents/{id}?include=text``: the full text as it was submitted, equal to
the ingested text for a document of many overlapping chunks (whose offsets point into
it), only ever the caller's tenant's, 404 for an unknown id, 422 for an unknown
``include``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import httpx
import pytest

from hsearch.config import IngestSettings
from tests.unit.api.conftest import Api, api_settings, ingest, serve

# Many sentences past the 40-token chunks below, with what a normalising store would
# change: runs of spaces, tabs, CRLF, leading and trailing white space, a decomposed
# accent (e + U+0301), CJK, an emoji, a zero-width joiner.
TEXT = (
    "  Volcanoes form where magma rises.\tThe crust\r\nbreaks   open at plate boundaries. "
    + " ".join(
        f"Sentence {i} tells of lava, ash and the cafe\u0301 by the crater." for i in range(12)
    )
    + " 火山は日本に多い。富士山もその一つです。 Eruptions 🌋 shape islands\u200d. \n"
)


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    settings = api_settings(tmp_path).model_copy(
        update={"ingest": IngestSettings(chunk_max_tokens=40, chunk_overlap_tokens=20)}
    )
    async with serve(settings) as served:
        yield served


async def read(client: httpx.AsyncClient, external_id: str, **params: Any) -> httpx.Response:
    return await client.get(f"/v1/documents/{external_id}", params=params)


async def test_the_text_of_a_document_of_many_chunks_is_the_ingested_text(api: Api) -> None:
    await ingest(api, [{"external_id": "kb/volcano", "title": "Volcanoes", "text": TEXT}])
    resp = await read(api.client, "kb/volcano", include="text")
    assert resp.status_code == 200, resp.text
    doc = resp.json()
    assert doc["text"] == TEXT
    assert doc["chunk_count"] > 3

    # The chunks, as searches return them, lie at their offsets in that text, and the
    # overlapping chunks together cover it from the first word to the last.
    body = {
        "query": "volcano lava magma crater eruptions 火山",
        "mode": "semantic",
        "top_k": 100,
        "candidates": 100,
        "filter": {"external_id": {"eq": "kb/volcano"}},
    }
    found = await api.client.post("/v1/search", json=body)
    hits = found.json()["hits"]
    assert len(hits) == doc["chunk_count"]
    covered = [False] * len(TEXT)
    for hit in hits:
        assert TEXT[hit["char_start"] : hit["char_end"]] == hit["text"]
        covered[hit["char_start"] : hit["char_end"]] = [True] * (
            hit["char_end"] - hit["char_start"]
        )
    overlapping = sorted((h["char_start"], h["char_end"]) for h in hits)
    assert any(nxt[0] < end for (_, end), nxt in pairwise(overlapping))
    uncovered = "".join(c for c, seen in zip(TEXT, covered, strict=True) if not seen)
    assert uncovered.strip() == ""  # only the white space between chunks


async def test_the_text_only_when_asked_for(api: Api) -> None:
    await ingest(api, [{"external_id": "a", "text": "Alpha text."}])
    assert (await read(api.client, "a")).json()["text"] is None
    for params in ({"include": "text"}, {"include": "text,"}, {"include": ["text", "text"]}):
        assert (await read(api.client, "a", **params)).json()["text"] == "Alpha text."
    # The list and a patch answer without it.
    listed = (await api.client.get("/v1/documents")).json()["documents"]
    assert [d["text"] for d in listed] == [None]
    patched = await api.client.patch("/v1/documents/a", json={"source": "s"})
    assert patched.json()["text"] is None


@pytest.mark.parametrize("include", ["chunks", "text,metadata", "TEXT"])
async def test_an_unknown_include_is_a_422_listing_what_is_allowed(api: Api, include: str) -> None:
    await ingest(api, [{"external_id": "a", "text": "Alpha text."}])
    resp = await read(api.client, "a", include=include)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "invalid_request"
    assert body["errors"][0]["field"] == "include"
    assert body["errors"][0]["message"].endswith("; allowed: text")
    assert "Alpha" not in resp.text


async def test_an_unknown_document_is_a_404(api: Api) -> None:
    resp = await read(api.client, "nope", include="text")
    assert resp.status_code == 404, resp.text
    assert resp.json()["error"] == "document_not_found"
    assert "'nope'" in resp.json()["detail"]


async def test_a_pending_document_has_no_text_yet(api: Api) -> None:
    resp = await api.client.post(
        "/v1/documents", json={"documents": [{"external_id": "p", "text": "Later."}]}
    )
    assert resp.status_code == 202, resp.text
    pending = (await read(api.client, "p", include="text")).json()
    assert (pending["status"], pending["text"]) == ("pending", None)


async def test_a_tenant_reads_only_its_own_texts(api: Api) -> None:
    other = api.services.tenancy.ensure_tenant("other", actor="test").id
    key = api.services.tenancy.create_key(other, scopes=["ingest", "search"], actor="test").key
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        await ingest(api, [{"external_id": "shared", "text": "Default's own secret text."}])
        await ingest(api, [{"external_id": "only-default", "text": "Nobody else reads this."}])
        await ingest(api, [{"external_id": "shared", "text": "Other's text."}], client=client)

        mine = await read(client, "shared", include="text")
        assert mine.json()["text"] == "Other's text."
        theirs = await read(client, "only-default", include="text")
        assert theirs.status_code == 404, theirs.text
        assert theirs.json()["error"] == "document_not_found"
        assert "Nobody" not in theirs.text

    assert (await read(api.client, "shared", include="text")).json()["text"] == (
        "Default's own secret text."
    )


async def test_a_search_token_reads_the_texts_its_filter_allows(api: Api) -> None:
    await ingest(
        api,
        [
            {"external_id": "a", "text": "Team A's text.", "tags": ["team-a"]},
            {"external_id": "b", "text": "Team B's text.", "tags": ["team-b"]},
        ],
    )
    minted = await api.client.post("/v1/tokens", json={"filter": {"tags": {"contains": "team-a"}}})
    assert minted.status_code == 201, minted.text
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {minted.json()['token']}"
        assert (await read(client, "a", include="text")).json()["text"] == "Team A's text."
        refused = await read(client, "b", include="text")
        assert refused.status_code == 404
        assert "Team B" not in refused.text
