"""The API's limits (docs/api.md, Limits): per-key rate limits (429), the cap on
concurrent searches (503 at once), the query's length, the filter's depth, CORS."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from hsearch.config import ApiSettings, RateLimitSettings, RedisSettings, Settings
from hsearch.local.processes import free_port
from hsearch.search.planner import MAX_QUERY_CHARS
from hsearch.types import Scope
from hsearch.vectorstore.filters import MAX_DEPTH
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.api.conftest import Api, api_settings, serve

SEARCH = {"query": "rivers"}


def settings_with(tmp_path: Path, **sections: Any) -> Settings:
    return api_settings(tmp_path).model_copy(update=sections)


async def test_a_key_over_its_rate_limit_is_429_naming_the_limit(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path, ratelimit=RateLimitSettings(default="2/minute", scopes={Scope.INGEST: "5/minute"})
    )
    async with serve(settings) as api:
        for _ in range(2):
            assert (await api.client.post("/v1/search", json=SEARCH)).status_code == 200
        resp = await api.client.post("/v1/search", json=SEARCH)
        assert resp.status_code == 429, resp.text
        body = resp.json()
        assert body["error"] == "rate_limited"
        assert "2/minute" in body["detail"]
        assert "ratelimit.default" in body["detail"]
        assert 1 <= int(resp.headers["retry-after"]) <= 60
        # The key's ingest budget is its own.
        assert (await api.client.get("/v1/jobs")).status_code == 200
        # Another key of the tenant has its own budget.
        other = api.services.tenancy.create_key(
            settings.api.default_tenant, scopes=[Scope.SEARCH], actor="test"
        ).key
        resp = await api.client.post(
            "/v1/search", json=SEARCH, headers={"Authorization": f"Bearer {other}"}
        )
        assert resp.status_code == 200


async def test_refused_credentials_are_not_counted(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, ratelimit=RateLimitSettings(default="1/minute"))
    async with serve(settings) as api, api.anonymous() as anonymous:
        for _ in range(3):
            assert (await anonymous.post("/v1/search", json=SEARCH)).status_code == 401
        assert (await api.client.post("/v1/search", json=SEARCH)).status_code == 200


class BlockingStore(InMemoryVectorStore):
    """Dense searches wait until released."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def search_dense(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        await self.release.wait()
        return await super().search_dense(*args, **kwargs)


async def test_searches_past_the_process_cap_are_503_at_once(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path, api=ApiSettings(migrate_on_start=True, max_concurrent_searches=1)
    )
    store = BlockingStore()
    async with serve(settings, store=store) as api:
        doc = {"external_id": "a", "text": "rivers"}
        accepted = await api.client.post("/v1/documents", json={"documents": [doc]})
        job_id = uuid.UUID(accepted.json()["job_id"])
        assert api.services.indexing().process_job(job_id) == "succeeded"
        first = asyncio.create_task(api.client.post("/v1/search", json=SEARCH))
        await asyncio.wait_for(store.entered.wait(), timeout=60)  # a guard, not a budget
        # The first holds the slot until released, after this answer: queued behind it,
        # the second would have waited for its budget to run out, and got a 200.
        resp = await api.client.post("/v1/search", json=SEARCH)
        assert not first.done(), "refused while the first still held the slot"
        assert resp.status_code == 503, resp.text
        assert resp.json()["error"] == "overloaded"
        assert "api.max_concurrent_searches" in resp.json()["detail"]
        assert int(resp.headers["retry-after"]) >= 1
        store.release.set()
        assert (await first).status_code == 200
        # The slot is free again.
        assert (await api.client.post("/v1/search", json=SEARCH)).status_code == 200


async def test_a_query_longer_than_the_limit_is_422_naming_query(api: Api) -> None:
    resp = await api.client.post("/v1/search", json={"query": "a" * (MAX_QUERY_CHARS + 1)})
    assert resp.status_code == 422
    assert resp.json()["error"] == "invalid_request"
    assert resp.json()["errors"][0]["field"] == "query"
    ok = await api.client.post("/v1/search", json={"query": "a" * MAX_QUERY_CHARS})
    assert ok.status_code == 200


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"source": {"in": ["x"]}}
    for _ in range(depth):
        node = {"and": [node]}
    return node


async def test_a_filter_nested_too_deep_is_422_naming_the_filter(api: Api) -> None:
    resp = await api.client.post("/v1/search", json={**SEARCH, "filter": nested(MAX_DEPTH + 1)})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "invalid_filter"
    assert resp.json()["detail"].startswith("filter")
    assert f"deeper than {MAX_DEPTH}" in resp.json()["detail"]
    ok = await api.client.post("/v1/search", json={**SEARCH, "filter": nested(MAX_DEPTH - 1)})
    assert ok.status_code == 200, ok.text


ORIGIN = "https://app.example"


async def test_cors_allows_the_configured_origins_only(tmp_path: Path) -> None:
    settings = settings_with(
        tmp_path, api=ApiSettings(migrate_on_start=True, cors_origins=[ORIGIN])
    )
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    async with serve(settings) as api:
        resp = await api.client.options("/v1/search", headers={**preflight, "Origin": ORIGIN})
        assert resp.status_code == 200
        assert resp.headers["access-control-allow-origin"] == ORIGIN
        assert "authorization" in resp.headers["access-control-allow-headers"].lower()
        resp = await api.client.post("/v1/search", json=SEARCH, headers={"Origin": ORIGIN})
        assert resp.headers["access-control-allow-origin"] == ORIGIN
        assert "retry-after" in resp.headers["access-control-expose-headers"].lower()
        refused = await api.client.options(
            "/v1/search", headers={**preflight, "Origin": "https://evil.example"}
        )
        assert refused.status_code == 400
        assert refused.json()["error"] == "cors_refused"
        assert "access-control-allow-origin" not in refused.headers


async def test_without_cors_origins_no_cors_headers(api: Api) -> None:
    resp = await api.client.post("/v1/search", json=SEARCH, headers={"Origin": ORIGIN})
    assert resp.status_code == 200
    assert "access-control-allow-origin" not in resp.headers
    preflight = await api.client.options(
        "/v1/search", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
    )
    assert preflight.status_code == 405
    assert preflight.json()["error"] == "method_not_allowed"


async def test_searches_answer_and_limits_hold_while_redis_is_unreachable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``redis.url`` names a port nothing listens on: every check falls back to counting
    in the process (logged once), so requests are answered and the limit still holds.
    tests/integration/test_ratelimit_redis.py stops and restarts a real Redis."""
    settings = settings_with(
        tmp_path,
        redis=RedisSettings(url=SecretStr(f"redis://127.0.0.1:{free_port()}/0")),
        ratelimit=RateLimitSettings(default="3/minute"),
    )
    async with serve(settings) as api:
        for _ in range(3):
            assert (await api.client.post("/v1/search", json=SEARCH)).status_code == 200
        resp = await api.client.post("/v1/search", json=SEARCH)
        assert resp.status_code == 429, resp.text
    warnings = [r for r in caplog.records if "ratelimit.redis.unavailable" in r.getMessage()]
    assert len(warnings) == 1
