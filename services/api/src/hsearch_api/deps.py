"""Request dependencies, as ``Annotated`` aliases routers declare."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Annotated, cast

import anyio.to_thread
from fastapi import Depends, Header, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, SecurityScopes

from hsearch.compositions.answers.service import AnswerService
from hsearch.config import Settings
from hsearch.db.engine import SessionFactory
from hsearch.errors import (
    AuthenticationError,
    InsufficientScopeError,
    SessionRequiredError,
    UnsupportedMediaTypeError,
)
from hsearch.ingestion.api.documents import DocumentService
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import UnitOfWork, unit_of_work
from hsearch.ingestion.queue import JobQueue
from hsearch.ratelimit.policy import charged_scope
from hsearch.runtime import Services
from hsearch.search.service import SearchService
from hsearch.tenancy.service import (
    NOT_FOR_SEARCH_TOKENS,
    TENANT_HEADER,
    Principal,
    TenancyService,
)
from hsearch.tenancy.sessions import (
    CSRF_HEADER,
    SESSION_COOKIE,
    OperatorSession,
    OperatorSessions,
)
from hsearch.tenancy.tokens import SearchToken
from hsearch.types import CredentialRole, Scope
from hsearch.vectorstore.filters import FilterNode
from hsearch_api.limits import ApiLimits, get_api_limits
from hsearch_api.schemas.ndjson import NDJSON_MEDIA_TYPES

# Dependencies that only read the app's state are coroutines: FastAPI runs a plain
# function dependency in a worker thread, a hop per dependency per request that cost
# more than a cached search itself (docs/performance.md).


def services_of(request: Request) -> Services:
    return cast("Services", request.state.services)


async def get_services(request: Request) -> Services:
    return services_of(request)


async def get_settings_dep(request: Request) -> Settings:
    return services_of(request).settings


async def get_session_factory(request: Request) -> SessionFactory:
    return services_of(request).sessions


async def get_search_service(request: Request) -> SearchService:
    return services_of(request).search


async def get_answer_service(request: Request) -> AnswerService:
    return services_of(request).answers


async def get_document_service(request: Request) -> DocumentService:
    return services_of(request).documents()


async def get_job_queue(request: Request) -> JobQueue:
    return services_of(request).queue


ServicesDep = Annotated[Services, Depends(get_services)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
SessionFactoryDep = Annotated[SessionFactory, Depends(get_session_factory)]
JobQueueDep = Annotated[JobQueue, Depends(get_job_queue)]
SearchServiceDep = Annotated[SearchService, Depends(get_search_service)]
AnswerServiceDep = Annotated[AnswerService, Depends(get_answer_service)]
DocumentServiceDep = Annotated[DocumentService, Depends(get_document_service)]


def get_unit_of_work(sessions: SessionFactoryDep, queue: JobQueueDep) -> Iterator[UnitOfWork]:
    """The request's transaction: committed when the endpoint returns, rolled back if it
    raises; the jobs queued during the request are sent only after the commit."""
    with unit_of_work(sessions, queue=queue) as uow:
        yield uow


# scope="function": the commit and the sends finish before the response is sent, so a
# failed commit or send is the response (503), never a 202 for work that was lost.
UnitOfWorkDep = Annotated[UnitOfWork, Depends(get_unit_of_work, scope="function")]


async def get_job_service(uow: UnitOfWorkDep, settings: SettingsDep) -> JobService:
    return JobService(
        uow, settings=settings.ingest, webhooks=settings.webhooks, quotas=settings.quotas
    )


async def get_tenancy(request: Request) -> TenancyService:
    return services_of(request).tenancy


JobServiceDep = Annotated[JobService, Depends(get_job_service)]
TenancyDep = Annotated[TenancyService, Depends(get_tenancy)]

_bearer = HTTPBearer(
    auto_error=False,  # a missing key is answered in the API's error contract, below
    scheme_name="ApiKey",
    description="An API key (hsk_<prefix>_<secret>); it decides the tenant. Operator "
    f"credentials (hso_...) name the tenant they act for in {TENANT_HEADER}. A scoped "
    "search token (POST /v1/tokens) is accepted by POST /v1/search and GET /v1/documents "
    "only.",
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
    return await authenticate(tenancy, credentials.credentials)


PrincipalDep = Annotated[Principal, Depends(get_principal)]


_NamedTenant = Annotated[
    str | None,
    Header(
        alias=TENANT_HEADER,
        description="Operator credentials only: the tenant the request acts for "
        "(the action is written to the audit log). A tenant's key may not name "
        "another tenant.",
    ),
]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who a search or a document read is for: the tenant, and what a scoped search
    token restricts it to (``None``: a key, unrestricted within its tenant)."""

    tenant_id: str
    restriction: FilterNode | None = None
    """The token's mandatory filter, ANDed into every leg, count and document read."""
    max_top_k: int | None = None


