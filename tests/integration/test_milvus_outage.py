"""The vector store stopped under a running API: a Milvus Lite server of this test's own
(never the session's shared one), the fake encoder, the API in process.

While it is down, a search answers a 503 in the error contract at once (within the
legs' deadline plus a margin, never a hang) and readiness reports the vector store
down. The same server restarted on the same port and data directory serves the same
API again, which is not restarted: its connections to Milvus recover on their own."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.local.processes import Child, start_milvus_lite
from hsearch.vectorstore.factory import create_vector_store
from tests.unit.api.conftest import Api, api_settings, serve

pytestmark = pytest.mark.integration

DOCS = [
    {"external_id": "dog", "title": "Dogs", "text": "The quick brown fox jumps over the lazy dog."},
    {"external_id": "cat", "title": "Cats", "text": "A cat sleeps all afternoon in the sun."},
]
LATE = {"external_id": "owl", "title": "Owls", "text": "An owl hunts mice at night."}
REPLACED = {"external_id": "cat", "title": "Cats", "text": "The cat sleeps on the mat."}
LEG_TIMEOUT_MS = 1000
# Encoding (fake encoder), fusion and the event loop, on a busy 2-core machine.
MARGIN_S = 1.5


class OwnMilvus:
    """A Milvus Lite server the test may stop and start again on the same port and
    data directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.child: Child | None = None
        self.port: int | None = None
        self.uri = ""
        self.start()

    def start(self) -> None:
        log = self.root / f"milvus-{time.monotonic_ns()}.log"
        self.child, self.uri = start_milvus_lite(self.root / "data", log=log, port=self.port)
        self.port = urlparse(self.uri).port

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


@pytest.fixture
def milvus(tmp_path: Path) -> Iterator[OwnMilvus]:
    server = OwnMilvus(tmp_path / "milvus")
    yield server
    server.stop()


async def search(api: Api, query: str = "lazy dog") -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    resp = await api.client.post(
        "/v1/search", json={"query": query, "leg_timeout_ms": LEG_TIMEOUT_MS}
    )
    return resp, time.perf_counter() - started


async def test_searches_fail_fast_while_milvus_is_down_and_recover_without_a_restart(
    tmp_path: Path, milvus: OwnMilvus
) -> None:
    settings = api_settings(tmp_path)
    settings = settings.model_copy(
        update={
            "milvus": settings.milvus.model_copy(
                update={"uri": milvus.uri, "collection": f"down_{uuid.uuid4().hex[:8]}"}
            ),
            # No result cache: every search below must reach Milvus.
            "cache": settings.cache.model_copy(update={"result_ttl_s": 0.0}),
        }
    )
    store = create_vector_store(settings.milvus, uri=milvus.uri)
    async with serve(settings, store=store, cache=InMemoryCacheBackend()) as api:
        resp = await api.client.post("/v1/documents", json={"documents": DOCS})
        assert resp.status_code == 202, resp.text
        assert api.services.indexing().process_job(api.queue.sent[-1]) == "succeeded"
        healthy, _ = await search(api)
        assert healthy.status_code == 200, healthy.text
        assert healthy.json()["hits"][0]["external_id"] == "dog"
        assert (await api.client.get("/readyz")).status_code == 200

        milvus.stop()
        for _ in range(3):  # not only the first call after the outage: every one
            down, elapsed = await search(api)
            assert down.status_code == 503, down.text
            body = down.json()
            assert set(body) == {"error", "detail"}, body
            assert body["error"] == "search_unavailable", body
            assert "dense" in body["detail"]
            assert "sparse" in body["detail"]
            assert elapsed < LEG_TIMEOUT_MS / 1000 + MARGIN_S, f"{elapsed:.2f} s: a hang"
        ready = await api.client.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["components"]["milvus"]["status"] == "error", ready.json()

        milvus.start()  # the same port and data directory; the API is not restarted
        deadline = time.monotonic() + 20
        # Each leg has its own connection, back on its own reconnect schedule: until
        # both are, a search answers 503 or, with one leg back, partial results flagged.
        while (resp := (await search(api))[0]).status_code != 200 or resp.json()["degraded"]:
            assert resp.status_code in (200, 503), resp.text
            assert time.monotonic() < deadline, f"searches did not recover: {resp.text}"
            await asyncio.sleep(0.1)
        assert resp.json()["hits"][0]["external_id"] == "dog", "the data is back too"
        # Readiness asks through the synchronous client, whose connection comes back on
        # gRPC's reconnect schedule, not necessarily with the searches' (0 to 0.5 s later
        # here).
        while (ready := await api.client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, f"readiness did not recover: {ready.text}"
            await asyncio.sleep(0.1)
        assert ready.json()["components"]["milvus"]["status"] == "ok"

        # Restarted again, and this time the synchronous client (the worker's, the
        # reconciler's and the tenant purge's reads) is the first to find it released.
        milvus.stop()
        milvus.start()
        deadline = time.monotonic() + 20
        while (ready := await api.client.get("/readyz")).status_code != 200:
            assert time.monotonic() < deadline, f"readiness did not recover: {ready.text}"
            await asyncio.sleep(0.1)
        tenant = settings.api.default_tenant
        assert store.count(tenant_id=tenant) == len(DOCS)
        assert len(store.tenant_chunk_ids(tenant_id=tenant)) == len(DOCS)
        resp = await api.client.post("/v1/documents", json={"documents": [LATE, REPLACED]})
        assert resp.status_code == 202, resp.text
        assert api.services.indexing().process_job(api.queue.sent[-1]) == "succeeded"
        owl = (await search(api, "owl hunts mice"))[0]
        assert owl.status_code == 200, owl.text
        assert owl.json()["hits"][0]["external_id"] == "owl"
        cat = (await search(api, "cat sleeps"))[0].json()
        assert [h["text"] for h in cat["hits"] if h["external_id"] == "cat"] == [
            REPLACED["text"]
        ], "the document's old chunks were deleted"
