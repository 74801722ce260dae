"""The metadata database stopped under a running API: a Postgres server of this test's
own (never the machine's shared one), Milvus Lite, the fake encoder, the API in process.

While it is down, searches keep answering with the credentials, data generations and
lexical statistics the API read within the stale window; a credential it never
verified is refused with 503, and so is ingestion, writing nothing. Once Postgres is
back, the same API (not restarted) ingests and searches again, with nothing lost."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.types import Scope
from hsearch.vectorstore.factory import create_vector_store
from tests.integration.services import PrivatePostgres, private_postgres
from tests.unit.api.conftest import Api, api_settings, serve

pytestmark = pytest.mark.integration

DOCS = [
    {"external_id": "dog", "title": "Dogs", "text": "The quick brown fox jumps over the lazy dog."},
    {"external_id": "cat", "title": "Cats", "text": "A cat sleeps all afternoon in the sun."},
    {"external_id": "river", "title": "Rivers", "text": "Rivers carry water down to the sea."},
]
LATE = {"external_id": "owl", "title": "Owls", "text": "An owl hunts mice at night."}


@pytest.fixture
def postgres() -> Iterator[PrivatePostgres]:
    with private_postgres() as server:
        yield server


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def search(api: Api, query: str, *, key: str | None = None) -> httpx.Response:
    headers = bearer(key) if key is not None else None
    return await api.client.post("/v1/search", json={"query": query}, headers=headers)


async def submit(api: Api, documents: list[dict[str, Any]]) -> httpx.Response:
    return await api.client.post("/v1/documents", json={"documents": documents})


async def test_searches_answer_and_ingestion_waits_while_the_database_is_down(
    tmp_path: Path, postgres: PrivatePostgres, milvus_uri: str
) -> None:
    settings = api_settings(tmp_path)
    settings = settings.model_copy(
        update={
            "database": settings.database.model_copy(
                update={"url": SecretStr(postgres.url), "stale_s": 300.0}
            ),
            "milvus": settings.milvus.model_copy(
                update={"uri": milvus_uri, "collection": f"outage_{uuid.uuid4().hex[:8]}"}
            ),
            # No cache of verified keys: every request asks the database, so only the
            # stale window can answer while it is down.
            "auth": settings.auth.model_copy(update={"cache_ttl_s": 0.0, "stale_ttl_s": 60.0}),
        }
    )
    store = create_vector_store(settings.milvus, uri=milvus_uri)
    async with serve(settings, store=store, cache=InMemoryCacheBackend()) as api:
        tenancy = api.services.tenancy
        tenant = settings.api.default_tenant
        unseen = tenancy.create_key(tenant, scopes=list(Scope), actor="test").key
        resp = await submit(api, DOCS)
        assert resp.status_code == 202, resp.text
        assert api.services.indexing().process_job(api.queue.sent[-1]) == "succeeded"
        healthy = await search(api, "lazy dog")
        assert healthy.status_code == 200, healthy.text
        assert healthy.json()["hits"][0]["external_id"] == "dog"
        assert not healthy.json()["degraded"]

        postgres.stop()
        sent = len(api.queue.sent)
        started = time.perf_counter()
        same = await search(api, "lazy dog")
        assert same.status_code == 200, same.text
        assert same.json()["hits"][0]["external_id"] == "dog"
        assert same.json()["cached"], "the generation read before the outage still keys"
        assert not same.json()["degraded"], "the statistics read before the outage serve"
        # Terms never read: the keyword leg cannot be weighed, the dense leg answers.
        other = await search(api, "water flowing to the sea")
        assert other.status_code == 200, other.text
        assert other.json()["degraded"] == ["sparse"]
        assert other.json()["hits"]
        assert time.perf_counter() - started < 10, "an outage is noticed fast"

        refused = await search(api, "lazy dog", key=unseen)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"] == "metadata_unavailable"
        assert int(refused.headers["Retry-After"]) > 0

        rejected = await submit(api, [LATE])
        assert rejected.status_code == 503, rejected.text
        assert rejected.json()["error"] == "metadata_unavailable"
        assert int(rejected.headers["Retry-After"]) > 0
        assert len(api.queue.sent) == sent, "no job sent for a submission not recorded"

        postgres.start()  # back, on the same port: the API is not restarted
        deadline = time.monotonic() + 15
        while (resp := await submit(api, [LATE])).status_code == 503:
            assert time.monotonic() < deadline, f"ingestion did not resume: {resp.text}"
            await asyncio.sleep(0.1)
        assert resp.status_code == 202, resp.text
        assert api.services.indexing().process_job(api.queue.sent[-1]) == "succeeded"
        assert (await search(api, "lazy dog", key=unseen)).status_code == 200
        listed = await api.client.get("/v1/documents")
        assert listed.status_code == 200, listed.text
        ids = {d["external_id"] for d in listed.json()["documents"]}
        assert ids == {"dog", "cat", "river", "owl"}, "nothing lost, nothing half-written"
        owl = await search(api, "owl hunts mice")
        assert owl.status_code == 200
        assert owl.json()["hits"][0]["external_id"] == "owl"
        assert not owl.json()["degraded"]