TOKEN_SCOPE = "token"  # noqa: S105 - a scope name, not a secret
"""Listed among a route's security scopes when it also accepts a scoped search token."""
_TOKEN_KEY = "hsearch.search_token"  # noqa: S105 - where the request's scope holds it


async def get_tenant(
    request: Request,
    security_scopes: SecurityScopes,
    principal: PrincipalDep,
    tenancy: TenancyDep,
    named_tenant: _NamedTenant = None,
) -> str:
    """The tenant of the request, from its credential only (never from a body), as
    :func:`admit` decides it for the route's scopes (any of ``security_scopes``); a
    scoped search token's restriction is left on the request for :func:`caller`.

    Tests that run the app as a given tenant override this dependency."""
    tenant, token = await admit(
        principal,
        scopes=security_scopes.scopes,
        tenancy=tenancy,
        limits=get_api_limits(request),
        named_tenant=named_tenant,
        action=f"{request.method} {request.url.path}",
    )
    if token is not None:
        # In the request's own scope: request.state is the lifespan's, shared by requests.
        request.scope[_TOKEN_KEY] = token
    return tenant


async def admit(
    principal: Principal,
    *,
    scopes: Sequence[str],
    tenancy: TenancyService,
    limits: ApiLimits,
    named_tenant: str | None,
    action: str,
) -> tuple[str, SearchToken | None]:
    """Let ``principal`` do what needs one of ``scopes``: the tenant it acts for, and its
    scoped search token if it is one. A tenant key's own tenant, if it holds one of the
    scopes and its tenant is active; for an operator credential, the tenant it names,
    once ``action`` is in the audit log. A scoped search token is accepted only where
    ``scopes`` list :data:`TOKEN_SCOPE` (search, document reads). Then the request is
    counted against the key's rate limit (429 ``rate_limited`` past it). The one
    admission of ``/v1`` and of the MCP tools (``hsearch_api.mcp``)."""
    accepted = [Scope(s) for s in scopes if s != TOKEN_SCOPE]
    token: SearchToken | None = None
    if principal.role is CredentialRole.OPERATOR:
        act = partial(tenancy.act_for, principal, named_tenant=named_tenant, action=action)
        tenant = await anyio.to_thread.run_sync(act)
    else:
        if principal.token is not None:
            if TOKEN_SCOPE not in scopes:
                raise InsufficientScopeError(
                    NOT_FOR_SEARCH_TOKENS, required=[s.value for s in accepted]
                )
            token = principal.token
        tenant = tenancy.authorize(principal, accepted=accepted, named_tenant=named_tenant)
    # Counted once the credential is let in: a refused one costs its key nothing.
    scope = charged_scope(accepted, principal.scopes)
    await limits.rates.hit(scope=scope, key_prefix=principal.prefix)
    return tenant, token


async def authenticate(tenancy: TenancyService, key: str) -> Principal:
    """Who ``key`` speaks for: from the process's cache of verified keys with no I/O
    (the usual case), else checked against the database in a worker thread. Raises
    AuthenticationError (401) for an unknown, expired or revoked key."""
    principal = tenancy.cached(key)
    if principal is None:
        principal = await anyio.to_thread.run_sync(tenancy.authenticate, key)
    return principal


def caller_of(tenant: str, token: SearchToken | None) -> Caller:
    """The :class:`Caller` of a tenant, restricted by its scoped search token if any."""
    if token is None:
        return Caller(tenant)
    return Caller(tenant, restriction=token.filter, max_top_k=token.limits.max_top_k)


