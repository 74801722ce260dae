"""The tools over the API's HTTP interface (``hsearch mcp``: the server a desktop client
starts, speaking MCP on stdio): every call is a request of the ``hsearch-client``
package, with the key the process was given, so the API checks it, its tenant, scopes
and rate limit as for any client."""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import Context, MCPServer

from hsearch_api.mcp.tools import Backend, ToolError, ToolModels, build_server, tool_models
from hsearch_client import ApiError, ApiUnavailableError, AsyncClient, ClientError

__all__ = ["HttpBackend", "remote_server"]


class HttpBackend:
    """:class:`~hsearch_api.mcp.tools.Backend` over one :class:`AsyncClient`."""

    def __init__(self, client: AsyncClient) -> None:
        self._client = client

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        query = body.pop("query")
        return (await self._client.search(query, **body)).to_json()

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        query = body.pop("query")
        return (await self._client.answer(query, **body)).to_json()

    async def get_document(self, external_id: str, *, include_text: bool) -> dict[str, Any]:
        found = await self._client.get_document(external_id, include_text=include_text)
        return found.to_json()

    async def document_links(self, external_id: str, *, types: list[str] | None) -> dict[str, Any]:
        found = await self._client.get_document_links(external_id, types=types)
        return found.to_json()

    async def list_documents(
        self, *, source: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        page = await self._client.documents_page(source=source, limit=limit, cursor=cursor)
        return page.to_json()

    async def submit_documents(self, documents: list[dict[str, Any]]) -> dict[str, Any]:
        return (await self._client.submit_documents(documents)).to_json()

    def refusal(self, exc: Exception) -> ToolError | None:
        if isinstance(exc, ApiError):
            return ToolError(exc.code, exc.detail)
        if isinstance(exc, ApiUnavailableError | ClientError):
            return ToolError("api_unavailable", str(exc))
        return None


def remote_server(client: AsyncClient, *, models: ToolModels | None = None) -> MCPServer:
    """The MCP server whose tools call the API through ``client``."""
    backend = HttpBackend(client)

    async def backend_for(_ctx: Context) -> Backend:
        return backend

    return build_server(backend_for, models=models or tool_models())
