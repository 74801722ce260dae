"""The API's clients against the real stack: the app served by uvicorn on the session's
Postgres, Redis, Milvus Lite and tiny BGE-M3, a real Celery worker indexing. The
``hsearch-client`` package submits, waits, searches page by page and asks (no model
server here: the answer comes back degraded, with its passages), and the MCP SDK's
client does the same through ``/mcp``; another tenant's key sees none of it, through
either."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from hsearch.local.processes import Child, free_port, wait_until
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import Scope
from hsearch_api.main import create_app
from hsearch_client import AsyncClient, Client
from hsearch_client.errors import DocumentNotFoundError, InsufficientScopeError
from tests.integration.conftest import Stack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DOCS = [
    {"external_id": "fox", "title": "Fox", "text": "The quick brown fox jumps over the dog."},
    {"external_id": "milvus", "title": "Milvus", "text": "Milvus runs dense and sparse search."},
    {"external_id": "coffee", "title": "Coffee", "text": "Espresso needs a fine grind."},
]


@dataclass
class Served:
    url: str
    key: str
    search_key: str
    other_key: str


@pytest.fixture
def served(stack: Stack, worker: Child) -> Iterator[Served]:
    """The API over HTTP (uvicorn, in a thread) with keys of two fresh tenants."""
    suffix = uuid.uuid4().hex[:8]
    with open_tenancy(stack.settings) as tenancy:
        first = tenancy.create_tenant(f"clients {suffix}", tenant_id=f"c{suffix}", actor="test")
        other = tenancy.create_tenant(f"others {suffix}", tenant_id=f"o{suffix}", actor="test")
        search_key = tenancy.create_key(first.tenant.id, scopes=[Scope.SEARCH], actor="test")
    port = free_port()
    config = uvicorn.Config(
        create_app(stack.settings), host="127.0.0.1", port=port, log_level="warning", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="clients-api", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=120, what="the API")
        yield Served(
            url=f"http://127.0.0.1:{port}",
            key=first.key.key,
            search_key=search_key.key,
            other_key=other.key.key,
        )
    finally:
        server.should_exit = True
        thread.join(60)


def test_the_client_package_on_the_real_stack(served: Served) -> None:
    with Client(served.url, api_key=served.key) as client:
        accepted = client.submit_documents(DOCS)
        job = client.wait_for_job(accepted.job_id, timeout_s=120, poll_interval_s=0.2)
        assert job.status == "succeeded", job
        page = client.search("quick brown fox", top_k=3, group_by_document=True)
        assert page.hits[0].external_id == "fox"
        assert page.hits[0].explanation is not None
        pages = list(client.search_pages("quick brown fox", top_k=1, group_by_document=True))
        paged = [h.external_id for p in pages for h in p.hits]
        assert paged[0] == "fox"
        assert len(pages) == len(paged) == len(set(paged)) == 3, paged
        assert [d.external_id for d in client.list_documents()] == ["coffee", "fox", "milvus"]
        answer = client.answer("What does Milvus run?")
        # No model server in this stack: no answer, the reason, and the passages found.
        assert answer.answer is None
        assert answer.degraded
        assert "milvus" in {p.external_id for p in answer.passages}
    with (
        Client(served.url, api_key=served.search_key) as searcher,
        pytest.raises(InsufficientScopeError),
    ):
        searcher.submit_documents(DOCS[:1])
    with Client(served.url, api_key=served.other_key) as other:
        assert other.search("quick brown fox").hits == []
        with pytest.raises(DocumentNotFoundError):
            other.get_document("fox")


async def test_the_async_client_and_mcp_on_the_real_stack(served: Served) -> None:
    async with AsyncClient(served.url, api_key=served.key) as client:
        accepted = await client.submit_documents(DOCS)
        job = await client.wait_for_job(accepted.job_id, timeout_s=120, poll_interval_s=0.2)
        assert job.status == "succeeded", job
    async with mcp(served, served.key) as tools:
        listed = {t.name for t in (await tools.list_tools()).tools}
        assert {"search", "answer", "submit_documents"} <= listed
        found = (await tools.call_tool("search", {"query": "quick brown fox"})).structured_content
        assert found is not None
        assert found["hits"][0]["external_id"] == "fox"
        answered = await tools.call_tool("answer", {"query": "What does Milvus run?"})
        body: dict[str, Any] = answered.structured_content or {}
        assert (body["answer"], body["citations"]) == (None, [])
        assert body["degraded"]
        assert "milvus" in {p["external_id"] for p in body["passages"]}
    async with mcp(served, served.other_key) as other:
        found = (await other.call_tool("search", {"query": "quick brown fox"})).structured_content
        assert found is not None
        assert found["hits"] == []
        missing = await other.call_tool("get_document", {"external_id": "fox"})
        assert missing.is_error
        assert json.loads(missing.content[0].text)["error"] == "document_not_found"  # type: ignore[union-attr]  # a text block


@asynccontextmanager
async def mcp(served: Served, key: str) -> AsyncIterator[McpClient]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http,
        McpClient(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client,
    ):
        yield client
