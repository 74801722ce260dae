"""Authentication through the real app: the tenant comes from the Bearer key only;
missing, invalid, expired and revoked keys are 401 with WWW-Authenticate; a suspended
tenant or a missing scope is 403; every route names its scope; a tenant admin manages
its own keys only; an operator acts for a named tenant, each time audited; no key is
ever logged."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from hsearch.db.models import ApiKey
from hsearch.types import Scope, TenantStatus
from tests.unit.api.conftest import Api

TENANT = "default"
JOB = uuid.uuid4()
KEY = uuid.uuid4()

TOKEN = "token"  # listed by the routes that also accept a search token

# Every /v1 route and the scopes it accepts (any one of them is enough).
ROUTES: list[tuple[str, str, dict[str, Any] | None, set[str]]] = [
    ("POST", "/v1/search", {"query": "fox"}, {Scope.SEARCH, TOKEN}),
    ("POST", "/v1/answer", {"query": "fox"}, {Scope.SEARCH, TOKEN}),
    (
        "POST",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "fox"}]},
        {Scope.SEARCH, TOKEN},
    ),
    ("POST", "/v1/documents", {"documents": [{"external_id": "a", "text": "x"}]}, {Scope.INGEST}),
    ("POST", "/v1/documents:delete", {"filter": {"source": "x"}}, {Scope.INGEST}),
    ("POST", "/v1/documents:ndjson", None, {Scope.INGEST}),
    ("GET", "/v1/documents", None, {Scope.SEARCH, Scope.INGEST, TOKEN}),
    ("GET", "/v1/documents/a", None, {Scope.SEARCH, Scope.INGEST, TOKEN}),
    ("GET", "/v1/documents/a/links", None, {Scope.SEARCH, Scope.INGEST, TOKEN}),
    ("PATCH", "/v1/documents/a", {"tags": ["t"]}, {Scope.INGEST}),
    ("DELETE", "/v1/documents/a", None, {Scope.INGEST}),
    ("GET", "/v1/jobs", None, {Scope.INGEST}),
    ("GET", f"/v1/jobs/{JOB}", None, {Scope.INGEST}),
    ("POST", f"/v1/jobs/{JOB}/cancel", None, {Scope.INGEST}),
    ("POST", "/v1/keys", {"scopes": ["search"]}, {Scope.ADMIN}),
    ("GET", "/v1/keys", None, {Scope.ADMIN}),
    ("DELETE", f"/v1/keys/{KEY}", None, {Scope.ADMIN}),
    ("POST", "/v1/tokens", {"filter": {"tags": {"contains": "t"}}}, {Scope.SEARCH, Scope.ADMIN}),
    ("GET", "/v1/stats", None, {Scope.ADMIN}),
    ("GET", "/v1/synonyms", None, {Scope.ADMIN}),
    ("PUT", "/v1/synonyms", {"synonyms": []}, {Scope.ADMIN}),
    ("GET", "/v1/settings", None, {Scope.SEARCH, Scope.INGEST}),
    ("GET", "/v1/communities", None, {Scope.SEARCH, Scope.INGEST}),
    ("GET", "/v1/communities/L0-x", None, {Scope.SEARCH, Scope.INGEST}),
    ("PATCH", "/v1/settings", {"text_links": ["mentions"]}, {Scope.INGEST}),
]


def key_of(api: Api, *scopes: Scope, tenant: str = TENANT, **kwargs: Any) -> str:
    return api.services.tenancy.create_key(tenant, scopes=scopes, actor="test", **kwargs).key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def anonymous(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with api.anonymous() as client:
        yield client


async def call(
    client: httpx.AsyncClient, method: str, path: str, body: Any, headers: dict[str, str]
) -> httpx.Response:
    return await client.request(method, path, json=body, headers=headers)


async def test_every_v1_route_is_in_the_scope_table_and_declares_it(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    served = {
        (method.upper(), path): [
            {scheme: sorted(scopes) for scheme, scopes in requirement.items()}
            for requirement in operation.get("security", [])
        ]
        for path, operations in document["paths"].items()
        if path.startswith("/v1/")
        for method, operation in operations.items()
    }
    template = {
        str(JOB): "{job_id}",
        str(KEY): "{key_id}",
        "/v1/documents/a": "/v1/documents/{external_id}",
        "/v1/communities/L0-x": "/v1/communities/{community_id}",
    }

    def templated(path: str) -> str:
        for value, name in template.items():
            path = path.replace(value, name)
        return path

    listed = {(m, templated(p)): [{"ApiKey": sorted(a)}] for m, p, _, a in ROUTES}
    assert served == listed
    assert document["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"


async def test_no_key_is_401_with_a_bearer_challenge(anonymous: httpx.AsyncClient) -> None:
    for method, path, body, _ in ROUTES:
        resp = await call(anonymous, method, path, body, {})
        assert resp.status_code == 401, (method, path, resp.text)
        assert resp.json()["error"] == "unauthenticated"
        assert "Authorization: Bearer" in resp.json()["detail"]
        assert resp.headers["www-authenticate"] == 'Bearer realm="hsearch"'


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer garbage",
        "Bearer hsk_000000000000_" + "a" * 43,
        "Bearer hso_000000000000_" + "a" * 43,
    ],
)
async def test_an_invalid_key_is_401(anonymous: httpx.AsyncClient, authorization: str) -> None:
    resp = await anonymous.post(
        "/v1/search", json={"query": "x"}, headers={"Authorization": authorization}
    )
    assert resp.status_code == 401
    assert resp.json() == {
        "error": "invalid_api_key",
        "detail": "invalid API key" + resp.json()["detail"][15:],
    }
    assert resp.json()["error"] == "invalid_api_key"
    assert authorization.split()[1] not in resp.text
    assert resp.headers["www-authenticate"] == 'Bearer realm="hsearch", error="invalid_token"'


async def test_a_key_of_another_scheme_is_no_key(anonymous: httpx.AsyncClient, api: Api) -> None:
    resp = await anonymous.post(
        "/v1/search", json={"query": "x"}, headers={"Authorization": f"Basic {api.key}"}
    )
    assert (resp.status_code, resp.json()["error"]) == (401, "unauthenticated")


async def test_an_expired_key_is_401(api: Api, anonymous: httpx.AsyncClient) -> None:
    key = key_of(api, Scope.SEARCH, expires_at=datetime.now(UTC) + timedelta(days=1))
    with api.services.sessions() as session, session.begin():
        prefix = "_".join(key.split("_")[:2])
        past = datetime.now(UTC) - timedelta(seconds=1)
        session.execute(update(ApiKey).where(ApiKey.prefix == prefix).values(expires_at=past))
    resp = await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(key))
    assert resp.status_code == 401
    assert resp.json()["error"] == "api_key_expired"
    assert resp.headers["www-authenticate"] == 'Bearer realm="hsearch", error="invalid_token"'


async def test_a_revoked_key_is_refused_at_once(api: Api, anonymous: httpx.AsyncClient) -> None:
    key = key_of(api, Scope.SEARCH)
    assert (
        await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(key))
    ).status_code == 200
    [listed] = [
        k for k in (await api.client.get("/v1/keys")).json()["keys"] if key.startswith(k["prefix"])
    ]
    revoked = await api.client.delete(f"/v1/keys/{listed['id']}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None
    resp = await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(key))
    assert (resp.status_code, resp.json()["error"]) == (401, "api_key_revoked")


async def test_a_suspended_tenant_is_403_until_resumed(api: Api) -> None:
    tenancy = api.services.tenancy
    tenancy.set_tenant_status(TENANT, TenantStatus.SUSPENDED, actor="test")
    resp = await api.client.post("/v1/search", json={"query": "x"})
    assert resp.status_code == 403
    assert resp.json() == {"error": "tenant_suspended", "detail": "tenant 'default' is suspended"}
    tenancy.set_tenant_status(TENANT, TenantStatus.ACTIVE, actor="test")
    assert (await api.client.post("/v1/search", json={"query": "x"})).status_code == 200


@pytest.mark.parametrize("scope", list(Scope))
async def test_each_route_accepts_its_scopes_only(
    api: Api, anonymous: httpx.AsyncClient, scope: Scope
) -> None:
    key = key_of(api, scope)
    for method, path, body, accepted in ROUTES:
        resp = await call(anonymous, method, path, body, bearer(key))
        if scope in accepted:
            assert resp.status_code not in (401, 403), (scope, method, path, resp.text)
        else:
            assert resp.status_code == 403, (scope, method, path, resp.text)
            assert resp.json()["error"] == "insufficient_scope"
            wanted = " ".join(sorted(a for a in accepted if a != TOKEN))
            assert resp.headers["www-authenticate"] == (
                f'Bearer realm="hsearch", error="insufficient_scope", scope="{wanted}"'
            )


async def test_the_tenant_comes_from_the_key_not_the_body(api: Api) -> None:
    resp = await api.client.post("/v1/search", json={"query": "x", "tenant_id": "other"})
    assert resp.status_code == 422
    assert "tenant_id" in resp.json()["detail"]


DOC = {"external_id": "a", "text": "x"}
NAMING_A_TENANT: list[tuple[str, str, Any]] = [
    ("POST", "/v1/search", {"query": "x", "tenant_id": "other"}),
    ("POST", "/v1/search", {"query": "x", "filter": {"tenant_id": {"eq": "other"}}}),
    ("POST", "/v1/search", {"query": "x", "filter": {"not": {"tenant_id": {"eq": TENANT}}}}),
    ("POST", "/v1/search", {"query": "x", "facets": ["tenant_id"]}),
    ("POST", "/v1/documents", {"documents": [DOC], "tenant_id": "other"}),
    ("POST", "/v1/documents", {"documents": [{**DOC, "tenant_id": "other"}]}),
    ("POST", "/v1/documents:delete", {"filter": {"tenant_id": {"eq": "other"}}}),
    ("POST", "/v1/documents:delete", {"everything": True, "tenant_id": "other"}),
    ("PATCH", "/v1/documents/a", {"tags": ["t"], "tenant_id": "other"}),
    ("POST", "/v1/keys", {"scopes": ["search"], "tenant_id": "other"}),
    ("PUT", "/v1/synonyms", {"synonyms": [], "tenant_id": "other"}),
    ("PATCH", "/v1/settings", {"text_links": [], "tenant_id": "other"}),
    ("POST", "/v1/tokens", {"filter": {"tenant_id": {"eq": "other"}}}),
    ("POST", "/v1/tokens", {"filter": {"tags": {"contains": "t"}}, "tenant_id": "other"}),
]


@pytest.mark.parametrize(("method", "path", "body"), NAMING_A_TENANT)
async def test_a_tenant_named_in_a_body_or_a_filter_is_refused(
    api: Api, method: str, path: str, body: Any
) -> None:
    api.services.tenancy.create_tenant("Other", tenant_id="other", actor="test")
    resp = await api.client.request(method, path, json=body)
    assert resp.status_code == 422, resp.text
    assert "tenant_id" in resp.json()["detail"]
    line = json.dumps({**DOC, "tenant_id": "other"})
    ndjson = await api.client.post(
        "/v1/documents:ndjson", content=line, headers={"content-type": "application/x-ndjson"}
    )
    assert ndjson.status_code == 422
    assert "tenant_id" in ndjson.json()["detail"]
    jobs = (await api.client.get("/v1/jobs")).json()["jobs"]
    assert jobs == [], "nothing was submitted"


async def test_a_tenant_key_may_not_name_another_tenant(api: Api) -> None:
    api.services.tenancy.create_tenant("Other", tenant_id="other", actor="test")
    resp = await api.client.post(
        "/v1/search", json={"query": "x"}, headers={"X-Hsearch-Tenant": "other"}
    )
    assert (resp.status_code, resp.json()["error"]) == (403, "tenant_mismatch")
    same = await api.client.post(
        "/v1/search", json={"query": "x"}, headers={"X-Hsearch-Tenant": TENANT}
    )
    assert same.status_code == 200


async def test_a_tenant_admin_manages_its_own_keys_only(
    api: Api, anonymous: httpx.AsyncClient
) -> None:
    other = api.services.tenancy.create_tenant("Other", tenant_id="other", actor="test")
    created = await api.client.post(
        "/v1/keys", json={"scopes": ["search"], "name": "web", "expires_at": "2999-01-01T00:00:00Z"}
    )
    assert created.status_code == 201, created.text
    new = created.json()
    assert new["key"].startswith(new["prefix"] + "_")
    assert (new["scopes"], new["name"]) == (["search"], "web")
    assert new["expires_at"].startswith("2999-01-01")
    assert (
        await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(new["key"]))
    ).status_code == 200

    listed = (await api.client.get("/v1/keys")).json()["keys"]
    assert new["id"] in {k["id"] for k in listed}
    assert other.key.view.prefix not in {k["prefix"] for k in listed}
    assert all("key" not in k for k in listed)

    theirs = await api.client.delete(f"/v1/keys/{other.key.view.id}")
    assert (theirs.status_code, theirs.json()["error"]) == (404, "api_key_not_found")
    still = await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(other.key.key))
    assert still.status_code == 200


async def test_key_admin_validates_its_body(api: Api) -> None:
    for body, field in [
        ({"scopes": []}, "scopes"),
        ({"scopes": ["root"]}, "scopes[0]"),
        ({"scopes": ["search"], "expires_at": "2999-01-01T00:00:00"}, "expires_at"),
    ]:
        resp = await api.client.post("/v1/keys", json=body)
        assert resp.status_code == 422, (body, resp.text)
        assert resp.json()["errors"][0]["field"] == field
    past = await api.client.post(
        "/v1/keys", json={"scopes": ["search"], "expires_at": "2000-01-01T00:00:00Z"}
    )
    assert (past.status_code, past.json()["detail"]) == (422, "expires_at: must be in the future")


async def test_an_operator_acts_for_a_named_tenant_and_is_audited(
    api: Api, anonymous: httpx.AsyncClient
) -> None:
    tenancy = api.services.tenancy
    operator = tenancy.create_operator_key(name="on call", actor="test")
    headers = {**bearer(operator.key), "X-Hsearch-Tenant": TENANT}
    await api.client.post(
        "/v1/documents", json={"documents": [{"external_id": "a", "text": "fox"}]}
    )
    resp = await anonymous.get("/v1/documents/a", headers=headers)
    assert resp.status_code == 200, resp.text
    latest = tenancy.audit_log(tenant_id=TENANT)[0]
    assert (latest.actor, latest.action, latest.target) == (
        f"key:{operator.view.prefix}",
        "api.request",
        "GET /v1/documents/a",
    )
    # Its keys too (any scope), and a key it creates is the tenant's.
    created = await anonymous.post("/v1/keys", json={"scopes": ["search"]}, headers=headers)
    assert created.status_code == 201
    assert tenancy.authenticate(created.json()["key"]).tenant_id == TENANT

    missing = await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(operator.key))
    assert (missing.status_code, missing.json()["error"]) == (422, "tenant_required")
    unknown = await anonymous.post(
        "/v1/search", json={"query": "x"}, headers={**headers, "X-Hsearch-Tenant": "nobody"}
    )
    assert (unknown.status_code, unknown.json()["error"]) == (404, "tenant_not_found")


async def test_no_key_appears_in_the_logs(
    api: Api, anonymous: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    revoked = key_of(api, Scope.SEARCH)
    created = (await api.client.post("/v1/keys", json={"scopes": ["ingest"]})).json()["key"]
    await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(revoked))
    [row] = [k for k in api.services.tenancy.list_keys(TENANT) if revoked.startswith(k.prefix)]
    api.services.tenancy.revoke_key(row.id, actor="test")
    await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(revoked))
    await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(created))
    await anonymous.post("/v1/search", json={"query": "x"}, headers=bearer(created + "x"))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for key in (api.key, revoked, created):
        assert key not in logged
        assert key.split("_", 2)[2] not in logged


async def test_the_key_is_checked_before_the_body_is_validated(
    anonymous: httpx.AsyncClient,
) -> None:
    invalid = await anonymous.post("/v1/search", json={"unknown": 1})
    assert (invalid.status_code, invalid.json()["error"]) == (401, "unauthenticated")
    not_ndjson = await anonymous.post(
        "/v1/documents:ndjson", content=b"x", headers={"content-type": "text/plain"}
    )
    assert (not_ndjson.status_code, not_ndjson.json()["error"]) == (401, "unauthenticated")
