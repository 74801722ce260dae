"""The real FastAPI app in-process, on embedded parts only.

``build_services`` with an in-memory vector store and an in-memory job queue, the fake
encoder (settings), a temporary SQLite metadata database migrated by the lifespan:
no Postgres, Redis or Milvus. Requests go through ``httpx.ASGITransport`` with the
lifespan run, as in production, and authenticate as the real app requires: the client
sends a key of the default tenant holding every scope (``Api.key``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import tempfile
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from hsearch.cache.protocol import CacheBackend
from hsearch.config import (
    ApiSettings,
    EncoderKind,
    EncoderSettings,
    SearchSettings,
    Settings,
    WebhookSettings,
)
from hsearch.db.migrate import upgrade_database
from hsearch.embedding.protocol import Embedder
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.llm.protocol import LLM
from hsearch.runtime import Services, build_services
from hsearch.search.sources import Source
from hsearch.types import Scope
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import VectorStore
from hsearch_api.main import create_app
from tests.unit.budget import UNHURRIED


@dataclass(frozen=True)
class Api:
    client: httpx.AsyncClient
    """Sends ``key`` with every request."""
    services: Services
    queue: InMemoryJobQueue
    transport: httpx.ASGITransport
    key: str
    """A key of the default tenant with every scope."""

    def anonymous(self) -> httpx.AsyncClient:
        """A client of the same app that sends no credential of its own."""
        return httpx.AsyncClient(transport=self.transport, base_url="http://test")


def default_tenant_key(services: Services) -> str:
    """A key of the settings' default tenant (created if missing), with every scope."""
    tenant = services.settings.api.default_tenant
    services.tenancy.ensure_tenant(tenant, actor="test")
    return services.tenancy.create_key(tenant, scopes=list(Scope), actor="test").key


def api_settings(data_dir: Path, **search: Any) -> Settings:
    """Embedded settings in ``data_dir`` with the fake encoder; ``search`` overrides
    search settings (the budget: ``UNHURRIED``). Every section is given, so no ``HSEARCH_*``
    variable leaks in."""
    return Settings(
        _env_file=None,
        data_dir=data_dir,
        encoder=EncoderSettings(kind=EncoderKind.FAKE),
        search=SearchSettings(**(UNHURRIED | search)),
        api=ApiSettings(migrate_on_start=True),
        webhooks=WebhookSettings(),
    )


@functools.cache
def migrated_database() -> bytes:
    """An embedded metadata database migrated to head, once per session. Each app
    ``serve`` starts gets a copy: its lifespan still runs the migrations, which find
    nothing left to do (``tests/unit/test_migrations.py`` runs them on empty databases,
    and the client tier's apps migrate their own)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hsearch.sqlite"
        upgrade_database(f"sqlite:///{path}")
        return path.read_bytes()


@contextlib.asynccontextmanager
async def serve(
    settings: Settings,
    *,
    store: VectorStore | None = None,
    queue: InMemoryJobQueue | None = None,
    cache: CacheBackend | None = None,
    extra_sources: Sequence[Source] = (),
    llm: LLM | None = None,
    embedder: Embedder | None = None,
) -> AsyncIterator[Api]:
    """The app on ``settings``, an in-memory store and queue unless others are given;
    the search caches on ``cache`` if given (none otherwise); ``extra_sources``
    registered after the dense and sparse legs; ``embedder`` instead of the settings'
    encoder. A new embedded database starts as a copy of ``migrated_database()``."""
    database = settings.data_dir / "hsearch.sqlite"
    if settings.database.url is None and not database.exists():
        assert settings.database_url == f"sqlite:///{database.resolve()}"
        database.parent.mkdir(parents=True, exist_ok=True)
        database.write_bytes(migrated_database())
    queue = InMemoryJobQueue() if queue is None else queue
    services = build_services(
        settings,
        store=store or InMemoryVectorStore(),
        queue=queue,
        cache=cache,
        extra_sources=extra_sources,
        llm=llm,
        embedder=embedder,
    )
    try:
        async with LifespanManager(create_app(settings, services=services)) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            key = default_tenant_key(services)
            async with httpx.AsyncClient(
                transport=transport,
                base_url="http://test",
                headers={"Authorization": f"Bearer {key}"},
            ) as client:
                yield Api(client, services, queue, transport, key)
    finally:
        await services.aclose()


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    async with serve(api_settings(tmp_path)) as served:
        yield served


async def ingest(
    api: Api, documents: list[dict[str, Any]], client: httpx.AsyncClient | None = None
) -> None:
    """Submit ``documents`` (as ``client``, default the tenant's) and index the job."""
    resp = await (client or api.client).post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"


def sse_events(body: str) -> list[tuple[str, Any]]:
    """A ``text/event-stream`` body's events as ``(event, JSON data)``."""
    out = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out
