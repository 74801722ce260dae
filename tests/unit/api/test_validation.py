"""Invalid requests: a 422 whose body names the field, ``{"error": code, "detail": ...}``.

Pydantic's checks (types, enums, bounds) and the services' own (filters, duplicates,
reranking without a model) answer in the same shape.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.unit.api.conftest import Api

DOC = {"external_id": "fox", "title": "Fox", "text": "The quick brown fox."}


def assert_names(body: dict[str, Any], field: str, *, code: str = "invalid_request") -> None:
    assert body["error"] == code, body
    assert field in body["detail"], body


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "x", "top_k": 0}, "top_k"),
        ({"query": "x", "offset": -1}, "offset"),
        ({"query": "x", "mode": "fuzzy"}, "mode"),
        ({"query": "x", "fusion": "magic"}, "fusion"),
        ({"query": "x", "weights": {"graph": 1.0}}, "weights"),
        ({"query": "x", "weights": {"dense": 2.0}}, "weights.dense"),
        ({"query": "x", "rrf_k": 0}, "rrf_k"),
        ({"query": "x", "colour": "red"}, "colour"),
        ({"top_k": 3}, "query"),
        # Strict numbers: a boolean or a string is not a number (lax parsing took true as 1).
        ({"query": "x", "top_k": True}, "top_k"),
        ({"query": "x", "top_k": "5"}, "top_k"),
        ({"query": "x", "top_k": 5.5}, "top_k"),
        ({"query": "x", "offset": True}, "offset"),
        ({"query": "x", "candidates": True}, "candidates"),
        ({"query": "x", "rrf_k": True}, "rrf_k"),
        ({"query": "x", "leg_timeout_ms": True}, "leg_timeout_ms"),
        ({"query": "x", "min_score": True}, "min_score"),
        ({"query": "x", "weights": {"dense": True}}, "weights.dense"),
        # Strict booleans: "no", "false" or 1 is not a boolean (lax parsing read them).
        ({"query": "x", "group_by_document": "no"}, "group_by_document"),
        ({"query": "x", "track_total": 1}, "track_total"),
        ({"query": "x", "track_total": "false"}, "track_total"),
        ({"query": "x", "track_total": "maybe"}, "track_total"),
        ({"query": "x", "highlight": "off"}, "highlight"),
        ({"query": "x", "rerank": "yes"}, "rerank"),
    ],
)
async def test_invalid_searches_name_the_field(
    api: Api, request_body: dict[str, object], field: str
) -> None:
    resp = await api.client.post("/v1/search", json=request_body)
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert_names(body, field)
    assert any(field in e["field"] for e in body["errors"]), body


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
@pytest.mark.parametrize(
    ("template", "field"),
    [
        ('{"query": "x", "min_score": %s}', "min_score"),
        ('{"query": "x", "weights": {"dense": %s}}', "weights.dense"),
        ('{"query": "x", "facets": [{"field": "created_at", "ranges": [{"from": %s}]}]}',
         "facets[0].ranges[0].from"),
        ('{"query": "x", "filter": {"created_at": {"gt": %s}}}', "filter.created_at.gt"),
    ],
)  # fmt: skip
async def test_non_finite_numbers_are_refused_naming_the_field(
    api: Api, template: str, field: str, number: str
) -> None:
    # Python's JSON reader accepts these literals; the server must not.
    body = (template % number).encode()
    resp = await api.client.post(
        "/v1/search", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert field in body["detail"], resp.text
    if not field.startswith(("facets", "filter")):  # typed numbers: the schema refuses them
        assert any(field in e["field"] for e in body["errors"]), body


async def test_whole_numbers_still_pass_where_a_float_is_expected(api: Api) -> None:
    body = {"query": "x", "min_score": 0, "weights": {"dense": 1, "sparse": 0}}
    resp = await api.client.post("/v1/search", json=body)
    assert resp.status_code == 200, resp.text


async def test_unknown_fusion_and_leg_list_what_is_allowed(api: Api) -> None:
    resp = await api.client.post("/v1/search", json={"query": "x", "fusion": "magic"})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert all(method in detail for method in ("rrf", "score", "adaptive")), detail
    resp = await api.client.post("/v1/search", json={"query": "x", "weights": {"colour": 1}})
    assert resp.status_code == 422
    detail = resp.json()["detail"]
    assert "'dense'" in detail
    assert "'sparse'" in detail


async def test_page_larger_than_the_candidates_names_candidates(api: Api) -> None:
    # Cross-field: the schema cannot say it, the service does.
    resp = await api.client.post("/v1/search", json={"query": "x", "top_k": 5, "candidates": 2})
    assert resp.status_code == 422
    assert resp.json() == {
        "error": "invalid_request",
        "detail": "candidates: must be between top_k (5) and 500",
        "errors": [{"field": "candidates", "message": "must be between top_k (5) and 500"}],
    }


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
async def test_an_empty_or_blank_query_is_refused_in_one_shape(api: Api, query: str) -> None:
    # The schema refuses "", the planner a blank query: the client sees the same body.
    resp = await api.client.post("/v1/search", json={"query": query})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert set(body) == {"error", "detail", "errors"}
    assert body["error"] == "invalid_request"
    assert [e["field"] for e in body["errors"]] == ["query"]
    assert body["detail"] == f"query: {body['errors'][0]['message']}"


async def test_a_service_refusal_lists_the_field_its_message_names(api: Api) -> None:
    # Services name the field first in their messages (no errors list of their own).
    resp = await api.client.post(
        "/v1/search", json={"query": "x", "filter": {"and": [{"tags": {"gt": 1}}]}}
    )
    assert resp.status_code == 422
    [error] = resp.json()["errors"]
    assert resp.json()["detail"] == f"{error['field']}: {error['message']}"


async def test_weights_that_silence_the_mode_name_weights(api: Api) -> None:
    resp = await api.client.post(
        "/v1/search",
        json={"query": "x", "mode": "semantic", "weights": {"dense": 0.0, "sparse": 1.0}},
    )
    assert resp.status_code == 422
    assert_names(resp.json(), "weights")


async def test_invalid_filter_is_a_422_naming_the_part(api: Api) -> None:
    resp = await api.client.post(
        "/v1/search", json={"query": "x", "filter": {"and": [{"tags": {"gt": 1}}]}}
    )
    assert resp.status_code == 422
    assert_names(resp.json(), "filter.and[0].tags", code="invalid_filter")
    resp = await api.client.post(
        "/v1/search", json={"query": "x", "filter": {"tenant_id": {"eq": "x"}}}
    )
    assert resp.status_code == 422
    assert "tenant_id" in resp.json()["detail"]


async def test_rerank_without_a_configured_model_is_a_422(api: Api) -> None:
    resp = await api.client.post("/v1/search", json={"query": "fox", "rerank": True})
    assert resp.status_code == 422
    assert_names(resp.json(), "rerank")


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({"documents": []}, "documents"),
        ({"documents": [{"title": "x", "text": "y"}]}, "documents[0].external_id"),
        ({"documents": [{"external_id": "a", "text": ""}]}, "documents[0].text"),
        ({"documents": [{"external_id": "a", "text": "x", "colour": 1}]}, "documents[0].colour"),
        ({"documents": [{"external_id": "a", "text": "x", "tags": [""]}]}, "documents[0].tags[0]"),
        ({"docs": [DOC]}, "documents"),
    ],
)
async def test_invalid_batches_name_the_field(
    api: Api, request_body: dict[str, object], field: str
) -> None:
    resp = await api.client.post("/v1/documents", json=request_body)
    assert resp.status_code == 422
    assert_names(resp.json(), field)
    assert api.queue.sent == []


async def test_duplicate_external_ids_in_one_batch_are_rejected(api: Api) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": [DOC, DOC]})
    assert resp.status_code == 422
    assert_names(resp.json(), "documents[1].external_id")


async def test_a_malformed_job_id_names_the_path_parameter(api: Api) -> None:
    resp = await api.client.get("/v1/jobs/not-a-uuid")
    assert resp.status_code == 422
    assert_names(resp.json(), "job_id")
    resp = await api.client.get(f"/v1/jobs/{uuid.uuid4()}")
    assert resp.status_code == 404
    assert resp.json()["error"] == "job_not_found"