def caller(request: Request, tenant: str) -> Caller:
    """The :class:`Caller` of a route that accepts tokens, once :func:`get_tenant` ran."""
    token: SearchToken | None = request.scope.get(_TOKEN_KEY)
    return caller_of(tenant, token)


async def get_search_caller(
    request: Request,
    tenant: Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH, TOKEN_SCOPE])],
) -> Caller:
    return caller(request, tenant)


async def get_read_caller(
    request: Request,
    tenant: Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH, Scope.INGEST, TOKEN_SCOPE])],
) -> Caller:
    return caller(request, tenant)


# What each route accepts (docs/api.md, Authentication): a key holding any of the scopes.
SearchTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH])]
"""Searching."""
IngestTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.INGEST])]
"""Writing documents, and reading jobs."""
ReadTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH, Scope.INGEST])]
"""Reading documents: a search frontend shows the documents it found."""
AdminTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.ADMIN])]
"""Managing the tenant's own keys."""
SearchCallerDep = Annotated[Caller, Depends(get_search_caller)]
"""Searching, with a key or a scoped search token."""
ReadCallerDep = Annotated[Caller, Depends(get_read_caller)]
"""Reading documents, with a key or a scoped search token (which sees only what its
filter selects)."""
MintTenantDep = Annotated[str, Security(get_tenant, scopes=[Scope.SEARCH, Scope.ADMIN])]
"""Minting scoped search tokens."""


async def get_stats_tenant(
    request: Request,
    security_scopes: SecurityScopes,
    principal: PrincipalDep,
    tenancy: TenancyDep,
    named_tenant: Annotated[
        str | None,
        Header(
            alias=TENANT_HEADER,
            description="Operator credentials: the tenant to report (audited); absent: "
            "every tenant (audited too). A tenant's key reports its own tenant.",
        ),
    ] = None,
) -> str | None:
    """Whose stats a request reads: a tenant key with the admin scope, its own tenant;
    an operator, the tenant it names or, naming none, every tenant (``None``); either
    way an operator's request is written to the audit log."""
    if principal.role is CredentialRole.OPERATOR:
        action = f"{request.method} {request.url.path}"
        if named_tenant:
            act = partial(tenancy.act_for, principal, named_tenant=named_tenant, action=action)
            return await anyio.to_thread.run_sync(act)
        every = partial(tenancy.act_for_all, principal, action=action)
        await anyio.to_thread.run_sync(every)
        return None
    accepted = [Scope(s) for s in security_scopes.scopes]
    return tenancy.authorize(principal, accepted=accepted, named_tenant=named_tenant)


StatsTenantDep = Annotated[str | None, Security(get_stats_tenant, scopes=[Scope.ADMIN])]
"""The stats API's tenant: one tenant, or every tenant for an operator (``None``)."""


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


# The built-in pages (/ops, /playground): an operator's session cookie, not a key.


async def get_operator_sessions(request: Request) -> OperatorSessions:
    return services_of(request).operator_sessions


OperatorSessionsDep = Annotated[OperatorSessions, Depends(get_operator_sessions)]


async def get_operator_session(request: Request, sessions: OperatorSessionsDep) -> OperatorSession:
    """The request's operator session, from its cookie; the credential behind it is read
    again (in a worker thread). Raises SessionRequiredError (401) without a valid one."""
    cookie = request.cookies.get(SESSION_COOKIE)
    return await anyio.to_thread.run_sync(sessions.verify, cookie)


OperatorSessionDep = Annotated[OperatorSession, Depends(get_operator_session)]


async def get_optional_operator_session(
    request: Request, sessions: OperatorSessionsDep
) -> OperatorSession | None:
    """The request's operator session, or None (a page then sends the browser to log in)."""
    try:
        return await get_operator_session(request, sessions)
    except SessionRequiredError:
        return None


OptionalOperatorSessionDep = Annotated[
    OperatorSession | None, Depends(get_optional_operator_session)
]


async def get_csrf_checked_session(
    session: OperatorSessionDep,
    csrf: Annotated[str | None, Header(alias=CSRF_HEADER)] = None,
) -> OperatorSession:
    """The session of a state-changing request, once its CSRF header is checked (403)."""
    session.check_csrf(csrf)
    return session


CsrfSessionDep = Annotated[OperatorSession, Depends(get_csrf_checked_session)]
"""Every POST of the pages: a valid session and its CSRF token."""
