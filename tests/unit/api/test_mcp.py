"""``/mcp``, driven by the MCP SDK's own client over streamable HTTP against the live
API: the tools listed with input schemas from the API's request models, a search and
an answer with its citations as structured content, documents read and listed, a
submission refused to a key without the ingest scope, and a key of another tenant
seeing none of the first tenant's documents through any tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from hsearch.config import RateLimitSettings
from hsearch.types import Scope
from hsearch_client import Client as ApiClient
from hsearch_client import Retry
from hsearch_client.errors import RateLimitedError
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import live_api
from tests.unit.hsearch_client.conftest import Served, index, serving


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The live API (uvicorn) with keys of two tenants: the client package's tests'."""
    with serving(tmp_path) as live:
        yield live


@pytest.fixture
def indexed(served: Served) -> Served:
    return index(served)


@asynccontextmanager
async def mcp_client(served: Served, key: str | None) -> AsyncIterator[Client]:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client,
    ):
        yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    text = result.content[0]
    assert json.loads(text.text) == result.structured_content  # type: ignore[union-attr]  # a text block
    found: dict[str, Any] = result.structured_content
    return found


def refusal(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]  # a text block
    return body


async def test_the_tools_are_listed_with_the_api_s_request_schemas(indexed: Served) -> None:
    async with mcp_client(indexed, indexed.key) as client:
        listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {
        "search",
        "answer",
        "get_document",
        "document_links",
        "list_documents",
        "submit_documents",
    }
    search = tools["search"].input_schema
    assert search["required"] == ["query"]
    top_k = search["properties"]["top_k"]
    # The server's limits, as POST /v1/search enforces them.
    assert (top_k["minimum"], top_k["maximum"]) == (1, 100)
    assert search["properties"]["mode"]["$ref"].endswith("SearchMode")
    assert tools["search"].annotations is not None
    assert tools["search"].annotations.read_only_hint is True
    assert tools["submit_documents"].annotations is not None
    assert tools["submit_documents"].annotations.read_only_hint is False
    assert "citations" in (tools["answer"].output_schema or {})["properties"]
    assert all(len(t.description or "") > 80 for t in tools.values())


async def test_search_answer_and_documents_through_the_tools(indexed: Served) -> None:
    async with mcp_client(indexed, indexed.key) as client:
        found = structured(
            await client.call_tool("search", {"query": "river floods", "mode": "keyword"})
        )
        assert {h["external_id"] for h in found["hits"]} == {"long", "short"}
        assert found["hits"][0]["snippet"]

        answer = structured(
            await client.call_tool("answer", {"query": "Where do rivers carry water?"})
        )
        assert answer["answer"] == "Rivers carry water down to the sea.[1]"
        assert answer["citations"][0]["external_id"] == "short"
        assert answer["citations"][0]["quote"] == "Rivers carry water down to the sea."
        assert answer["passages"]
        assert answer["lazy"] is None

        lazy = structured(
            await client.call_tool(
                "answer",
                {
                    "query": "Where do rivers carry water?",
                    "strategy": "lazy",
                    "budget": {"relevance_tests": 3},
                },
            )
        )
        assert lazy["citations"][0]["external_id"] == "short"
        assert lazy["lazy"]["budget"]["relevance_tests"] == {"used": 3, "allowed": 3}
        assert lazy["lazy"]["stopped"] == "budget_spent"

        document = structured(await client.call_tool("get_document", {"external_id": "long"}))
        assert document["text"].startswith("The river 0 floods")
        page = structured(await client.call_tool("list_documents", {"limit": 2}))
        assert [d["external_id"] for d in page["documents"]] == ["desert", "long"]
        assert page["next_cursor"]

        missing = refusal(await client.call_tool("get_document", {"external_id": "nowhere"}))
        assert missing["error"] == "document_not_found"
        # Arguments the input schema refuses: the SDK's error, naming the field.
        invalid = await client.call_tool("search", {"query": "river", "top_k": 0})
        assert invalid.is_error
        assert "top_k" in invalid.content[0].text  # type: ignore[union-attr]  # a text block


