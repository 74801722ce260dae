"""The OpenAPI document tells the truth: the allowed values of every enum, and every
numeric bound of ``POST /v1/search`` equal to what the server enforces."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import Settings
from hsearch.types import FusionMethod, Leg, LegStatus, SearchMode, TotalRelation, TotalTracking
from tests.unit.api.conftest import Api, api_settings, serve

BASE_QUERY: dict[str, Any] = {"query": "rivers", "top_k": 1}
BOUND_KEYWORDS = {"minimum", "maximum", "minLength", "maxLength"}


async def openapi(api: Api) -> dict[str, Any]:
    resp = await api.client.get("/openapi.json")
    assert resp.status_code == 200
    document: dict[str, Any] = resp.json()
    return document


def refs(schema: object) -> set[str]:
    """The component names ``schema`` refers to, at any depth."""
    if isinstance(schema, dict):
        found = {schema["$ref"].rsplit("/", 1)[-1]} if "$ref" in schema else set()
        return found.union(*(refs(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(refs(v) for v in schema))
    return set()


async def test_enums_list_their_values(api: Api) -> None:
    schemas = (await openapi(api))["components"]["schemas"]
    for enum in (FusionMethod, SearchMode, LegStatus, TotalTracking, TotalRelation):
        assert schemas[enum.__name__]["enum"] == [member.value for member in enum]
    # The registered sources: the store's legs, then the graph leg.
    assert schemas["Leg"]["enum"] == [*(member.value for member in Leg), "graph"]
    request = schemas["SearchRequest"]["properties"]
    # A tracking by name, or a boolean as before the default changed; the default bound.
    assert refs(request["track_total"]) == {"TotalTracking"}
    assert {"type": "boolean"} in request["track_total"]["anyOf"]
    assert request["track_total"]["default"] == "bound"
    assert refs(request["fusion"]) == {"FusionMethod"}
    assert refs(request["mode"]) == {"SearchMode"}
    assert refs(request["weights"]) == {"Leg"}
    response = schemas["SearchResponse"]["properties"]
    assert refs(response["method"]) == {"FusionMethod"}
    assert refs(response["total_relation"]) == {"TotalRelation"}
    assert "total_relation" in schemas["SearchResponse"]["required"]
    assert refs(response["degraded"]) == refs(response["weights"]) == {"Leg"}
    legs = schemas["LegRead"]["properties"]
    assert refs(legs["leg"]) == {"Leg"}
    assert refs(legs["status"]) == {"LegStatus"}


def scalar_schemas(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The non-null alternatives of a property (``int | None`` is an ``anyOf``)."""
    for alternative in schema.get("anyOf", [schema]):
        if alternative.get("type") != "null":
            yield alternative


def advertised_bounds(document: dict[str, Any]) -> list[tuple[str, str, str, float]]:
    """``(field, type, keyword, value)`` for every bound on the search request body,
    leg weights included (as ``weights.<leg>``)."""
    body = document["paths"]["/v1/search"]["post"]["requestBody"]["content"]
    (name,) = refs(body["application/json"]["schema"])
    properties = document["components"]["schemas"][name]["properties"]
    found = []
    for field, schema in properties.items():
        for scalar in scalar_schemas(schema):
            targets = [(field, scalar)]
            if isinstance(scalar.get("additionalProperties"), dict):
                targets = [(f"{field}.{leg.value}", scalar["additionalProperties"]) for leg in Leg]
            for target, bounded in targets:
                found += [
                    (target, bounded["type"], keyword, value)
                    for keyword, value in bounded.items()
                    if keyword in BOUND_KEYWORDS or keyword.startswith("exclusive")
                ]
    return found


def probe(field: str, kind: str, keyword: str, bound: float) -> tuple[object, object]:
    """A value at ``bound`` (must be accepted) and one just past it (must be refused)."""
    if kind == "string":
        length = int(bound)
        past = length + 1 if keyword == "maxLength" else length - 1
        return "x" * length, "x" * past
    if kind == "integer":  # integers are strict: 100.0 is not one
        at = int(bound)
        return at, at + 1 if keyword == "maximum" else at - 1
    beyond = bound + 0.001 if keyword == "maximum" else bound - 0.001
    return bound, beyond


def request_with(field: str, value: object, settings: Settings) -> dict[str, Any]:
    if field == "offset":
        # An offset is bounded by the request's window: at its largest, max_candidates.
        return {**BASE_QUERY, "offset": value, "candidates": settings.search.max_candidates}
    if field.startswith("weights."):
        leg = field.split(".", 1)[1]
        # The other leg keeps a weight, so a 0 here is not refused for another reason.
        return {**BASE_QUERY, "weights": {other.value: 1.0 for other in Leg} | {leg: value}}
    return {**BASE_QUERY, field: value}


@pytest.mark.parametrize(
    "limits",
    [
        {},
        {
            "max_top_k": 7,
            "candidates": 20,
            "max_candidates": 33,
            # Not the defaults, and long enough that no probe's search misses them.
            "leg_timeout_s": 20.0,
            "max_leg_timeout_s": 29.0,
        },
    ],
    ids=["defaults", "configured"],
)
async def test_every_advertised_bound_is_the_enforced_one(
    tmp_path: Path, limits: dict[str, Any]
) -> None:
    settings = api_settings(tmp_path, **limits)
    async with serve(settings) as api:
        bounds = advertised_bounds(await openapi(api))
        by_field = {(field, keyword): value for field, _, keyword, value in bounds}
        # The settings are the one source of the server's limits.
        assert by_field[("top_k", "maximum")] == settings.search.max_top_k
        assert by_field[("candidates", "maximum")] == settings.search.max_candidates
        assert by_field[("offset", "maximum")] == settings.search.max_candidates - 1
        assert by_field[("leg_timeout_ms", "maximum")] / 1000 == pytest.approx(
            settings.search.max_leg_timeout_s, abs=0.001
        )
        assert {field for field, _ in by_field} >= {
            "query",
            "top_k",
            "offset",
            "rrf_k",
            "candidates",
            "leg_timeout_ms",
            "weights.dense",
            "weights.sparse",
        }
        for field, kind, keyword, bound in bounds:
            assert keyword in BOUND_KEYWORDS, f"{field}: no probe for {keyword}"
            accepted, refused = probe(field, kind, keyword, bound)
            resp = await api.client.post("/v1/search", json=request_with(field, accepted, settings))
            if (field, keyword) == ("leg_timeout_ms", "minimum") and resp.status_code == 503:
                # Accepted, but 1 ms for encoding and both legs may well be spent before
                # the legs start: they then time out, and no leg answering is a 503.
                assert resp.json()["error"] == "search_unavailable", resp.text
                assert "no time left" in resp.json()["detail"], resp.text
            else:
                assert resp.status_code == 200, (field, keyword, bound, resp.text)
            resp = await api.client.post("/v1/search", json=request_with(field, refused, settings))
            assert resp.status_code == 422, (field, keyword, bound, resp.text)
            assert resp.json()["error"] == "invalid_request"
            assert field in resp.json()["detail"]
