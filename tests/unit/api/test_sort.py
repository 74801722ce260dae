"""``sort`` through the API: the window ordered by a field, cut into pages by offsets and
cursors alike, one hit per document when grouping, stated in the response, part of the
result cache's key and of a cursor's identity, and refused with a 422 naming the clause
when invalid."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.config import IngestSettings
from tests.unit.api.conftest import Api, api_settings, ingest, serve

YEARS: dict[str, int | str | None] = {
    "v0": 2003,
    "v1": None,  # no year: last in either order
    "v2": 1999,
    "v3": 2021,
    "v4": 2010,
    "v5": "",  # empty: no year either
    "v6": 2015,
    "v7": 1987,
}
DOCS = [
    {
        "external_id": name,
        "title": f"Report {name}",
        # Relevance differs from the years: more mentions of "volcano" in some texts.
        "text": "The volcano erupted. " * (1 + i % 3) + f"Entry {name} of the atlas.",
        "source": ["atlas", "news"][i % 2],
        "metadata": {} if year is None else {"year": year},
    }
    for i, (name, year) in enumerate(YEARS.items())
]
WITH_YEAR = sorted((n for n, y in YEARS.items() if isinstance(y, int)), key=lambda n: YEARS[n])  # type: ignore[arg-type,return-value]  # ints only
NO_YEAR = [n for n, y in YEARS.items() if not isinstance(y, int)]
QUERY = {"query": "volcano", "mode": "keyword"}


@pytest.fixture
async def cached_api(tmp_path: Path) -> AsyncIterator[Api]:
    async with serve(api_settings(tmp_path), cache=InMemoryCacheBackend()) as served:
        await ingest(served, DOCS)
        yield served


async def search(api: Api, **body: Any) -> dict[str, Any]:
    resp = await api.client.post("/v1/search", json={**QUERY, **body})
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


def names(body: dict[str, Any]) -> list[str]:
    return [h["external_id"] for h in body["hits"]]


def relevance_positions(order: list[str], in_order: list[str]) -> list[int]:
    return [in_order.index(name) for name in order]


async def test_hits_are_ordered_by_a_metadata_field_missing_last(cached_api: Api) -> None:
    api = cached_api
    plain = await search(api, top_k=len(DOCS))
    assert plain["sort"] is None
    assert set(names(plain)) == set(YEARS)

    newest = await search(api, top_k=len(DOCS), sort=[{"field": "metadata.year", "order": "desc"}])
    assert names(newest)[: len(WITH_YEAR)] == WITH_YEAR[::-1]
    assert set(names(newest)[len(WITH_YEAR) :]) == set(NO_YEAR)
    # Hits without the field keep the relevance order among themselves.
    rest = names(newest)[len(WITH_YEAR) :]
    assert rest == [n for n in names(plain) if n in NO_YEAR]
    assert newest["sort"] == {
        "by": [{"field": "metadata.year", "order": "desc"}, {"field": "_score", "order": "desc"}],
        "basis": "window",
        "window": newest["window"],
    }
    assert newest["window"] == len(DOCS)
    # Sorting changes the order, not what the query found or counted.
    assert (newest["total"], newest["total_basis"]) == (plain["total"], plain["total_basis"])
    assert {h["chunk_id"]: h["score"] for h in newest["hits"]} == {
        h["chunk_id"]: h["score"] for h in plain["hits"]
    }

    oldest = await search(api, top_k=len(DOCS), sort=["metadata.year:asc", "_score"])
    assert names(oldest) == WITH_YEAR + rest


async def test_string_fields_and_relevance_as_a_second_clause(cached_api: Api) -> None:
    api = cached_api
    plain = names(await search(api, top_k=len(DOCS)))
    by_id = await search(api, top_k=len(DOCS), sort=["external_id:desc"])
    assert names(by_id) == sorted(YEARS, reverse=True)
    by_source = names(await search(api, top_k=len(DOCS), sort=["source", "_score:asc"]))
    atlas = [n for n in plain if n in {"v0", "v2", "v4", "v6"}]
    news = [n for n in plain if n not in atlas]
    assert by_source == atlas[::-1] + news[::-1]  # per source, least relevant first
    assert names(await search(api, top_k=len(DOCS), sort=["_score"])) == plain
    assert (await search(api, top_k=len(DOCS), sort=["_score"]))["sort"] is None


async def test_offsets_and_cursors_cut_the_same_sorted_window(cached_api: Api) -> None:
    api = cached_api
    sort = [{"field": "metadata.year", "order": "desc"}]
    whole = names(await search(api, top_k=len(DOCS), sort=sort))

    by_offset: list[str] = []
    for offset in range(0, len(DOCS), 3):
        by_offset += names(await search(api, top_k=3, offset=offset, sort=sort))
    assert by_offset == whole

    page = await search(api, top_k=3, sort=sort)
    by_cursor = names(page)
    # A write between pages: a document newer than every other, and one deleted.
    await ingest(api, [{**DOCS[0], "external_id": "v9", "metadata": {"year": 2099}}])
    while page["next_cursor"] is not None:
        page = await search(api, top_k=3, sort=sort, cursor=page["next_cursor"])
        assert page["cached"] is True  # cut from the first page's snapshot
        assert page["sort"]["by"][0] == {"field": "metadata.year", "order": "desc"}
        by_cursor += names(page)
    assert by_cursor == whole

    # The live list sees the new document first.
    assert names(await search(api, top_k=1, sort=sort)) == ["v9"]


async def test_sorting_applies_to_the_window_only(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path), cache=InMemoryCacheBackend()) as api:
        await ingest(api, DOCS)
        window = 3
        query = {"mode": "hybrid", "top_k": window, "candidates": window}
        first = await search(api, **query)
        plain = names(first)
        assert first["total"] > window  # more were found than the window holds
        assert WITH_YEAR[-1] not in plain  # the newest document is not among the best
        best = await search(api, **query, sort=["metadata.year:desc"])
        # The newest of the 3 best results, not the newest documents found.
        assert set(names(best)) == set(plain)
        assert best["sort"]["window"] == best["window"] == window
        dated = sorted((n for n in plain if n in WITH_YEAR), key=WITH_YEAR.index, reverse=True)
        assert names(best) == dated + [n for n in plain if n not in WITH_YEAR]


async def test_grouping_sorts_one_hit_per_document(tmp_path: Path) -> None:
    settings = api_settings(tmp_path).model_copy(
        update={"ingest": IngestSettings(chunk_max_tokens=16, chunk_overlap_tokens=4)}
    )
    long = [
        {
            "external_id": f"long-{year}",
            "text": " ".join(f"The volcano {year} erupted again in season {i}." for i in range(6)),
            "metadata": {"year": year},
        }
        for year in (2001, 2019, 2007)
    ]
    async with serve(settings) as api:
        await ingest(api, long)
        chunks = await search(api, top_k=20)
        assert len(chunks["hits"]) > len(long)  # several chunks per document match

        grouped = await search(api, top_k=20, group_by_document=True, sort=["metadata.year:desc"])
        assert names(grouped) == ["long-2019", "long-2007", "long-2001"]
        assert all(h["matching_chunks"] > 1 for h in grouped["hits"])
        assert grouped["sort"]["window"] == grouped["window"] == 3

        pages = [
            names(
                await search(
                    api, top_k=1, offset=o, group_by_document=True, sort=["metadata.year:desc"]
                )
            )
            for o in range(3)
        ]
        assert pages == [["long-2019"], ["long-2007"], ["long-2001"]]


async def test_the_sort_is_part_of_the_cache_key_and_of_a_cursors_search(
    cached_api: Api,
) -> None:
    api = cached_api
    plain = await search(api, top_k=2)
    sorted_ = await search(api, top_k=2, sort=["metadata.year:desc"])
    assert sorted_["cached"] is False  # not the unsorted result
    assert names(sorted_) == WITH_YEAR[::-1][:2]
    assert (await search(api, top_k=2, sort=["metadata.year:desc"]))["cached"] is True
    ascending = await search(api, top_k=2, sort=["metadata.year:asc"])
    assert (ascending["cached"], names(ascending)) == (False, WITH_YEAR[:2])
    # Relevance named or not: one search, one cache entry.
    assert (await search(api, top_k=2, sort=["_score"]))["cached"] is True
    assert names(plain) != names(sorted_)

    cases = [
        ({}, {"sort": ["metadata.year:desc"]}),
        ({"sort": ["metadata.year:desc"]}, {}),
        ({"sort": ["metadata.year:desc"]}, {"sort": ["metadata.year:asc"]}),
    ]
    for first, then in cases:
        cursor = (await search(api, top_k=2, **first))["next_cursor"]
        assert cursor is not None
        resp = await api.client.post(
            "/v1/search", json={**QUERY, "top_k": 2, "cursor": cursor, **then}
        )
        assert resp.status_code == 422, resp.text
        assert resp.json()["error"] == "invalid_request"
        assert [e["field"] for e in resp.json()["errors"]] == ["cursor"]


@pytest.mark.parametrize(
    ("sort", "field", "message"),
    [
        (["body"], "sort[0].field", "field 'body' is not sortable; sortable: _score, "),
        ([{"field": "metadata.year", "order": "down"}], "sort[0].order", "unknown order 'down'"),
        (["title", "metadata.year:newest"], "sort[1]", "unknown order 'newest'"),
        (["metadata"], "sort[0].field", "field 'metadata' is a JSON object"),
        ([{"field": "title", "direction": "asc"}], "sort[0]", "unknown key 'direction'"),
        ("metadata.year", "sort", "Input should be a valid list"),
        ([1], "sort[0]", "expected a field"),
    ],
)
async def test_an_invalid_sort_is_a_422_naming_the_clause(
    api: Api, sort: object, field: str, message: str
) -> None:
    resp = await api.client.post("/v1/search", json={**QUERY, "sort": sort})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "invalid_request"
    assert body["errors"][0]["field"] == field, body
    assert message in body["errors"][0]["message"], body


async def test_the_openapi_document_describes_sort(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()["components"]["schemas"]
    assert "sort" in schema["SearchRequest"]["properties"]
    assert "_score" in schema["SearchRequest"]["properties"]["sort"]["description"]
    assert "sort" in schema["SearchResponse"]["required"]
    assert schema["SortRead"]["properties"]["basis"]["const"] == "window"
