"""The tools on the API's own services (the ``/mcp`` endpoint): each call is admitted
as a ``/v1`` request with the same scopes would be (:func:`hsearch_api.deps.admit`:
tenant, scopes, a scoped search token's filter, the key's rate limit), then runs what
the route runs, with the same request model, service and answer mapping."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from pydantic import ValidationError
from starlette.requests import Request

from hsearch.errors import FieldError, HsearchError, InvalidRequestError
from hsearch.ingestion.api.documents import parse_include
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.runtime import Services
from hsearch.tenancy.service import TENANT_HEADER, Principal
from hsearch.types import Scope
from hsearch_api.deps import TOKEN_SCOPE, Caller, admit, caller_of
from hsearch_api.errors import field_path
from hsearch_api.limits import ApiLimits
from hsearch_api.mcp.tools import Backend, ToolError, build_server, tool_models
from hsearch_api.routers.answers import answer_request, answer_response
from hsearch_api.routers.documents import (
    document_input,
    document_links_read,
    document_read,
    job_accepted,
)
from hsearch_api.routers.search import run_search
from hsearch_api.schemas.answers import AnswerRequestBody
from hsearch_api.schemas.documents import DocumentCreate, DocumentPageRead
from hsearch_api.schemas.search import SearchRequest

__all__ = ["PRINCIPAL_KEY", "ServiceBackend", "local_server"]

PRINCIPAL_KEY = "hsearch.mcp.principal"
"""Where the ``/mcp`` route leaves the request's authenticated credential (ASGI scope)."""

SEARCHING = (Scope.SEARCH, TOKEN_SCOPE)
READING = (Scope.SEARCH, Scope.INGEST, TOKEN_SCOPE)
WRITING = (Scope.INGEST,)

T = TypeVar("T")


class ServiceBackend:
    """:class:`~hsearch_api.mcp.tools.Backend` for one HTTP request of the ``/mcp``
    endpoint: its credential, on this process's services."""

    def __init__(
        self,
        request: Request,
        *,
        search_request: type[SearchRequest],
        answer_request: type[AnswerRequestBody],
    ) -> None:
        self._request = request
        self._services = cast("Services", request.state.services)
        self._limits = cast("ApiLimits", request.app.state.limits)
        principal = request.scope.get(PRINCIPAL_KEY)
        if not isinstance(principal, Principal):  # the route always sets it
            msg = "an MCP request reached the tools without its credential"
            raise TypeError(msg)
        self._principal = principal
        self._search_request = search_request
        self._answer_request = answer_request

    async def _caller(self, scopes: tuple[str, ...], tool: str) -> Caller:
        tenant, token = await admit(
            self._principal,
            scopes=scopes,
            tenancy=self._services.tenancy,
            limits=self._limits,
            named_tenant=self._request.headers.get(TENANT_HEADER),
            action=f"MCP {tool}",
        )
        return caller_of(tenant, token)

    async def search(self, body: dict[str, Any]) -> dict[str, Any]:
        caller = await self._caller(SEARCHING, "search")
        request = self._search_request.model_validate(body)
        with self._limits.searches.slot():
            found = await run_search(request, caller=caller, service=self._services.search)
        return found.model_dump(mode="json", by_alias=True)

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        caller = await self._caller(SEARCHING, "answer")
        request = answer_request(self._answer_request.model_validate(body), caller)
        answered = await self._services.answers.answer(request)
        return answer_response(answered).model_dump(mode="json", by_alias=True)

    async def get_document(self, external_id: str, *, include_text: bool) -> dict[str, Any]:
        caller = await self._caller(READING, "get_document")
        documents = self._services.documents()
        view = await _in_thread(
            documents.get,
            tenant_id=caller.tenant_id,
            external_id=external_id,
            restriction=caller.restriction,
            include=parse_include(["text"] if include_text else []),
        )
        return document_read(view).model_dump(mode="json")

    async def document_links(self, external_id: str, *, types: list[str] | None) -> dict[str, Any]:
        caller = await self._caller(READING, "document_links")
        documents = self._services.documents()
        links = await _in_thread(
            documents.links,
            tenant_id=caller.tenant_id,
            external_id=external_id,
            types=types or None,
            restriction=caller.restriction,
        )
        return document_links_read(links).model_dump(mode="json")

    async def list_documents(
        self, *, source: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]:
        caller = await self._caller(READING, "list_documents")
        documents = self._services.documents()
        page = await _in_thread(
            documents.list,
            tenant_id=caller.tenant_id,
            source=source,
            limit=limit,
            cursor=cursor,
            restriction=caller.restriction,
        )
        read = DocumentPageRead(
            documents=[document_read(d) for d in page.documents], next_cursor=page.next_cursor
        )
        return read.model_dump(mode="json")

    async def submit_documents(self, documents: list[dict[str, Any]]) -> dict[str, Any]:
        caller = await self._caller(WRITING, "submit_documents")
        inputs = [document_input(DocumentCreate.model_validate(d)) for d in documents]
        services = self._services
        settings = services.settings

        def submit() -> dict[str, Any]:
            # The route's transaction: committed, then the job sent (after the commit).
            with unit_of_work(services.sessions, queue=services.queue) as uow:
                jobs = JobService(
                    uow,
                    settings=settings.ingest,
                    webhooks=settings.webhooks,
                    quotas=settings.quotas,
                )
                view = jobs.submit(tenant_id=caller.tenant_id, documents=inputs)
            return job_accepted(view).model_dump(mode="json")

        return await anyio.to_thread.run_sync(submit)

    def refusal(self, exc: Exception) -> ToolError | None:
        if isinstance(exc, ValidationError):
            exc = _invalid(exc)
        if isinstance(exc, HsearchError):
            return ToolError(exc.code, exc.message)
        return None


def local_server(
    *, search_request: type[SearchRequest], answer_request: type[AnswerRequestBody]
) -> MCPServer:
    """The MCP server of the ``/mcp`` endpoint, its inputs the app's request models."""

    async def backend_for(ctx: Context) -> Backend:
        request = ctx.request_context.request
        if not isinstance(request, Request):
            msg = "the /mcp tools run only within an HTTP request"
            raise TypeError(msg)
        return ServiceBackend(request, search_request=search_request, answer_request=answer_request)

    models = tool_models(search_request, answer_request)
    return build_server(backend_for, models=models)


def _invalid(exc: ValidationError) -> InvalidRequestError:
    return InvalidRequestError.of(
        [FieldError(field_path(tuple(e["loc"])), e["msg"]) for e in exc.errors()]
    )


async def _in_thread(fn: Callable[..., T], **kwargs: Any) -> T:
    """``fn(**kwargs)`` in a worker thread: the document services are synchronous."""
    return await anyio.to_thread.run_sync(functools.partial(fn, **kwargs))
