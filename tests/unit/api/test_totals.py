"""Totals, facets and pages through the API (embedded parts): what a query counts does not
move with ``top_k`` or ``offset``, the default total is a lower bound once matches lie
past the window (an exact count on request), and a page past ``candidates`` is refused
(one past the results found is empty: test_search_pages.py)."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest

from hsearch.cache.memory import InMemoryCacheBackend
from tests.unit.api.conftest import Api, api_settings, serve

WINDOW = 8
# 30 documents hold "volcano": more than the window, so only a count finds them all.
VOLCANO = [
    {
        "external_id": f"v{i}",
        "title": f"Volcano {i}",
        "text": f"The volcano number {i} erupted." + " Ash fell." * (i % 4),
        "source": ("atlas", "news", "blog")[i % 3],
        "tags": ["geology", *(["ash"] if i % 2 else [])],
    }
    for i in range(30)
]
OTHER = [
    {"external_id": f"o{i}", "title": "River", "text": f"A quiet river {i}.", "source": "atlas"}
    for i in range(10)
]


async def ingest(api: Api, documents: list[dict[str, Any]]) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"


async def search(api: Api, **body: Any) -> dict[str, Any]:
    resp = await api.client.post("/v1/search", json={"query": "volcano", **body})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def counted(body: dict[str, Any]) -> tuple[object, ...]:
    return (
        body["total"],
        body["total_exact"],
        body["total_relation"],
        body["total_basis"],
        body["window"],
        body["facets"],
        body["facet_basis"],
    )


async def test_totals_and_facets_do_not_move_with_the_page(tmp_path: Path) -> None:
    # No reuse between requests: every response counts afresh.
    settings = api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW, totals_cache_ttl_s=0)
    async with serve(settings) as api:
        await ingest(api, VOLCANO + OTHER)
        facets = ["source", "tags"]
        first = await search(api, mode="keyword", top_k=1, facets=facets, track_total="exact")
        assert first["total"] == 30
        assert first["total_exact"] is True
        assert first["total_relation"] == "eq"
        assert first["total_basis"] == "matches"
        assert first["window"] == WINDOW
        source = {b["value"]: b["count"] for b in first["facets"][0]["buckets"]}
        assert source == {"atlas": 10, "news": 10, "blog": 10}
        assert first["facet_basis"] == {"unit": "document", "scope": "matches", "exact": True}
        default = await search(api, mode="keyword", top_k=1, facets=facets)
        for top_k, offset in itertools.product((1, 3, WINDOW), (0, 2, WINDOW - 1)):
            page = {"mode": "keyword", "top_k": top_k, "offset": offset, "facets": facets}
            body = await search(api, **page, track_total="exact")
            assert counted(body) == counted(first), (top_k, offset)
            assert len(body["hits"]) == min(top_k, WINDOW - offset)
            assert counted(await search(api, **page)) == counted(default), (top_k, offset)

        # Pages run through the window without repeating or skipping a hit.
        pages = [await search(api, mode="keyword", top_k=3, offset=o) for o in (0, 3, 6)]
        ids = [h["chunk_id"] for page in pages for h in page["hits"]]
        whole = await search(api, mode="keyword", top_k=WINDOW)
        assert ids == [h["chunk_id"] for h in whole["hits"]]

        # Hybrid: every keyword match and the dense leg's window, each chunk once.
        semantic = await search(api, mode="semantic", top_k=WINDOW)
        assert (semantic["total"], semantic["total_relation"]) == (WINDOW, "eq")
        nearest = {h["external_id"] for h in semantic["hits"]}
        hybrid = await search(api, top_k=2, track_total="exact")
        assert hybrid["total_relation"] == "eq"
        assert hybrid["total"] == len({d["external_id"] for d in VOLCANO} | nearest)


async def test_the_default_total_is_a_lower_bound_and_exact_on_request(tmp_path: Path) -> None:
    settings = api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW, totals_cache_ttl_s=0)
    async with serve(settings) as api:
        await ingest(api, VOLCANO + OTHER)
        # Past the window: a lower bound from what is known without counting. The
        # statistics tell that 30 chunks hold "volcano"; the facets count the window.
        bound = await search(api, mode="keyword", top_k=3, facets=["source"])
        assert (bound["total"], bound["total_exact"], bound["total_relation"]) == (30, False, "gte")
        assert bound["total_basis"] == "matches"
        assert bound["facet_basis"] == {"unit": "document", "scope": "window", "exact": False}
        assert sum(b["count"] for b in bound["facets"][0]["buckets"]) == WINDOW
        # The true count of "volcano ash": 30 volcanoes, and ten rivers besides. The bound
        # lies between the window and it.
        ash = {"query": "volcano river", "mode": "keyword", "top_k": 3}
        low = await search(api, **ash)
        true = await search(api, **ash, track_total="exact")
        assert (true["total"], true["total_relation"]) == (40, "eq")
        assert low["total_relation"] == "gte"
        assert WINDOW <= low["total"] <= true["total"]
        # true is the old default, an exact count; false counts the window, as before.
        assert counted(await search(api, **ash, track_total=True)) == counted(true)
        window = await search(api, **ash, track_total=False)
        assert (window["total"], window["total_relation"], window["total_basis"]) == (
            WINDOW,
            "gte",
            "window",
        )
        # Under a filter the tenant's statistics tell nothing: the window only.
        filtered = await search(api, **ash, filter={"source": {"eq": "atlas"}})
        assert (filtered["total"], filtered["total_relation"]) == (WINDOW, "gte")
        # Within the window, the default is exact.
        few = await search(api, query="river", mode="keyword", candidates=20, top_k=3)
        assert (few["total"], few["total_exact"], few["total_relation"]) == (10, True, "eq")


async def test_a_page_past_the_window_is_refused_naming_the_bound(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW)) as api:
        await ingest(api, VOLCANO)
        past = {"query": "volcano", "offset": WINDOW, "top_k": 1}
        resp = await api.client.post("/v1/search", json=past)
        assert resp.status_code == 422
        assert resp.json()["detail"].startswith("offset: pages end at the window of 8 results")
        deeper = await search(api, offset=WINDOW, candidates=2 * WINDOW, top_k=WINDOW)
        assert len(deeper["hits"]) == WINDOW


async def test_a_count_limit_makes_the_total_a_lower_bound(tmp_path: Path) -> None:
    settings = api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW, count_limit=20)
    async with serve(settings) as api:
        await ingest(api, VOLCANO)
        body = await search(api, mode="keyword", top_k=1, facets=["source"], track_total="exact")
        # Twenty matches counted; the statistics know of 30 chunks holding "volcano".
        assert (body["total"], body["total_exact"], body["total_relation"]) == (30, False, "gte")
        assert body["facet_basis"] == {"unit": "document", "scope": "matches", "exact": False}
        assert sum(b["count"] for b in body["facets"][0]["buckets"]) == 20


async def test_facets_count_chunks_when_asked(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path)) as api:
        long = {**VOLCANO[0], "text": "The volcano erupted. " * 400}  # several chunks
        await ingest(api, [long])
        by_document = await search(api, mode="keyword", facets=["source"])
        by_chunk = await search(api, mode="keyword", facets=["source"], facet_unit="chunk")
    chunks = by_chunk["facets"][0]["buckets"][0]["count"]
    assert by_document["facets"][0]["buckets"] == [
        {"value": "atlas", "count": 1, "from": None, "to": None}
    ]
    assert chunks == by_document["total"] > 1
    assert by_chunk["facet_basis"]["unit"] == "chunk"


async def test_track_total_false_counts_the_window_only(tmp_path: Path) -> None:
    settings = api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW, totals_cache_ttl_s=0)
    async with serve(settings) as api:
        await ingest(api, VOLCANO + OTHER)
        body = await search(api, mode="keyword", top_k=3, facets=["source"], track_total=False)
        assert (body["total"], body["total_relation"], body["total_basis"]) == (
            WINDOW,
            "gte",
            "window",
        )
        assert body["facet_basis"] == {"unit": "document", "scope": "window", "exact": False}
        assert sum(b["count"] for b in body["facets"][0]["buckets"]) == WINDOW
        assert len(body["hits"]) == 3


@pytest.mark.parametrize("cached", [False, True], ids=["no-result-cache", "result-cache"])
@pytest.mark.parametrize("tracking", ["exact", "bound"])
async def test_a_write_is_counted_by_the_next_search(
    tmp_path: Path, cached: bool, tracking: str
) -> None:
    """Totals and facets reused between pages (exact counts) are those of the tenant's
    current data: after an ingest, a delete or a metadata change, the same query counts
    afresh, and a result cache keeps what was counted last, never what was counted
    before."""
    settings = api_settings(tmp_path, candidates=WINDOW, max_top_k=WINDOW)
    assert settings.search.totals_cache_ttl_s > 0  # counts are reused between pages
    async with serve(settings, cache=InMemoryCacheBackend() if cached else None) as api:
        await ingest(api, OTHER)
        query = {
            "query": "zeppelin",
            "mode": "keyword",
            "top_k": 5,
            "facets": ["source"],
            "track_total": tracking,
        }

        async def zeppelin() -> tuple[int, list[str], dict[str, int]]:
            resp = await api.client.post("/v1/search", json=query)
            assert resp.status_code == 200, resp.text
            body = resp.json()
            buckets = {b["value"]: b["count"] for b in body["facets"][0]["buckets"]}
            return body["total"], [h["external_id"] for h in body["hits"]], buckets

        assert await zeppelin() == (0, [], {})
        await ingest(api, [{"external_id": "z1", "text": "The zeppelin.", "source": "news"}])
        assert await zeppelin() == (1, ["z1"], {"news": 1})
        assert await zeppelin() == (1, ["z1"], {"news": 1})  # reused, or served, as is

        resp = await api.client.patch("/v1/documents/z1", json={"source": "atlas"})
        assert resp.status_code == 200, resp.text
        assert await zeppelin() == (1, ["z1"], {"atlas": 1})

        resp = await api.client.delete("/v1/documents/z1")
        assert resp.status_code in (200, 204), resp.text
        assert await zeppelin() == (0, [], {})