async def test_submitting_needs_the_ingest_scope(served: Served) -> None:
    documents = [{"external_id": "sea", "title": "Seas", "text": "The sea is salty."}]
    async with mcp_client(served, served.search_key) as searcher:
        refused = refusal(await searcher.call_tool("submit_documents", {"documents": documents}))
        assert refused["error"] == "insufficient_scope"
        assert structured(await searcher.call_tool("search", {"query": "sea"}))["hits"] == []
    async with mcp_client(served, served.key) as writer:
        accepted = structured(await writer.call_tool("submit_documents", {"documents": documents}))
    with ApiClient(served.url, api_key=served.key) as api:
        job = api.wait_for_job(accepted["job_id"], timeout_s=30, poll_interval_s=0.05)
        assert job.status == "succeeded"
        assert api.get_document("sea").title == "Seas"


async def test_another_tenant_sees_none_of_the_documents(indexed: Served) -> None:
    async with mcp_client(indexed, indexed.other_key) as other:
        found = structured(await other.call_tool("search", {"query": "river floods"}))
        assert found["hits"] == []
        answer = structured(await other.call_tool("answer", {"query": "Where do rivers go?"}))
        assert answer["passages"] == []
        assert answer["citations"] == []
        assert structured(await other.call_tool("list_documents", {}))["documents"] == []
        refused = refusal(await other.call_tool("get_document", {"external_id": "long"}))
        assert refused["error"] == "document_not_found"


async def test_a_documents_links_both_ways_and_never_another_tenants(served: Served) -> None:
    documents = [
        {
            "external_id": "sea",
            "title": "Seas",
            "text": "The sea is salty.",
            "links": [{"target": "river", "type": "fed-by"}, {"target": "gone"}],
        },
        {
            "external_id": "river",
            "title": "Rivers",
            "text": "Rivers run.",
            "links": [{"target": "sea"}],
        },
    ]
    with ApiClient(served.url, api_key=served.key) as api:
        job = api.submit_documents(documents)
        assert api.wait_for_job(job.job_id, timeout_s=30, poll_interval_s=0.05).status == (
            "succeeded"
        )
    async with mcp_client(served, served.search_key) as client:
        links = structured(await client.call_tool("document_links", {"external_id": "sea"}))
        assert links["out"] == [
            {"external_id": "river", "title": "Rivers", "type": "fed-by", "direction": "out"},
            {"external_id": "gone", "title": None, "type": "link", "direction": "out"},
        ]
        assert links["back"] == [
            {"external_id": "river", "title": "Rivers", "type": "link", "direction": "in"}
        ]
        only = structured(
            await client.call_tool("document_links", {"external_id": "sea", "types": ["link"]})
        )
        assert [x["external_id"] for x in only["out"]] == ["gone"]
    async with mcp_client(served, served.other_key) as other:
        refused = refusal(await other.call_tool("document_links", {"external_id": "sea"}))
        assert refused["error"] == "document_not_found"


async def test_without_a_key_the_endpoint_answers_401_in_the_api_s_contract(
    served: Served,
) -> None:
    async with httpx.AsyncClient(base_url=served.url) as http:
        resp = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert resp.status_code == 401
        assert resp.json()["error"] == "unauthenticated"
        assert resp.headers["www-authenticate"].startswith("Bearer")
        wrong = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer hsk_nope"},
        )
        assert (wrong.status_code, wrong.json()["error"]) == (401, "invalid_api_key")


async def test_tool_calls_are_charged_to_the_key_s_rate_limit(tmp_path: Path) -> None:
    """Two searches a minute: the third call, by /v1 or a tool, is refused alike."""
    settings = api_settings(tmp_path / "server").model_copy(
        update={"ratelimit": RateLimitSettings(scopes={Scope.SEARCH: "2/minute"})}
    )
    with live_api(settings) as api:
        served = Served(api=api, key=api.key, search_key=api.key, other_key=api.key)
        async with mcp_client(served, api.key) as client:
            assert not (await client.call_tool("search", {"query": "a"})).is_error
            with ApiClient(api.url, api_key=api.key, retry=Retry(retries=0)) as rest:
                rest.search("b")
                with pytest.raises(RateLimitedError):
                    rest.search("c")
            refused = refusal(await client.call_tool("search", {"query": "d"}))
            assert refused["error"] == "rate_limited"
            assert "retry after" in refused["detail"]
