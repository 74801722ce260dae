"""The built-in pages through the real app: an operator credential is exchanged for a
session cookie (HttpOnly, SameSite=Strict, Secure over https) by a POST guarded by a
double-submit CSRF token; a tenant key is refused; every POST after it needs the
session's CSRF token; the pages redirect to the login without a session; the playground
searches as a tenant, audited, and answers the hits' explanations; a revoked credential
or a tampered cookie ends the session; the assets are served by the API itself."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hsearch.tenancy.sessions import CSRF_COOKIE, CSRF_HEADER, SESSION_COOKIE
from hsearch.types import FusionMethod, Scope, SearchMode
from hsearch_api.routers.pages import page as read_page
from hsearch_api.routers.pages import static_directory
from tests.unit.api.conftest import Api, api_settings, serve

TENANT = "default"
DOCS = [
    {"external_id": f"v{i}", "title": "Volcano", "text": f"A volcano erupts, story {i}."}
    for i in range(3)
]


@pytest.fixture
async def browser(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no credential of its own, keeping cookies like a browser."""
    async with api.anonymous() as client:
        yield client


def operator_key(api: Api) -> str:
    return api.services.tenancy.create_operator_key(name="pages", actor="test").key


def set_cookies(resp: httpx.Response) -> dict[str, str]:
    """Each Set-Cookie header of ``resp`` by cookie name."""
    return {h.split("=", 1)[0]: h for h in resp.headers.get_list("set-cookie")}


async def login(client: httpx.AsyncClient, key: str) -> httpx.Response:
    page = await client.get("/ops/login")
    assert page.status_code == 200
    token = client.cookies[CSRF_COOKIE]
    return await client.post("/ops/login", json={"key": key}, headers={CSRF_HEADER: token})


async def logged_in(api: Api, client: httpx.AsyncClient) -> str:
    """Log ``client`` in; the session's CSRF token."""
    resp = await login(client, operator_key(api))
    assert resp.status_code == 200, resp.text
    return client.cookies[CSRF_COOKIE]


async def test_the_pages_send_a_browser_without_a_session_to_the_login(
    browser: httpx.AsyncClient,
) -> None:
    for path in ("/ops", "/playground"):
        resp = await browser.get(path)
        assert (resp.status_code, resp.headers["location"]) == (303, "/ops/login")
    for path in ("/ops/api/dashboard", "/ops/api/tenants", "/ops/api/session"):
        resp = await browser.get(path)
        assert resp.status_code == 401, path
        assert resp.json()["error"] == "session_required"
        assert "www-authenticate" not in resp.headers
    page = await browser.get("/ops/login")
    assert page.status_code == 200
    assert 'type="password"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
    csrf = set_cookies(page)[CSRF_COOKIE]
    assert "SameSite=strict" in csrf
    assert "HttpOnly" not in csrf  # the page's script echoes it


async def test_an_operator_credential_is_exchanged_for_a_session_cookie(
    api: Api, browser: httpx.AsyncClient
) -> None:
    key = operator_key(api)
    before = browser.cookies.get(CSRF_COOKIE)
    resp = await login(browser, key)
    assert resp.status_code == 200, resp.text
    prefix = key[: len("hso_") + 12]
    assert resp.json()["operator"] == prefix
    cookies = set_cookies(resp)
    session = cookies[SESSION_COOKIE]
    for attribute in ("HttpOnly", "SameSite=strict", "Max-Age=28800", "Path=/"):
        assert attribute in session
    assert "Secure" not in session  # plain http here; see the https test
    assert key not in session
    assert key not in resp.text
    # The CSRF token is renewed with the session.
    assert browser.cookies[CSRF_COOKIE] != before
    assert (await browser.get("/ops")).status_code == 200
    assert (await browser.get("/playground")).status_code == 200
    again = await browser.get("/ops/login")
    assert (again.status_code, again.headers["location"]) == (303, "/ops")
    latest = api.services.tenancy.audit_log()[0]
    assert (latest.actor, latest.action) == (f"key:{prefix}", "ops.login")


async def test_the_login_refuses_a_tenant_key_a_bad_key_and_a_missing_csrf_token(
    api: Api, browser: httpx.AsyncClient
) -> None:
    tenant_key = api.services.tenancy.create_key(TENANT, scopes=list(Scope), actor="t").key
    resp = await login(browser, tenant_key)
    assert (resp.status_code, resp.json()["error"]) == (403, "operator_required")
    resp = await login(browser, "hso_000000000000_" + "x" * 43)
    assert (resp.status_code, resp.json()["error"]) == (401, "invalid_api_key")
    key = operator_key(api)
    for headers in ({}, {CSRF_HEADER: "not-the-cookie"}):
        resp = await browser.post("/ops/login", json={"key": key}, headers=headers)
        assert (resp.status_code, resp.json()["error"]) == (403, "csrf_failed")
    assert SESSION_COOKIE not in browser.cookies


