"""``/mcp``: the MCP server (Model Context Protocol, streamable HTTP), with the same
credentials as ``/v1``.

The route authenticates the request's key (401 in the API's error contract) and hands
the request to the MCP SDK's transport; each tool call is then admitted as the ``/v1``
request it stands for (tenant, scopes, rate limit: :mod:`hsearch_api.mcp.local`).
Stateless (no session kept between requests, JSON answers, no server-sent events), so
that any API process answers any request, as for ``/v1``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from hsearch_api.deps import PrincipalDep
from hsearch_api.limits import Lifespan
from hsearch_api.mcp.local import PRINCIPAL_KEY

__all__ = ["create_router", "with_mcp"]

PATH = "/mcp"


def create_router(server: MCPServer) -> APIRouter:
    """The ``/mcp`` route of ``server`` (whose transport :func:`with_mcp` runs)."""
    router = APIRouter(tags=["mcp"])

    @router.api_route(PATH, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    async def mcp(request: Request, principal: PrincipalDep) -> Response:
        """The MCP server: hsearch's tools for models (docs/mcp.md)."""
        request.scope[PRINCIPAL_KEY] = principal
        return _Transport(server.session_manager)

    return router


def start_transport(server: MCPServer) -> StreamableHTTPSessionManager:
    """A new transport for ``server`` (one runs once: an app started again, as tests
    do, needs another). The app the SDK returns is not used: the route above is the
    API's own, behind its middleware (request ids, body size, CORS)."""
    server.streamable_http_app(
        streamable_http_path=PATH,
        stateless_http=True,
        json_response=True,
        # Host and Origin checks guard servers that take no credential from pages a
        # browser was lured to (DNS rebinding); every request here carries an API key.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server.session_manager


class _Transport(Response):
    """The response the MCP transport writes itself, to the request as it came."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        super().__init__()
        self._manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._manager.handle_request(scope, receive, send)


def with_mcp(lifespan: Lifespan, server: MCPServer) -> Lifespan:
    """``lifespan``, with a transport of ``server`` running inside it (its task group
    lives as long as the app)."""

    @asynccontextmanager
    async def wrapped(app: FastAPI) -> AsyncIterator[Any]:
        async with lifespan(app) as state, start_transport(server).run():
            yield state

    return wrapped
