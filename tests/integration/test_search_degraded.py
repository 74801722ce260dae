"""Search under partial failure, made real: a leg's Milvus connection goes through a
TCP proxy that the test stalls or cuts."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from hsearch.local.processes import Child
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
    # The tests search healthy, then break a leg and search again: the result cache would
    # rightly answer the second from the first (the data did not change).
    cache = stack.settings.cache.model_copy(update={"result_ttl_s": 0.0})
    settings = stack.settings.model_copy(update={"milvus": milvus, "cache": cache})
    async with api_client(settings, tenant=tenant) as c:
        job = await ingest(c, DOCS)
        assert job["status"] == "succeeded"
        yield c


async def timed_search(client: httpx.AsyncClient, **body: object) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    resp = await client.post("/v1/search", json={"query": "Document number 3", **body})
    return resp, time.perf_counter() - started


# The time budget of a search covers query encoding and the legs; encoding alone takes
# a few hundred ms on a busy 2-core machine, so the budget leaves the legs room.
BUDGET_MS = 1500
EXPECTED_STATUS = {ProxyMode.STALL: "timeout", ProxyMode.REFUSE: "error"}


def assert_timings_add_up(body: dict[str, Any]) -> None:
    """The stages run one after another and account for the whole search; the legs'
    own times overlap inside the retrieval stage."""
    timings = body["timings"]
    assert abs(sum(timings.values()) - body["took_ms"]) <= 2.0, body
    for leg in body["legs"]:
        assert leg["took_ms"] <= timings["retrieval_ms"] + 0.5, body


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
    resp, elapsed = await timed_search(proxied_client, leg_timeout_ms=BUDGET_MS)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["degraded"] == [broken]
    assert body["hits"], "the healthy leg still answers"
    for hit in body["hits"]:
        assert hit["explanation"][f"{broken}_rank"] is None
        assert hit["explanation"][f"{alive}_rank"] is not None
    legs = {leg["leg"]: leg for leg in body["legs"]}
    # A stalled leg misses its deadline; a refused one fails.
    assert legs[broken]["status"] == EXPECTED_STATUS[mode], legs[broken]
    assert legs[alive]["status"] == "ok"
    # The deadline holds: the budget covers the encoder and the legs; the margin is for
    # the cancellation to land and the event loop.
    assert elapsed < BUDGET_MS / 1000 + 1.0
    assert_timings_add_up(body)

    proxies[broken].set_mode(ProxyMode.PASS)


async def test_both_legs_failing_is_a_503(
    proxied_client: httpx.AsyncClient, proxies: dict[str, TcpProxy]
) -> None:
    for proxy in proxies.values():
        proxy.set_mode(ProxyMode.STALL)
    resp, elapsed = await timed_search(proxied_client, leg_timeout_ms=BUDGET_MS)
    assert resp.status_code == 503
    assert resp.json()["error"] == "search_unavailable"
    assert "dense" in resp.json()["detail"]
    assert "sparse" in resp.json()["detail"]
    assert elapsed < BUDGET_MS / 1000 + 1.0


async def test_single_leg_mode_with_its_leg_down_is_a_503(
    proxied_client: httpx.AsyncClient, proxies: dict[str, TcpProxy]
) -> None:
    proxies["dense"].set_mode(ProxyMode.REFUSE)
    resp, _ = await timed_search(proxied_client, mode="semantic", leg_timeout_ms=BUDGET_MS)
    assert resp.status_code == 503
    resp, _ = await timed_search(proxied_client, mode="keyword", leg_timeout_ms=BUDGET_MS)
    assert resp.status_code == 200
    assert resp.json()["degraded"] == []


async def test_a_leg_past_the_deadline_is_a_timeout_not_an_error(
    proxied_client: httpx.AsyncClient, proxies: dict[str, TcpProxy]
) -> None:
    # pymilvus raises a plain MilvusException ("Retry timeout") when its own deadline
    # fires; the leg must still be reported as a timeout. (A first search opens the
    # leg's connection, so the stalled call is the search itself.)
    resp, _ = await timed_search(proxied_client)
    assert resp.json()["degraded"] == []
    proxies["sparse"].set_mode(ProxyMode.STALL)
    resp, _ = await timed_search(proxied_client, leg_timeout_ms=BUDGET_MS)
    assert resp.status_code == 200, resp.text
    (sparse,) = (leg for leg in resp.json()["legs"] if leg["leg"] == "sparse")
    assert sparse["status"] == "timeout"
    assert "VectorStoreTimeoutError" in sparse["error"]
    assert "Retry timeout" in sparse["error"]
    assert_timings_add_up(resp.json())
    proxies["sparse"].set_mode(ProxyMode.PASS)
    # A budget too short for anything: every leg times out, none is an error.
    resp, _ = await timed_search(proxied_client, leg_timeout_ms=5)
    if resp.status_code == 503:
        # Each leg: no time left after encoding, no answer in time, or the store's own
        # deadline (a query vector from the embedding cache leaves the legs time to start).
        detail = resp.json()["detail"].removeprefix("every search leg failed (")
        for part in detail.split("; "):
            assert any(
                s in part for s in ("no answer", "no time left", "VectorStoreTimeoutError")
            ), detail
    else:
        assert resp.status_code == 200, resp.text
        statuses = {leg["status"] for leg in resp.json()["legs"]}
        assert statuses <= {"ok", "timeout"}, resp.json()["legs"]