async def test_cookies_are_secure_over_https(tmp_path: Any) -> None:
    async with (
        serve(api_settings(tmp_path)) as api,
        httpx.AsyncClient(transport=api.transport, base_url="https://test") as client,
    ):
        resp = await login(client, operator_key(api))
        assert resp.status_code == 200, resp.text
        for cookie in set_cookies(resp).values():
            assert "Secure" in cookie


async def test_every_post_needs_the_session_csrf_token(
    api: Api, browser: httpx.AsyncClient
) -> None:
    token = await logged_in(api, browser)
    headers = {"X-Hsearch-Tenant": TENANT}
    for sent in ({}, {CSRF_HEADER: "forged"}):
        resp = await browser.post(
            "/ops/api/search", json={"query": "volcano"}, headers={**headers, **sent}
        )
        assert (resp.status_code, resp.json()["error"]) == (403, "csrf_failed")
        resp = await browser.post("/ops/logout", headers=sent)
        assert (resp.status_code, resp.json()["error"]) == (403, "csrf_failed")
    resp = await browser.post("/ops/logout", headers={CSRF_HEADER: token})
    assert resp.status_code == 204
    assert SESSION_COOKIE not in browser.cookies
    assert (await browser.get("/ops/api/session")).status_code == 401


async def test_the_playground_searches_as_a_tenant_audited_and_explained(
    api: Api, browser: httpx.AsyncClient
) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": DOCS})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"
    token = await logged_in(api, browser)
    tenants = (await browser.get("/ops/api/tenants")).json()
    assert TENANT in [t["id"] for t in tenants]

    resp = await browser.post(
        "/ops/api/search",
        json={"query": "volcano", "top_k": 2, "fusion": "rrf"},
        headers={CSRF_HEADER: token, "X-Hsearch-Tenant": TENANT},
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    assert len(body["hits"]) == 2
    explanation = body["hits"][0]["explanation"]
    assert explanation["method"] == "rrf"
    assert explanation["dense_rank"] == 1 or explanation["sparse_rank"] == 1
    assert explanation["fused_score"] > 0
    assert set(body["applied_weights"]) == {"dense", "sparse"}
    assert body["timings"]["retrieval_ms"] >= 0
    latest = api.services.tenancy.audit_log(tenant_id=TENANT)[0]
    assert (latest.action, latest.target) == ("api.request", "POST /ops/api/search")

    # A tenant must be named, and must exist; the body is validated like /v1/search's.
    resp = await browser.post(
        "/ops/api/search", json={"query": "volcano"}, headers={CSRF_HEADER: token}
    )
    assert (resp.status_code, resp.json()["error"]) == (422, "tenant_required")
    resp = await browser.post(
        "/ops/api/search",
        json={"query": "volcano"},
        headers={CSRF_HEADER: token, "X-Hsearch-Tenant": "nobody"},
    )
    assert (resp.status_code, resp.json()["error"]) == (404, "tenant_not_found")
    resp = await browser.post(
        "/ops/api/search",
        json={"query": "volcano", "top_k": 0},
        headers={CSRF_HEADER: token, "X-Hsearch-Tenant": TENANT},
    )
    assert resp.status_code == 422


async def test_the_playground_asks_as_a_tenant_and_audits_it(
    api: Api, browser: httpx.AsyncClient
) -> None:
    resp = await api.client.post("/v1/documents", json={"documents": DOCS})
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"
    token = await logged_in(api, browser)
    resp = await browser.post(
        "/ops/api/answer",
        json={"query": "volcano"},
        headers={CSRF_HEADER: token, "X-Hsearch-Tenant": TENANT},
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["answer"] is None  # no model on this server: the passages, and why
    assert body["degraded"] == ["model_unavailable: no model is configured"]
    assert body["passages"]
    latest = api.services.tenancy.audit_log(tenant_id=TENANT)[0]
    assert (latest.action, latest.target) == ("api.request", "POST /ops/api/answer")
    resp = await browser.post(
        "/ops/api/answer", json={"query": "volcano"}, headers={"X-Hsearch-Tenant": TENANT}
    )
    assert (resp.status_code, resp.json()["error"]) == (403, "csrf_failed")


async def test_the_dashboard_reads_the_recorded_totals(
    api: Api, browser: httpx.AsyncClient
) -> None:
    await logged_in(api, browser)
    first = (await browser.get("/ops/api/dashboard")).json()
    resp = await api.client.post("/v1/search", json={"query": "volcano"})
    assert resp.status_code == 200, resp.text
    second = (await browser.get("/ops/api/dashboard")).json()
    assert sum(second["searches"].values()) == sum(first["searches"].values()) + 1
    dense = second["legs"]["dense"]
    assert dense["count"] == first["legs"].get("dense", {"count": 0})["count"] + 1
    assert dense["buckets"][-1][0] is None  # +Inf
    assert second["at"] >= first["at"]
    assert set(second["jobs"]) >= {"queued", "running", "succeeded"}
    assert second["dependencies"]["database"] is True
    # An answer (no model on this server: degraded) is on the page's answers panel.
    assert (await api.client.post("/v1/answer", json={"query": "volcano"})).status_code == 200
    third = (await browser.get("/ops/api/dashboard")).json()
    degraded = third["answers"].get("degraded", 0)
    assert degraded == second["answers"].get("degraded", 0) + 1


async def test_the_dashboard_hands_the_page_the_history_the_server_keeps(
    api: Api, browser: httpx.AsyncClient
) -> None:
    # Searches ran before anyone opened the page; a scrape kept a snapshot before them.
    assert (await api.client.get("/metrics")).status_code == 200
    (kept,) = api.services.search_history.snapshots()
    for query in ("volcano", "erupts"):
        assert (await api.client.post("/v1/search", json={"query": query})).status_code == 200
    await logged_in(api, browser)
    opened = (await browser.get("/ops/api/dashboard")).json()
    (past,) = opened["history"]
    assert past["at"] == kept[0] < opened["at"]
    # The page's first rate: the two searches since the snapshot, legs and outcomes alike.
    assert sum(opened["searches"].values()) - sum(past["searches"].values()) == 2
    dense_then = past["legs"].get("dense", {"buckets": [[None, 0]]})["buckets"][-1]
    assert dense_then[0] is None  # +Inf
    assert opened["legs"]["dense"]["buckets"][-1][1] - dense_then[1] == 2
    ok_then = past["leg_outcomes"].get("dense", {}).get("ok", 0)
    assert opened["leg_outcomes"]["dense"]["ok"] - ok_then == 2
    assert set(past) == {"at", "searches", "legs", "leg_outcomes", "cache"}
    # The poll kept no second snapshot (the first is not 15 s old): still one, older.
    again = (await browser.get("/ops/api/dashboard")).json()
    assert [p["at"] for p in again["history"]] == [past["at"]]


async def test_the_first_poll_keeps_a_snapshot_for_the_next_opening(
    api: Api, browser: httpx.AsyncClient
) -> None:
    await logged_in(api, browser)
    assert api.services.search_history.snapshots() == []
    first = (await browser.get("/ops/api/dashboard")).json()
    assert first["history"] == []  # nothing kept yet: the page starts from its own readings
    assert len(api.services.search_history.snapshots()) == 1
    second = (await browser.get("/ops/api/dashboard")).json()
    assert len(second["history"]) == 1


async def test_a_revoked_credential_or_a_tampered_cookie_ends_the_session(
    api: Api, browser: httpx.AsyncClient
) -> None:
    created = api.services.tenancy.create_operator_key(name="pages", actor="test")
    assert (await login(browser, created.key)).status_code == 200
    cookie = browser.cookies[SESSION_COOKIE]
    browser.cookies.set(SESSION_COOKIE, cookie[:-2] + ("AA" if cookie[-2:] != "AA" else "BB"))
    resp = await browser.get("/ops/api/session")
    assert (resp.status_code, resp.json()["error"]) == (401, "session_required")
    browser.cookies.set(SESSION_COOKIE, cookie)
    assert (await browser.get("/ops/api/session")).status_code == 200
    api.services.tenancy.revoke_key(created.view.id, actor="test")
    resp = await browser.get("/ops/api/session")
    assert (resp.status_code, resp.json()["error"]) == (401, "session_required")
    assert (await browser.get("/ops")).status_code == 303


async def test_the_assets_are_served_by_the_api(browser: httpx.AsyncClient) -> None:
    page = await browser.get("/ops/login")
    for html in ("login", "ops", "playground"):
        text = read_page(html)
        assets = re.findall(r'(?:src|href)="([^"]+)"', text)
        assert assets, html
        for asset in assets:
            assert asset.startswith("/"), f"{html}: {asset} is not served by the API"
            if asset.startswith("/ops/static/"):
                resp = await browser.get(asset)
                assert resp.status_code == 200, asset
    assert page.status_code == 200
    lib = await browser.get("/ops/static/vendor/uplot-1.6.32/uPlot.iife.min.js")
    assert lib.status_code == 200
    assert "uPlot" in lib.text
    # Nothing outside the assets' folder, however the path is written.
    for escape in ("/ops/static/%2e%2e/login.html", "/ops/static/..%2flogin.html"):
        assert (await browser.get(escape)).status_code == 404, escape
    assert (await browser.get("/ops/static/missing.js")).status_code == 404


def test_the_playground_offers_every_mode_and_fusion_method() -> None:
    html = read_page("playground")

    def options(select: str) -> list[str]:
        block = html.split(f'id="{select}"', 1)[1].split("</select>", 1)[0]
        return [v for v in re.findall(r'<option value="([^"]*)"', block) if v]

    assert options("mode") == [m.value for m in SearchMode]
    assert options("fusion") == [f.value for f in FusionMethod]


def test_the_playground_groups_by_document_by_default() -> None:
    html = read_page("playground")
    box = re.search(r'<input id="group_by_document"[^>]*>', html)
    assert box is not None
    assert 'type="checkbox"' in box.group(0)
    assert " checked" in box.group(0)
    script = (Path(static_directory()) / "playground.js").read_text("utf-8")
    assert 'group_by_document: $("group_by_document").checked' in script
