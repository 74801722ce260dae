"""Search under partial failure, made real: a leg's Milvus connection goes through a
TCP proxy that the test stalls or cuts."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlparse

import httpx
import pytest

from hsearch.processes import Child
from tests.integration.conftest import Stack, api_client
from tests.integration.jobs import ingest
from tests.integration.proxy import ProxyMode, TcpProxy

pytestmark = pytest.mark.integration

DOCS = [
    {"external_id": f"d{i}", "title": f"Doc {i}", "text": f"Document number {i} about topic {i}."}
    for i in range(6)
]


@pytest.fixture
def proxies(stack: Stack) -> Iterator[dict[str, TcpProxy]]:
    target = urlparse(stack.milvus_uri)
    assert target.hostname is not None
    assert target.port is not None
    made = {leg: TcpProxy(target.hostname, target.port) for leg in ("dense", "sparse")}
    yield made
    for proxy in made.values():
        proxy.close()


@pytest.fixture
async def proxied_client(
    stack: Stack, tenant: str, proxies: dict[str, TcpProxy], worker: Child
) -> AsyncIterator[httpx.AsyncClient]:
    milvus = stack.settings.milvus.model_copy(
        update={"dense_uri": proxies["dense"].uri, "sparse_uri": proxies["sparse"].uri}
    )
    async with api_client(stack.settings.model_copy(update={"milvus": milvus}), tenant=tenant) as c:
        job = await ingest(c, DOCS)
        assert job["status"] == "succeeded"
        yield c


async def timed_search(client: httpx.AsyncClient, **body: object) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    resp = await client.post("/v1/search", json={"query": "Document number 3", **body})
    return resp, time.perf_counter() - started


@pytest.mark.parametrize(("broken", "alive"), [("sparse", "dense"), ("dense", "sparse")])
@pytest.mark.parametrize("mode", [ProxyMode.STALL, ProxyMode.REFUSE])
async def test_a_failing_leg_degrades_the_answer(
    proxied_client: httpx.AsyncClient,
    proxies: dict[str, TcpProxy],
    broken: str,
    alive: str,
    mode: ProxyMode,
) -> None:
    resp, _ = await timed_search(proxied_client)
    assert resp.json()["degraded"] == []

    proxies[broken].set_mode(mode)
    resp, elapsed = await timed_search(proxied_client, leg_timeout_ms=500)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["degraded"] == [broken]
    assert body["hits"], "the healthy leg still answers"
    for hit in body["hits"]:
        assert hit["explanation"][f"{broken}_rank"] is None
        assert hit["explanation"][f"{alive}_rank"] is not None
    legs = {leg["leg"]: leg for leg in body["legs"]}
    assert legs[broken]["status"] in {"timeout", "error"}
    assert legs[alive]["status"] == "ok"
    # The deadline holds: 500 ms plus a margin for the encoder and the event loop.
    assert elapsed < 0.5 + 1.5

    proxies[broken].set_mode(ProxyMode.PASS)


async def test_both_legs_failing_is_a_503(
    proxied_client: httpx.AsyncClient, proxies: dict[str, TcpProxy]
) -> None:
    for proxy in proxies.values():
        proxy.set_mode(ProxyMode.STALL)
    resp, elapsed = await timed_search(proxied_client, leg_timeout_ms=300)
    assert resp.status_code == 503
    assert resp.json()["error"] == "search_unavailable"
    assert "dense" in resp.json()["detail"]
    assert "sparse" in resp.json()["detail"]
    assert elapsed < 0.3 + 1.5


async def test_single_leg_mode_with_its_leg_down_is_a_503(
    proxied_client: httpx.AsyncClient, proxies: dict[str, TcpProxy]
) -> None:
    proxies["dense"].set_mode(ProxyMode.REFUSE)
    resp, _ = await timed_search(proxied_client, mode="semantic", leg_timeout_ms=300)
    assert resp.status_code == 503
    resp, _ = await timed_search(proxied_client, mode="keyword", leg_timeout_ms=300)
    assert resp.status_code == 200
    assert resp.json()["degraded"] == []
