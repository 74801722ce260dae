"""The search box through the API (embedded parts): typos, prefixes, phrases, exclusions,
either-or and synonyms, each changing results as docs/search.md says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hsearch.cache.memory import InMemoryCacheBackend
from tests.unit.api.conftest import Api, api_settings, ingest, serve

DOCUMENTS = [
    {"external_id": "flat", "text": "Heat transfer on a flat plate in laminar flow."},
    {"external_id": "turbulent", "text": "Turbulent flow over a flat plate: skin friction."},
    {"external_id": "scattered", "text": "The plate was flat; flow separation came later."},
    {"external_id": "curved", "text": "Pressure on a curved plate at supersonic speed."},
    {"external_id": "hyper", "text": "Hypersonic boundary layer transition on cones."},
    {"external_id": "cars", "text": "An automobile engine test bench."},
    {"external_id": "city", "text": "Traffic in New York during the winter."},
]


async def search(api: Api, query: str, **body: Any) -> dict[str, Any]:
    resp = await api.client.post(
        "/v1/search", json={"query": query, "mode": "keyword", "top_k": 10, **body}
    )
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def ids(body: dict[str, Any]) -> list[str]:
    return [h["external_id"] for h in body["hits"]]


async def test_a_mistyped_word_finds_what_the_right_one_finds(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    clean = await search(api, "hypersonic boundary")
    typed = await search(api, "hypersnic boundry")
    assert ids(typed) == ids(clean) == ["hyper"]
    assert {(e["query"], e["matched"], e["kind"], e["typos"]) for e in typed["expansions"]} == {
        ("hypersnic", "hypersonic", "typo", 1),
        ("boundry", "boundary", "typo", 1),
    }
    matches = typed["hits"][0]["explanation"]["matches"]
    assert {(m["query"], m["matched"]) for m in matches} == {
        ("hypersnic", "hypersonic"),
        ("boundry", "boundary"),
    }
    assert "<em>Hypersonic</em>" in typed["hits"][0]["snippet"]
    # A swap of two letters is one typo.
    assert ids(await search(api, "hypresonic")) == ["hyper"]
    # Off per request: the mistyped words match nothing.
    off = await search(api, "hypersnic boundry", typo_tolerance=False)
    assert off["hits"] == []
    assert off["expansions"] == []


async def test_short_words_and_known_words_are_taken_as_typed(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    # Below 5 letters no typo is allowed ("plat" is not "plate").
    assert (await search(api, "plat"))["hits"] == []
    # A word the documents hold is not corrected into another ("flow" stays "flow").
    body = await search(api, "flow")
    assert body["expansions"] == []


async def test_a_weighted_typo_ranks_below_the_word_as_typed(api: Api) -> None:
    await ingest(
        api,
        [
            {"external_id": "exact", "text": "wing planform"},
            {"external_id": "typo", "text": "wings planforn"},
        ],
    )
    body = await search(api, "planforn wing")
    # "planforn" is held by one document: it is taken as typed, not corrected.
    assert body["expansions"] == []
    body = await search(api, "planfrom wing")
    assert [e["matched"] for e in body["expansions"]] == ["planform"]
    assert ids(body)[0] == "exact"


async def test_prefix_matches_the_last_word_as_a_start(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    # Too far from any word or stem to be a typo ("hypers": "hyper" against "hyperson").
    assert (await search(api, "hypers"))["hits"] == []
    body = await search(api, "hypers", prefix=True)
    assert ids(body) == ["hyper"]
    assert body["expansions"][0]["kind"] == "prefix"
    assert body["expansions"][0]["matched"] == "hypersonic"


async def test_a_phrase_needs_its_words_adjacent_and_an_excluded_word_never_shows(
    api: Api,
) -> None:
    await ingest(api, DOCUMENTS)
    plain = ids(await search(api, "flat plate"))
    assert {"flat", "turbulent", "scattered"} <= set(plain)
    phrase = ids(await search(api, '"flat plate"'))
    assert set(phrase) == {"flat", "turbulent"}, "'plate was flat' holds no phrase"
    excluded = await search(api, '"flat plate" -turbulent')
    assert ids(excluded) == ["flat"]
    # The keyword leg returned every match of its words: the conditions leave the total.
    assert (excluded["total"], excluded["total_exact"]) == (1, True)
    # The same in hybrid mode: the dense leg's candidates meet the conditions too.
    hybrid = await search(api, '"flat plate" -turbulent', mode="hybrid")
    assert ids(hybrid) == ["flat"]


async def test_either_relaxes_every_phrase_to_one_of_them(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    both = ids(await search(api, '"flat plate" "curved plate"'))
    assert both == [], "no document holds both phrases"
    either = ids(await search(api, '"flat plate" | "curved plate"'))
    assert set(either) == {"flat", "turbulent", "curved"}


async def test_malformed_syntax_is_read_as_plain_words(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    for query in ['"flat plate', "flat plate |", "-", '| "" -', "-flat -plate"]:
        resp = await api.client.post("/v1/search", json={"query": query, "mode": "keyword"})
        assert resp.status_code == 200, (query, resp.text)
    assert set(ids(await search(api, '"flat plate'))) == set(ids(await search(api, "flat plate")))


async def test_synonyms_are_stored_applied_explained_and_invalidate_results(api: Api) -> None:
    await ingest(api, DOCUMENTS)
    assert (await api.client.get("/v1/synonyms")).json() == {"synonyms": []}
    assert ids(await search(api, "car")) == []
    rules = {"synonyms": [{"words": ["car", "automobile"]}, {"from": "nyc", "to": ["new york"]}]}
    resp = await api.client.put("/v1/synonyms", json=rules)
    assert resp.status_code == 200, resp.text
    assert (await api.client.get("/v1/synonyms")).json() == rules
    body = await search(api, "cars")
    assert ids(body) == ["cars"]
    assert body["hits"][0]["explanation"]["matches"] == [
        {"query": "car", "matched": "automobile", "kind": "synonym", "typos": 0}
    ]
    assert ids(await search(api, "automobile")) == ["cars"]
    assert ids(await search(api, "nyc traffic"))[0] == "city"
    # One-way: "new york" does not search for "nyc" (nothing holds it anyway), and
    # rules removed stop applying at once (the cached result is not served).
    assert (await api.client.put("/v1/synonyms", json={"synonyms": []})).status_code == 200
    assert ids(await search(api, "cars")) == []


async def test_bad_synonyms_are_refused_naming_the_rule(api: Api) -> None:
    for rules, field in [
        ([{"words": ["car"]}], "synonyms[0].words"),
        ([{"words": ["car", "auto"]}, {"from": "nyc"}], "synonyms[1]"),
        ([{"from": "the", "to": ["a"]}], "synonyms[0].from"),
    ]:
        resp = await api.client.put("/v1/synonyms", json={"synonyms": rules})
        assert resp.status_code == 422, resp.text
        assert resp.json()["errors"][0]["field"] == field
    assert (await api.client.get("/v1/synonyms")).json() == {"synonyms": []}


async def test_new_synonyms_are_not_answered_from_the_result_cache(tmp_path: Path) -> None:
    async with serve(api_settings(tmp_path), cache=InMemoryCacheBackend()) as api:
        await ingest(api, DOCUMENTS)
        first = await search(api, "car")
        again = await search(api, "car")
        assert (ids(first), again["cached"]) == ([], True)
        rules = {"synonyms": [{"words": ["car", "automobile"]}]}
        assert (await api.client.put("/v1/synonyms", json=rules)).status_code == 200
        after = await search(api, "car")
        assert (ids(after), after["cached"]) == (["cars"], False)
