"""The client's search: one hit per document unless told otherwise, the other request
fields sent as given; and a document read with its text. Against the real app (served
by uvicorn in a thread) and over a scripted transport for what is sent."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hsearch.client.http import ApiClient, ApiError
from hsearch.config import IngestSettings
from hsearch.local.processes import wait_until
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import LiveApi, live_api

LONG = " ".join(f"The river {i} floods the valley in spring." for i in range(40))
DOCS = [
    {"external_id": "long", "text": LONG, "metadata": {"year": 2001}},
    {"external_id": "short", "text": "A river floods.", "metadata": {"year": 2020}},
]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LiveApi]:
    """The live API, with chunks small enough that the long document has several."""
    settings = api_settings(tmp_path / "server").model_copy(
        update={
            "ingest": IngestSettings(
                chunk_max_tokens=32, chunk_overlap_tokens=8, flush_min_interval_s=0
            )
        }
    )
    with live_api(settings) as served:
        yield served


def upload(client: ApiClient, api: LiveApi) -> None:
    accepted = client.upload("".join(json.dumps(d) + "\n" for d in DOCS).encode())
    wait_until(lambda: client.job(accepted.job_id).finished, timeout=30, what="the job")
    assert client.job(accepted.job_id).status == "succeeded"


def test_search_groups_by_document_unless_told_not_to(api: LiveApi) -> None:
    with ApiClient(api.url, api_key=api.key) as client:
        upload(client, api)
        grouped = client.search("river floods", top_k=50)
        names = [h["external_id"] for h in grouped["hits"]]
        assert sorted(names) == ["long", "short"]  # one hit per document
        long_hit = next(h for h in grouped["hits"] if h["external_id"] == "long")
        assert long_hit["matching_chunks"] > 1

        chunks = client.search("river floods", top_k=50, group_by_document=False)
        assert len(chunks["hits"]) == long_hit["matching_chunks"] + 1
        assert all(h["matching_chunks"] == 1 for h in chunks["hits"])

        newest = client.search("river floods", sort=["metadata.year:desc"], mode="keyword")
        assert [h["external_id"] for h in newest["hits"]] == ["short", "long"]
        assert newest["sort"]["basis"] == "window"

        with pytest.raises(ApiError) as refused:
            client.search("river", sort=["body"])
        assert (refused.value.status, refused.value.code) == (422, "invalid_request")
        assert refused.value.errors[0].field == "sort[0].field"


def test_a_document_with_its_text(api: LiveApi) -> None:
    with ApiClient(api.url, api_key=api.key) as client:
        upload(client, api)
        assert client.document("long")["text"] is None
        assert client.document("long", include_text=True)["text"] == LONG


def test_what_the_search_sends() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"hits": []})

    client = ApiClient("http://api.test", api_key="k", transport=httpx.MockTransport(handler))
    client.search("q")
    client.search("q", top_k=3, group_by_document=False, filter={"source": {"eq": "a"}})
    bodies: list[dict[str, Any]] = [json.loads(r.content) for r in sent]
    assert bodies == [
        {"query": "q", "top_k": 10, "group_by_document": True},
        {"query": "q", "top_k": 3, "group_by_document": False, "filter": {"source": {"eq": "a"}}},
    ]
    assert {(r.method, r.url.path, r.headers["content-type"]) for r in sent} == {
        ("POST", "/v1/search", "application/json")
    }
