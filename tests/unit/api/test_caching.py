"""The result cache through the API: `cached` in responses, and every committed write
(ingest, metadata patch, delete) seen by the next search."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hsearch.cache.guard import CacheKind, CacheOutcome
from hsearch.cache.memory import InMemoryCacheBackend
from tests.unit.api.conftest import Api, api_settings, serve

DOCS = [
    {"external_id": "fox", "title": "Fox", "text": "The quick brown fox.", "source": "a"},
    {"external_id": "dog", "title": "Dog", "text": "The lazy dog sleeps.", "source": "a"},
]


@pytest.fixture
async def cached_api(tmp_path: Path) -> AsyncIterator[Api]:
    async with serve(api_settings(tmp_path), cache=InMemoryCacheBackend()) as served:
        yield served


async def ingest(api: Api, docs: list[dict[str, Any]]) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": docs})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(api.queue.sent[-1]) == "succeeded"


async def search(api: Api, **body: Any) -> dict[str, Any]:
    resp = await api.client.post("/v1/search", json={"query": "fox dog", **body})
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


def hits(body: dict[str, Any]) -> dict[str, str]:
    return {h["external_id"]: h["source"] for h in body["hits"]}


async def test_responses_say_cached_and_writes_are_seen_at_once(cached_api: Api) -> None:
    api = cached_api
    await ingest(api, DOCS)
    first = await search(api, facets=["source"])
    second = await search(api, facets=["source"])
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["hits"] == first["hits"]
    assert second["facets"] == first["facets"]
    assert abs(sum(second["timings"].values()) - second["took_ms"]) <= 2.0

    # An ingest: a new document.
    await ingest(api, [{"external_id": "cat", "title": "Cat", "text": "A fox and a dog."}])
    body = await search(api, facets=["source"])
    assert not body["cached"]
    assert set(hits(body)) == {"fox", "dog", "cat"}
    assert (await search(api, facets=["source"]))["cached"]

    # A metadata patch: filters and facets see the new value.
    resp = await api.client.patch("/v1/documents/fox", json={"source": "b"})
    assert resp.status_code == 200, resp.text
    body = await search(api, facets=["source"])
    assert not body["cached"]
    assert hits(body)["fox"] == "b"

    # A delete.
    assert (await api.client.delete("/v1/documents/dog")).status_code in (200, 204)
    body = await search(api, facets=["source"])
    assert not body["cached"]
    assert "dog" not in hits(body)

    counters = api.services.cache_counters
    assert counters.count(CacheKind.RESULT, CacheOutcome.HIT) == 2
    assert counters.count(CacheKind.RESULT, CacheOutcome.ERROR) == 0


async def test_without_a_cache_nothing_is_cached(api: Api) -> None:
    await ingest(api, DOCS)
    await search(api)
    body = await search(api)
    assert body["cached"] is False
    assert body["timings"]["cache_ms"] == 0.0
