"""Filters, facets, pagination, grouping, thresholds and snippets through the API,
against the real stack."""

from __future__ import annotations

from collections import Counter
from typing import Any

import httpx
import pytest

from hsearch.local.processes import Child
from tests.integration.jobs import ingest

pytestmark = pytest.mark.integration

LONG = " ".join(f"Paragraph sentence {i} talks about rivers and mountains." for i in range(80))
DOCS: list[dict[str, Any]] = [
    {
        "external_id": f"d{i}",
        "title": f"Doc {i}",
        "text": f"Short text {i} about rivers.",
        "source": ["wiki", "blog", "docs"][i % 3],
        "tags": [["a"], ["a", "b"], []][i % 3],
        "metadata": {"year": 1990 + 5 * i, "author": {"name": ["Ada", "Grace"][i % 2]}},
    }
    for i in range(9)
] + [
    {
        "external_id": "long",
        "title": "Long",
        "text": LONG,
        "source": "wiki",
        "tags": ["b"],
        "metadata": {"year": 2030},
    }
]


@pytest.fixture
async def corpus(client: httpx.AsyncClient, worker: Child) -> list[dict[str, Any]]:
    job = await ingest(client, DOCS)
    assert job["status"] == "succeeded", job
    return DOCS


async def search(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    resp = await client.post("/v1/search", json={"query": "rivers", **body})
    assert resp.status_code == 200, resp.text
    answer: dict[str, Any] = resp.json()
    return answer


async def test_filter_restricts_every_leg(client: httpx.AsyncClient, corpus: list[Any]) -> None:
    for mode in ("hybrid", "semantic", "keyword"):
        body = await search(client, mode=mode, top_k=50, filter={"source": {"eq": "blog"}})
        assert body["hits"]
        assert {h["source"] for h in body["hits"]} == {"blog"}
    body = await search(
        client,
        mode="semantic",
        top_k=50,
        filter={"and": [{"tags": {"contains": "b"}}, {"metadata.year": {"gte": 2000}}]},
    )
    expected = {
        d["external_id"] for d in DOCS if "b" in d["tags"] and d["metadata"]["year"] >= 2000
    }
    assert {h["external_id"] for h in body["hits"]} == expected


async def test_facets_match_a_brute_force_count(
    client: httpx.AsyncClient, corpus: list[Any]
) -> None:
    # Semantic leg with candidates >= corpus: every chunk is a candidate.
    body = await search(
        client,
        mode="semantic",
        top_k=1,
        candidates=200,
        group_by_document=True,
        facets=[
            "source",
            "tags",
            "metadata.author.name",
            {"field": "metadata.year", "ranges": [{"to": 2000}, {"from": 2000}]},
        ],
    )
    facets = {f["field"]: f for f in body["facets"]}
    assert {b["value"]: b["count"] for b in facets["source"]["buckets"]} == dict(
        Counter(d["source"] for d in DOCS)
    )
    assert {b["value"]: b["count"] for b in facets["tags"]["buckets"]} == dict(
        Counter(t for d in DOCS for t in d["tags"])
    )
    assert facets["tags"]["missing"] == sum(1 for d in DOCS if not d["tags"])
    names = Counter(d["metadata"]["author"]["name"] for d in DOCS if "author" in d["metadata"])
    assert {b["value"]: b["count"] for b in facets["metadata.author.name"]["buckets"]} == dict(
        names
    )
    years = [b["count"] for b in facets["metadata.year"]["buckets"]]
    assert years == [
        sum(d["metadata"]["year"] < 2000 for d in DOCS),
        sum(d["metadata"]["year"] >= 2000 for d in DOCS),
    ]


async def test_pages_neither_repeat_nor_skip(client: httpx.AsyncClient, corpus: list[Any]) -> None:
    # The whole window in one page (the long document is many chunks of the tiny
    # encoder's 126-token window), then the same window three hits at a time.
    whole = await search(client, top_k=60, candidates=60)
    ids = [h["chunk_id"] for h in whole["hits"]]
    assert len(ids) < 60, "the whole list, not a page of it"
    paged: list[str] = []
    for offset in range(0, len(ids) + 3, 3):
        page = await search(client, top_k=3, offset=offset, candidates=60)
        paged += [h["chunk_id"] for h in page["hits"]]
    assert paged == ids
    assert len(set(paged)) == len(paged)


async def test_group_by_document(client: httpx.AsyncClient, corpus: list[Any]) -> None:
    body = await search(client, mode="semantic", top_k=50, candidates=200, group_by_document=True)
    docs = [h["external_id"] for h in body["hits"]]
    assert len(docs) == len(set(docs)) == len(DOCS)
    long_hit = next(h for h in body["hits"] if h["external_id"] == "long")
    assert long_hit["matching_chunks"] > 1
    ungrouped = await search(client, mode="semantic", top_k=50, candidates=200)
    assert len(ungrouped["hits"]) == len(DOCS) - 1 + long_hit["matching_chunks"]


async def test_sort_orders_the_window_by_a_metadata_field(
    client: httpx.AsyncClient, corpus: list[Any]
) -> None:
    # Every document in the window (candidates past the corpus), one hit each, newest
    # first: the years come back from Milvus's JSON field as they were sent.
    sort = [{"field": "metadata.year", "order": "desc"}]
    body = await search(
        client, mode="semantic", top_k=50, candidates=200, group_by_document=True, sort=sort
    )
    newest = sorted(DOCS, key=lambda d: d["metadata"]["year"], reverse=True)
    assert [h["external_id"] for h in body["hits"]] == [d["external_id"] for d in newest]
    assert body["sort"] == {
        "by": [{"field": "metadata.year", "order": "desc"}, {"field": "_score", "order": "desc"}],
        "basis": "window",
        "window": len(DOCS),
    }
    # Pages by offset cut the same sorted list.
    paged: list[str] = []
    for offset in range(0, len(DOCS), 4):
        page = await search(
            client,
            mode="semantic",
            top_k=4,
            offset=offset,
            candidates=200,
            group_by_document=True,
            sort=["metadata.year:desc"],
        )
        paged += [h["external_id"] for h in page["hits"]]
    assert paged == [d["external_id"] for d in newest]
    # Nested paths, strings, ascending.
    by_author = await search(
        client, mode="semantic", top_k=50, candidates=200, sort=["metadata.author.name", "title"]
    )
    authors = [h["metadata"].get("author", {}).get("name") for h in by_author["hits"]]
    named = [a for a in authors if a is not None]
    assert named == sorted(named)
    assert authors[len(named) :] == [None] * (len(authors) - len(named))  # "long" has none


async def test_min_score_threshold(client: httpx.AsyncClient, corpus: list[Any]) -> None:
    body = await search(client, top_k=10)
    cut = body["hits"][2]["score"]
    kept = await search(client, top_k=10, min_score=cut)
    assert [h["chunk_id"] for h in kept["hits"]] == [
        h["chunk_id"] for h in body["hits"] if h["score"] >= cut
    ]
    assert all(h["score"] >= cut for h in kept["hits"])


async def test_snippets_highlight_query_terms(client: httpx.AsyncClient, corpus: list[Any]) -> None:
    body = await search(client, mode="keyword", top_k=3)
    assert all("<em>rivers</em>" in h["snippet"] for h in body["hits"])
    plain = await search(client, mode="keyword", top_k=3, highlight=False)
    assert all(h["snippet"] is None for h in plain["hits"])


async def test_totals_and_facets_count_every_keyword_match_whatever_the_page(
    client: httpx.AsyncClient, corpus: list[Any]
) -> None:
    # A window of two chunks: the sparse leg fills it, and Milvus counts the rest when an
    # exact total is asked for (the collection was flushed when the job ended, so this
    # runs on sealed segments).
    window = {"mode": "keyword", "candidates": 2, "facets": ["source", "tags"]}
    window["track_total"] = "exact"
    grouped = await search(client, **window, top_k=1, group_by_document=True)
    assert (grouped["total"], grouped["total_exact"]) == (len(DOCS), True)
    assert grouped["total_relation"] == "eq"
    assert grouped["total_basis"] == "matches"
    assert grouped["window"] == 2
    assert grouped["facet_basis"] == {"unit": "document", "scope": "matches", "exact": True}
    facets = {f["field"]: f for f in grouped["facets"]}
    assert {b["value"]: b["count"] for b in facets["source"]["buckets"]} == dict(
        Counter(d["source"] for d in DOCS)
    )
    assert {b["value"]: b["count"] for b in facets["tags"]["buckets"]} == dict(
        Counter(t for d in DOCS for t in d["tags"])
    )
    chunks = await search(client, **window, top_k=2)
    long = await search(client, mode="semantic", top_k=50, candidates=200, group_by_document=True)
    long_chunks = next(h for h in long["hits"] if h["external_id"] == "long")["matching_chunks"]
    assert (chunks["total"], chunks["total_exact"]) == (len(DOCS) - 1 + long_chunks, True)
    for top_k, offset in ((1, 0), (1, 1), (2, 0)):
        page = await search(client, **window, top_k=top_k, offset=offset)
        assert (page["total"], page["facets"]) == (chunks["total"], chunks["facets"])
    # By default nothing is counted past the window: a lower bound, the facets the window's.
    default = {**window, "track_total": "bound"}
    for grouping in (False, True):
        bound = await search(client, **default, top_k=1, group_by_document=grouping)
        exact = grouped if grouping else chunks
        assert bound["total_relation"] == "gte"
        assert bound["window"] <= bound["total"] <= exact["total"]
        assert bound["facet_basis"]["scope"] == "window"
    past = await client.post(
        "/v1/search", json={"query": "rivers", **window, "top_k": 1, "offset": 2}
    )
    assert past.status_code == 422
    assert "window of 2 results" in past.json()["detail"]
