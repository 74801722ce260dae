"""Scoped search tokens through the real app: minted with a search or admin key, they
carry a mandatory filter ANDed into every leg, total, facet and document read; they
expire, die with their parent key, refuse tampering, and never write or manage."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import jwt
import pytest

from hsearch.types import Scope, TenantStatus
from tests.unit.api.conftest import Api

DOCS = [
    {"external_id": "a1", "text": "the quick brown fox jumps", "tags": ["team-a"], "source": "s1"},
    {"external_id": "a2", "text": "a lazy brown fox sleeps", "tags": ["team-a"], "source": "s2"},
    {"external_id": "b1", "text": "the brown fox of team b", "tags": ["team-b"], "source": "s1"},
    {"external_id": "b2", "text": "another brown fox story", "tags": ["team-b"], "source": "s3"},
]
TEAM_A = {"tags": {"contains": "team-a"}}


async def ingest(api: Api, documents: list[dict[str, Any]]) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"


async def mint(api: Api, key: str | None = None, **body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return await api.client.post("/v1/tokens", json={"filter": TEAM_A, **body}, headers=headers)


async def token_of(api: Api, **body: Any) -> str:
    resp = await mint(api, **body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["token"])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def search(client: httpx.AsyncClient, token: str, **body: Any) -> httpx.Response:
    return await client.post(
        "/v1/search", json={"query": "brown fox", **body}, headers=bearer(token)
    )


@pytest.fixture
async def anon(api: Api) -> Any:
    async with api.anonymous() as client:
        yield client


async def test_mint_answers_a_token_and_its_expiry(api: Api) -> None:
    before = datetime.now(UTC)
    resp = await mint(api, expires_in_s=120)
    assert resp.status_code == 201, resp.text
    body = resp.json()
    expires = datetime.fromisoformat(body["expires_at"])
    assert before + timedelta(seconds=118) <= expires <= before + timedelta(seconds=121)
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert claims["flt"] == TEAM_A
    assert claims["tid"] == "default"
    assert claims["exp"] == int(expires.timestamp())


async def test_the_token_filter_is_anded_into_hits_totals_and_facets(api: Api, anon: Any) -> None:
    await ingest(api, DOCS)
    token = await token_of(api)
    everything = (await api.client.post("/v1/search", json={"query": "brown fox"})).json()
    assert {h["external_id"] for h in everything["hits"]} == {"a1", "a2", "b1", "b2"}

    resp = await search(anon, token, facets=["tags", "source"], top_k=10)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert {h["external_id"] for h in body["hits"]} == {"a1", "a2"}
    assert body["total"] == 2
    facets = {f["field"]: {b["value"]: b["count"] for b in f["buckets"]} for f in body["facets"]}
    assert facets["tags"] == {"team-a": 2}
    assert facets["source"] == {"s1": 1, "s2": 1}
    # A request filter narrows further; it can never widen (OR does not escape the AND).
    widened = await search(
        anon, token, filter={"or": [{"tags": {"contains": "team-b"}}, {"source": {"eq": "s1"}}]}
    )
    assert {h["external_id"] for h in widened.json()["hits"]} == {"a1"}
    assert widened.json()["total"] == 1
    keyword = await search(anon, token, mode="keyword", facets=["tags"])
    assert {h["external_id"] for h in keyword.json()["hits"]} == {"a1", "a2"}
    assert keyword.json()["total"] == 2


async def test_the_token_filter_restricts_document_reads(api: Api, anon: Any) -> None:
    await ingest(api, DOCS)
    token = await token_of(api)
    listed = await anon.get("/v1/documents", headers=bearer(token))
    assert listed.status_code == 200, listed.text
    assert [d["external_id"] for d in listed.json()["documents"]] == ["a1", "a2"]
    paged = await anon.get("/v1/documents", params={"limit": 1}, headers=bearer(token))
    assert [d["external_id"] for d in paged.json()["documents"]] == ["a1"]
    rest = await anon.get(
        "/v1/documents",
        params={"limit": 1, "cursor": paged.json()["next_cursor"]},
        headers=bearer(token),
    )
    assert [d["external_id"] for d in rest.json()["documents"]] == ["a2"]
    assert (await anon.get("/v1/documents/a1", headers=bearer(token))).status_code == 200
    hidden = await anon.get("/v1/documents/b1", headers=bearer(token))
    assert (hidden.status_code, hidden.json()["error"]) == (404, "document_not_found")
    # The key itself still reads it.
    assert (await api.client.get("/v1/documents/b1")).status_code == 200


async def test_a_token_only_searches_and_reads(api: Api, anon: Any) -> None:
    await ingest(api, DOCS)
    token = await token_of(api)
    for method, path, body in [
        ("POST", "/v1/documents", {"documents": [{"external_id": "x", "text": "y"}]}),
        ("PATCH", "/v1/documents/a1", {"tags": ["team-b"]}),
        ("DELETE", "/v1/documents/a1", None),
        ("POST", "/v1/documents:delete", {"everything": True}),
        ("GET", "/v1/jobs", None),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/keys", {"scopes": ["admin"]}),
        ("POST", "/v1/tokens", {"filter": {"tags": {"contains": "team-b"}}}),
        ("GET", "/v1/stats", None),
    ]:
        resp = await anon.request(method, path, json=body, headers=bearer(token))
        assert (resp.status_code, resp.json()["error"]) == (403, "insufficient_scope"), path
        # About tokens, whichever route: not "the key has search" (a token is no key).
        assert resp.json()["detail"].startswith("a search token may only search"), path
    assert (await api.client.get("/v1/documents/a1")).json()["tags"] == ["team-a"]


async def test_a_token_limits_top_k(api: Api, anon: Any) -> None:
    token = await token_of(api, max_top_k=5)
    assert (await search(anon, token, top_k=5)).status_code == 200
    resp = await search(anon, token, top_k=6)
    assert resp.status_code == 422
    assert "at most 5" in resp.json()["detail"]


async def test_an_expired_token_is_401(
    api: Api, anon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = await token_of(api, expires_in_s=60)
    assert (await search(anon, token)).status_code == 200
    later = datetime.now(UTC) + timedelta(seconds=61)
    # The service judges expiry by its wall clock (injectable): move it, no sleeping.
    monkeypatch.setattr(api.services.tenancy, "_now", lambda: later)
    resp = await search(anon, token)
    assert (resp.status_code, resp.json()["error"]) == (401, "token_expired")
    assert resp.headers["www-authenticate"].endswith('error="invalid_token"')


async def test_a_token_dies_with_its_parent_key(api: Api, anon: Any) -> None:
    tenancy = api.services.tenancy
    parent = tenancy.create_key("default", scopes=[Scope.SEARCH], actor="test")
    token = await token_of_key(api, parent.key)
    assert (await search(anon, token)).status_code == 200
    tenancy.revoke_key(parent.view.id, actor="test")
    resp = await search(anon, token)
    assert (resp.status_code, resp.json()["error"]) == (401, "api_key_revoked")


async def test_a_token_is_refused_while_its_tenant_is_suspended(api: Api, anon: Any) -> None:
    token = await token_of(api)
    api.services.tenancy.set_tenant_status("default", TenantStatus.SUSPENDED, actor="test")
    resp = await search(anon, token)
    assert (resp.status_code, resp.json()["error"]) == (403, "tenant_suspended")


async def token_of_key(api: Api, key: str) -> str:
    resp = await mint(api, key)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["token"])


async def test_a_token_never_outlives_its_parent_key(api: Api) -> None:
    soon = datetime.now(UTC) + timedelta(seconds=30)
    parent = api.services.tenancy.create_key(
        "default", scopes=[Scope.SEARCH], expires_at=soon, actor="test"
    )
    resp = await mint(api, parent.key, expires_in_s=600)
    assert datetime.fromisoformat(resp.json()["expires_at"]) <= soon


@pytest.mark.parametrize("scope", [Scope.SEARCH, Scope.ADMIN])
async def test_search_and_admin_keys_mint(api: Api, scope: Scope) -> None:
    key = api.services.tenancy.create_key("default", scopes=[scope], actor="test").key
    assert (await mint(api, key)).status_code == 201


async def test_an_ingest_key_does_not_mint(api: Api) -> None:
    key = api.services.tenancy.create_key("default", scopes=[Scope.INGEST], actor="test").key
    resp = await mint(api, key)
    assert (resp.status_code, resp.json()["error"]) == (403, "insufficient_scope")


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"filter": {}}, "non-empty filter"),
        ({"filter": {"tenant_id": {"eq": "other"}}}, "tenant_id"),
        ({"filter": {"or": [TEAM_A, {"tenant_id": {"eq": "x"}}]}}, "tenant_id"),
        ({"filter": {"ordinal": {"eq": 0}}}, "ordinal"),
        ({"filter": TEAM_A, "expires_in_s": 3601}, "auth.token_max_ttl_s"),
        ({"filter": TEAM_A, "tenant_id": "other"}, "tenant_id"),
        ({"filter": TEAM_A, "max_top_k": True}, "max_top_k"),
        ({"filter": TEAM_A, "expires_in_s": "600"}, "expires_in_s"),
    ],
)
async def test_minting_validates_the_request(api: Api, body: dict[str, Any], fragment: str) -> None:
    resp = await api.client.post("/v1/tokens", json=body)
    assert resp.status_code == 422, resp.text
    assert fragment in resp.json()["detail"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_a_tampered_token_is_refused(api: Api, anon: Any) -> None:
    token = await token_of(api)
    header, payload, signature = token.split(".")
    claims = json.loads(_unb64(payload))
    forged = []
    # Widen the filter, change the tenant, extend the expiry: the signature breaks.
    for change in (
        {"flt": {"tags": {"contains": "team-b"}}},
        {"tid": "other"},
        {"exp": claims["exp"] + 86400},
    ):
        body = _b64(json.dumps({**claims, **change}).encode())
        forged.append(f"{header}.{body}.{signature}")
    # alg "none", and a token signed with another key.
    none_header = _b64(json.dumps({"alg": "none", "typ": "JWT"}).encode())
    forged.append(f"{none_header}.{payload}.")
    forged.append(jwt.encode(claims, b"k" * 32, algorithm="HS256"))
    forged.append(token[:-2] + ("AA" if not token.endswith("AA") else "BB"))
    for bad in forged:
        resp = await search(anon, bad)
        assert (resp.status_code, resp.json()["error"]) == (401, "invalid_token"), bad
        assert bad not in resp.text


async def test_an_operator_does_not_mint(api: Api) -> None:
    operator = api.services.tenancy.create_operator_key(actor="test")
    resp = await api.client.post(
        "/v1/tokens",
        json={"filter": TEAM_A},
        headers={"Authorization": f"Bearer {operator.key}", "X-Hsearch-Tenant": "default"},
    )
    assert (resp.status_code, resp.json()["error"]) == (403, "insufficient_scope")


async def test_no_token_and_no_query_text_appears_in_the_logs(
    api: Api, anon: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await ingest(api, DOCS)
    token = await token_of(api)
    await search(anon, token, query="zanzibar quokka")
    await search(anon, token + "x")
    await anon.get("/v1/documents/a1", headers=bearer(token))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert token not in logged
    assert token.split(".")[2] not in logged
    assert "zanzibar" not in logged
