"""``hsearch mcp``: the MCP server over stdio, started by the MCP SDK's own client as a
desktop client starts it, an HTTP client of the live API with the key it was given:
the tools listed, a search, an answer with its citations, a submission refused to a
key that may only search, and another tenant's key seeing none of the documents."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from tests.unit.hsearch_client.conftest import Served, index, serving

pytestmark = [pytest.mark.process, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def indexed(tmp_path: Path) -> Iterator[Served]:
    with serving(tmp_path) as live:
        yield index(live)


@asynccontextmanager
async def stdio(served: Served, key: str, tmp_path: Path) -> AsyncIterator[Client]:
    """``hsearch mcp --url ...`` as a child process, its key in ``HSEARCH_API_KEY``."""
    env = {
        "PYTHONPATH": os.pathsep.join(
            str(ROOT / p) for p in ("shared/src", "services/api/src", "workers/ingest/src", ".")
        ),
        "HSEARCH_API_KEY": key,
        "HSEARCH_DATA_DIR": str(tmp_path / "client"),
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "hsearch.cli", "mcp", "--url", served.url],
        env=env,
        cwd=tmp_path,
    )
    async with Client(server, read_timeout_seconds=60) as client:
        yield client


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert result.structured_content is not None
    found: dict[str, Any] = result.structured_content
    return found


def refusal(result: CallToolResult) -> dict[str, Any]:
    assert result.is_error
    body: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]  # a text block
    return body


async def test_the_tools_over_stdio(indexed: Served, tmp_path: Path) -> None:
    async with stdio(indexed, indexed.key, tmp_path) as client:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == {
            "search",
            "answer",
            "get_document",
            "document_links",
            "list_documents",
            "submit_documents",
        }
        found = structured(
            await client.call_tool("search", {"query": "river floods", "mode": "keyword"})
        )
        assert {h["external_id"] for h in found["hits"]} == {"long", "short"}
        answer = structured(
            await client.call_tool("answer", {"query": "Where do rivers carry water?"})
        )
        assert answer["answer"] == "Rivers carry water down to the sea.[1]"
        assert answer["citations"][0]["external_id"] == "short"
        document = structured(await client.call_tool("get_document", {"external_id": "desert"}))
        assert document["text"] == "Deserts get very little rain."
        # Through the client package's get_document_links: no links, both ways.
        links = structured(await client.call_tool("document_links", {"external_id": "desert"}))
        assert links == {"external_id": "desert", "out": [], "back": []}


async def test_a_search_key_cannot_submit_and_another_tenant_sees_nothing(
    indexed: Served, tmp_path: Path
) -> None:
    documents = [{"external_id": "sea", "text": "The sea is salty."}]
    async with stdio(indexed, indexed.search_key, tmp_path) as searcher:
        refused = refusal(await searcher.call_tool("submit_documents", {"documents": documents}))
        assert refused["error"] == "insufficient_scope"
    async with stdio(indexed, indexed.other_key, tmp_path) as other:
        assert structured(await other.call_tool("search", {"query": "river"}))["hits"] == []
        answer = structured(await other.call_tool("answer", {"query": "Where do rivers go?"}))
        assert (answer["passages"], answer["citations"]) == ([], [])
        assert structured(await other.call_tool("list_documents", {}))["documents"] == []
        missing = refusal(await other.call_tool("get_document", {"external_id": "long"}))
        assert missing["error"] == "document_not_found"
