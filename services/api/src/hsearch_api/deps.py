"""Request dependencies, as ``Annotated`` aliases routers declare."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Annotated, cast

import anyio.to_thread
from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import Settings
from hsearch.errors import AuthenticationError, UnsupportedMediaTypeError
from hsearch.ingestion.dispatch import UnitOfWork, unit_of_work
from hsearch.ingestion.documents import DocumentService
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.queue import JobQueue
from hsearch.runtime import Services
from hsearch.search.service import SearchService
from hsearch.tenancy.service import TENANT_HEADER, Principal, TenancyService
from hsearch.types import CredentialRole, Scope
from hsearch_api.schemas.ndjson import NDJSON_MEDIA_TYPES


def get_services(request: Request) -> Services:
    return cast("Services", request.state.services)


def get_settings_dep(request: Request) -> Settings:
    return get_services(request).settings


def get_session_factory(request: Request) -> sessionmaker[Session]:
    return get_services(request).sessions


def get_search_service(request: Request) -> SearchService:
    return get_services(request).search


def get_document_service(request: Request) -> DocumentService:
    return get_services(request).documents()


def get_job_queue(request: Request) -> JobQueue:
    return get_services(request).queue


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionFactoryDep = Annotated[sessionmaker[Session], Depends(get_session_factory)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
DocumentServiceDep = Annotated[DocumentService, Depends(get_document_service)]


def get_unit_of_work(sessions: SessionFactoryDep, queue: JobQueueDep) -> Iterator[UnitOfWork]:
    """The request's transaction: committed when the endpoint returns, rolled back if it
    raises; the jobs queued during the request are sent only after the commit."""
    with unit_of_work(sessions, queue=queue) as uow:
        yield uow


# scope="function": the commit and the sends finish before the response is sent, so a
# failed commit or send is the response (503), never a 202 for work that was lost.
UnitOfWorkDep = Annotated[UnitOfWork, Depends(get_unit_of_work, scope="function")]


def get_job_service(uow: UnitOfWorkDep, settings: SettingsDep) -> JobService:
    return JobService(uow, settings=settings.ingest, webhooks=settings.webhooks)


def get_tenancy(request: Request) -> TenancyService:
    return get_services(request).tenancy


JobServiceDep = Annotated[JobService, Depends(get_job_service)]
TenancyDep = Annotated[TenancyService, Depends(get_tenancy)]

_bearer = HTTPBearer(
    auto_error=False,  # a missing key is answered in the API's error contract, below
    scheme_name="ApiKey",
    description="An API key (hsk_<prefix>_<secret>); it decides the tenant. Operator "
    f"credentials (hso_...) name the tenant they act for in {TENANT_HEADER}.",
)


async def get_principal(
    tenancy: TenancyDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    """Who the request's key speaks for: from the process's cache of verified keys with
    no I/O (the usual case), else checked against the database in a worker thread.
    Raises AuthenticationError (401) for a missing, unknown, expired or revoked key."""
    if credentials is None:
        raise AuthenticationError("no API key: send Authorization: Bearer <key>")
    key = credentials.credentials
    principal = tenancy.cached(key)
    if principal is None:
        principal = await anyio.to_thread.run_sync(tenancy.authenticate, key)
    return principal


PrincipalDep = Annotated[Principal, Depends(get_principal)]


async def get_tenant(
    request: Request,
    security_scopes: SecurityScopes,
    principal: PrincipalDep,
    tenancy: TenancyDep,
    named_tenant: Annotated[
        str | None,
        Header(
            alias=TENANT_HEADER,
            description="Operator credentials only: the tenant the request acts for "
            "(the action is written to the audit log). A tenant's key may not name "
            "another tenant.",
        ),
    ] = None,
) -> str:
    """The tenant of the request, from its credential only (never from a body): a
    tenant key's own tenant, if it holds one of the scopes the route accepts (any of
    ``security_scopes``) and its tenant is active; for an operator credential, the
    tenant it names, once the request is in the audit log.

    Tests that run the app as a given tenant override this dependency."""
    if principal.role is CredentialRole.OPERATOR:
        action = f"{request.method} {request.url.path}"
        act = partial(tenancy.act_for, principal, named_tenant=named_tenant, action=action)
        return await anyio.to_thread.run_sync(act)
    accepted = [Scope(s) for s in security_scopes.scopes]
    return tenancy.authorize(principal, accepted=accepted, named_tenant=named_tenant)


# What each route accepts (docs/api.md, Authentication): a key holding any of the scopes.
SearchTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH])]
"""Searching."""
IngestTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.INGEST])]
"""Writing documents, and reading jobs."""
ReadTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH, Scope.INGEST])]
"""Reading documents: a search frontend shows the documents it found."""
AdminTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.ADMIN])]
"""Managing the tenant's own keys."""


async def get_ndjson_body(request: Request) -> bytes:
    """The body of an NDJSON upload, refused with 415 unless declared as NDJSON (a JSON
    body sent here by mistake would otherwise fail line by line)."""
    declared = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if declared not in NDJSON_MEDIA_TYPES:
        msg = (
            f"content-type: send {NDJSON_MEDIA_TYPES[0]} (one JSON document per line), "
            f"got {declared or 'none'!r}"
        )
        raise UnsupportedMediaTypeError(msg)
    return await request.body()


NdjsonBodyDep = Annotated[bytes, Depends(get_ndjson_body)]
