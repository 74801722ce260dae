"""One error contract (docs/api.md, Errors): every 4xx and 5xx is ``{"error", "detail"}``,
each route lists its errors in the OpenAPI document with that body, and no stack trace
reaches a client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch_api.errors import INTERNAL_ERROR_DETAIL
from hsearch_api.main import create_app
from tests.unit.api.conftest import Api, api_settings, default_tenant_key, ingest

COMMON = {"401", "403", "422", "429", "500", "503"}
ERROR_REF = "#/components/schemas/ErrorBody"


async def openapi(api: Api) -> dict[str, Any]:
    document: dict[str, Any] = (await api.client.get("/openapi.json")).json()
    return document


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in document["paths"].items()
        for method, op in item.items()
    ]


async def test_every_error_response_of_every_route_is_the_error_body(api: Api) -> None:
    document = await openapi(api)
    assert "HTTPValidationError" not in document["components"]["schemas"]
    for method, path, op in operations(document):
        errors = {s: r for s, r in op["responses"].items() if s[0] in "45"}
        assert "500" in errors, (method, path)
        for status, response in errors.items():
            if (path, status) == ("/readyz", "503"):  # the readiness report
                continue
            schema = response["content"]["application/json"]["schema"]
            assert schema == {"$ref": ERROR_REF}, (method, path, status)
        if path.startswith("/v1/"):
            assert errors.keys() >= COMMON, (method, path, sorted(errors))
            if "requestBody" in op:
                assert "413" in errors, (method, path)
        for status in ("429", "503"):
            if status in errors and path != "/readyz":
                assert "Retry-After" in errors[status]["headers"], (method, path)


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/documents/{external_id}", "404"),
        ("DELETE", "/v1/keys/{key_id}", "404"),
        ("POST", "/v1/jobs/{job_id}/cancel", "409"),
        ("POST", "/v1/documents:ndjson", "415"),
    ],
)
async def test_routes_list_their_own_errors(api: Api, method: str, path: str, status: str) -> None:
    document = await openapi(api)
    op = document["paths"][path][method.lower()]
    assert status in op["responses"]


async def test_the_error_body_schema(api: Api) -> None:
    schema = (await openapi(api))["components"]["schemas"]["ErrorBody"]
    assert set(schema["required"]) == {"error", "detail"}
    assert set(schema["properties"]) == {"error", "detail", "errors"}


@pytest.mark.parametrize(
    "path", ["/v1/search", "/v1/documents", "/v1/documents:delete", "/v1/keys"]
)
async def test_main_routes_carry_request_examples(api: Api, path: str) -> None:
    document = await openapi(api)
    body = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    name = body["schema"]["$ref"].rsplit("/", 1)[-1]
    examples = document["components"]["schemas"][name]["examples"]
    assert examples
    for example in examples:  # each is a request the server accepts
        if path == "/v1/search":
            resp = await api.client.post(path, json=example)
            assert resp.status_code == 200, (example, resp.text)


async def test_unknown_routes_and_methods_answer_in_the_contract(api: Api) -> None:
    resp = await api.client.get("/v1/nowhere")
    assert resp.status_code == 404
    assert resp.json() == {"error": "not_found", "detail": "Not Found"}
    resp = await api.client.get("/v1/search")
    assert resp.status_code == 405
    assert resp.json() == {"error": "method_not_allowed", "detail": "Method Not Allowed"}
    assert resp.headers["allow"] == "POST"


async def test_a_body_that_is_not_json_is_a_422_in_the_contract(api: Api) -> None:
    resp = await api.client.post(
        "/v1/search", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422
    assert resp.json()["error"] == "invalid_request"
    assert resp.json()["detail"]


@pytest.mark.parametrize("media_type", ["text/plain", "application/x-www-form-urlencoded"])
async def test_a_json_body_sent_as_another_type_is_refused_saying_which(
    api: Api, media_type: str
) -> None:
    resp = await api.client.post(
        "/v1/search", content=b'{"query": "x"}', headers={"content-type": media_type}
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["detail"] == (
        f"request: the body must be sent as Content-Type: application/json (it was {media_type})"
    )
    fine = await api.client.post(
        "/v1/search",
        content=b'{"query": "x"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert fine.status_code == 200, fine.text


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"{not json", "at line 1, column 2 (character 1)"),
        (b'{"query": "x",\n "top_k": }', "at line 2, column 11 (character 25)"),
        (b"[1, 2", "at line 1, column 6 (character 5)"),
    ],
)
async def test_a_body_that_is_not_json_says_so_and_where(api: Api, body: bytes, where: str) -> None:
    resp = await api.client.post(
        "/v1/search", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422, resp.text
    [error] = resp.json()["errors"]
    assert error["field"] == "request"
    assert error["message"].startswith("the body is not valid JSON: ")
    assert error["message"].endswith(where)
    assert resp.json()["detail"] == f"request: {error['message']}"
    assert "[0]" not in resp.text


async def test_an_unexpected_exception_is_a_500_that_reveals_nothing(tmp_path: Path) -> None:
    settings = api_settings(tmp_path)
    services = build_services(settings, store=InMemoryVectorStore())
    app = create_app(settings, services=services)

    @app.get("/v1/boom")
    def boom() -> None:
        raise RuntimeError("secret: /srv/hsearch/config.py line 12, token hsk_deadbeef")

    try:
        async with LifespanManager(app) as manager:
            default_tenant_key(services)
            transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                resp = await client.get("/v1/boom")
    finally:
        await services.aclose()
    assert resp.status_code == 500
    assert resp.json() == {"error": "internal_error", "detail": INTERNAL_ERROR_DETAIL}
    for leak in ("secret", "Traceback", "RuntimeError", "config.py", "hsk_"):
        assert leak not in resp.text


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT * FROM api_keys", {}, ConnectionRefusedError("db.internal:5432")),
        InterfaceError("SELECT 1", {}, Exception("connection already closed, host db.internal")),
        PoolTimeoutError("QueuePool limit of size 5 overflow 10 reached"),
    ],
)
async def test_a_database_that_cannot_be_reached_is_a_503_to_retry(
    tmp_path: Path, error: Exception
) -> None:
    """Whatever the route, SQLAlchemy's connection errors answer 503 metadata_unavailable
    with Retry-After, naming no host or query; other database errors stay 500."""
    settings = api_settings(tmp_path)
    services = build_services(settings, store=InMemoryVectorStore())
    app = create_app(settings, services=services)

    @app.get("/v1/down")
    def down() -> None:
        raise error

    @app.get("/v1/integrity")
    def integrity() -> None:
        raise IntegrityError("INSERT", {}, Exception("duplicate key"))

    try:
        async with LifespanManager(app) as manager:
            transport = httpx.ASGITransport(app=manager.app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                resp = await client.get("/v1/down")
                other = await client.get("/v1/integrity")
    finally:
        await services.aclose()
    assert resp.status_code == 503
    assert resp.json()["error"] == "metadata_unavailable"
    assert int(resp.headers["Retry-After"]) > 0
    for leak in ("db.internal", "SELECT", "QueuePool"):
        assert leak not in resp.text
    assert other.status_code == 500


# Found by the fuzzer (test_fuzz_openapi.py), each kept here as a regression test.


async def test_a_body_that_is_not_utf8_is_a_422_not_an_undocumented_400(api: Api) -> None:
    resp = await api.client.post(
        "/v1/search", content=b'{"query": "\xff\xfe"}', headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "invalid_request"
    assert resp.json()["errors"] == [
        {"field": "request", "message": "the body is not JSON in UTF-8"}
    ]


async def test_unknown_query_parameters_are_refused_naming_them(api: Api) -> None:
    resp = await api.client.get("/v1/jobs", params={"limt": "5", "status": "queued"})
    assert resp.status_code == 422, resp.text
    body = resp.json()
    assert body["error"] == "invalid_request"
    assert [e["field"] for e in body["errors"]] == ["limt"]
    assert "cursor, limit, status" in body["detail"]
    assert (await api.client.get("/v1/jobs", params={"limit": "5"})).status_code == 200
    resp = await api.client.post("/v1/search", params={"top_k": "3"}, json={"query": "x"})
    assert resp.status_code == 422
    assert "this route takes: none" in resp.json()["detail"]


async def test_a_query_parameter_given_twice_is_refused(api: Api) -> None:
    """Found against the running stack: ``?cursor=a&cursor=b`` was served with the last."""
    resp = await api.client.get("/v1/documents?limit=5&limit=50")
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"] == [
        {"field": "limit", "message": "given 2 times; it takes one value"}
    ]
    assert (await api.client.get("/v1/documents?limit=5")).status_code == 200


async def test_a_list_query_parameter_may_be_given_twice(api: Api) -> None:
    """An optional list (a document's links' ``?type=``) takes each value given."""
    links = [{"target": "b", "type": t} for t in ("cites", "link", "mention")]
    await ingest(api, [{"external_id": "a", "text": "Rivers.", "links": links}])
    resp = await api.client.get("/v1/documents/a/links?type=cites&type=mention")
    assert resp.status_code == 200, resp.text
    assert [x["type"] for x in resp.json()["out"]] == ["cites", "mention"]


async def test_times_carry_their_utc_offset_on_sqlite(api: Api) -> None:
    doc = {"external_id": "a", "text": "Rivers."}
    job = (await api.client.post("/v1/documents", json={"documents": [doc]})).json()
    read = (await api.client.get(job["status_url"])).json()
    assert read["created_at"].endswith(("Z", "+00:00")), read["created_at"]
    listed = (await api.client.get("/v1/jobs")).json()["jobs"][0]
    assert listed["created_at"] == read["created_at"]


async def test_strings_postgres_cannot_keep_are_a_422_naming_the_field(api: Api) -> None:
    """Found against the running stack (tests/e2e): a NUL in a document was a 500 on
    Postgres, while SQLite stores it."""
    doc = {"external_id": "a", "text": "Rivers.", "metadata": {"k": ["x", "a\x00b"]}}
    resp = await api.client.post("/v1/documents", json={"documents": [doc]})
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"][0]["field"] == "documents[0].metadata.k[1]"
    assert "NUL" in resp.json()["detail"]
    ndjson = b'{"external_id": "b", "text": "x\\u0000y"}\n'
    resp = await api.client.post(
        "/v1/documents:ndjson", content=ndjson, headers={"content-type": "application/x-ndjson"}
    )
    assert resp.status_code == 422, resp.text
    assert resp.json()["errors"][0] == {
        "field": "text",
        "line": 1,
        "message": "contains a NUL character (\\u0000), which cannot be stored",
    }
    resp = await api.client.post(
        "/v1/documents:delete", json={"filter": {"source": {"eq": "\x00"}}}
    )
    assert (resp.status_code, resp.json()["errors"][0]["field"]) == (422, "filter.source.eq")
    resp = await api.client.patch("/v1/documents/a", json={"tags": ["ok", "\x00"]})
    assert (resp.status_code, resp.json()["errors"][0]["field"]) == (422, "tags[1]")
    resp = await api.client.post("/v1/keys", json={"scopes": ["search"], "name": "a\x00"})
    assert (resp.status_code, resp.json()["errors"][0]["field"]) == (422, "name")


async def test_numbers_no_store_keeps_are_a_422_naming_the_field(api: Api) -> None:
    """Python's JSON parser reads NaN and integers of any size: accepted, a NaN became
    null in Milvus (and was refused by Postgres), and a 70-bit integer failed every
    write of its document."""
    body = (
        '{"documents": [{"external_id": "a", "text": "Rivers.", '
        '"metadata": {"x": NaN, "n": [1, 1180591620717411303424]}}]}'
    )
    resp = await api.client.post(
        "/v1/documents", content=body, headers={"content-type": "application/json"}
    )
    assert resp.status_code == 422, resp.text
    assert [e["field"] for e in resp.json()["errors"]] == [
        "documents[0].metadata.x",
        "documents[0].metadata.n[1]",
    ]
    assert "not a finite number" in resp.json()["detail"]
    ndjson = b'{"external_id": "b", "text": "Rivers.", "metadata": {"y": Infinity}}\n'
    resp = await api.client.post(
        "/v1/documents:ndjson", content=ndjson, headers={"content-type": "application/x-ndjson"}
    )
    assert resp.status_code == 422, resp.text
    assert (resp.json()["errors"][0]["field"], resp.json()["errors"][0]["line"]) == (
        "metadata.y",
        1,
    )
    await api.client.post("/v1/documents", json={"documents": [{"external_id": "c", "text": "x"}]})
    resp = await api.client.patch(
        "/v1/documents/c",
        content='{"metadata": {"z": -Infinity}}',
        headers={"content-type": "application/json"},
    )
    assert (resp.status_code, resp.json()["errors"][0]["field"]) == (422, "metadata.z")


async def test_deprecated_fields_say_so_in_the_document(api: Api) -> None:
    schemas = (await openapi(api))["components"]["schemas"]
    for model, field in (("SearchResponse", "total_candidates"), ("ReadinessRead", "checks")):
        prop = schemas[model]["properties"][field]
        assert prop["deprecated"] is True
        assert prop["description"].startswith("Deprecated")
