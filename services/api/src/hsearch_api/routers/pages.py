"""The built-in pages: ``/ops/login``, ``/ops`` (live charts) and ``/playground`` (a
search run as a tenant, explained); docs/operations.md, Pages.

An operator credential is exchanged for a signed session cookie
(:mod:`hsearch.tenancy.sessions`); every POST carries the session's CSRF token. The
pages are static files of this package (no CDN) that read the JSON endpoints below.

No ``from __future__ import annotations`` here: the playground's route is defined in
:func:`create_router` with the search request model built there (as in ``search.py``).
"""

from collections.abc import Sequence
from dataclasses import asdict
from functools import cache, partial
from importlib.resources import files
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from hsearch.config import CookieSecurity, OpsSettings, SearchSettings
from hsearch.tenancy.service import TENANT_HEADER
from hsearch.tenancy.sessions import (
    CSRF_COOKIE,
    CSRF_HEADER,
    SESSION_COOKIE,
    IssuedSession,
    new_csrf_token,
)
from hsearch_api.deps import (
    AnswerServiceDep,
    Caller,
    CsrfSessionDep,
    OperatorSessionDep,
    OperatorSessionsDep,
    OptionalOperatorSessionDep,
    SearchServiceDep,
    ServicesDep,
    TenancyDep,
)
from hsearch_api.routers.answers import answer_request, answer_response
from hsearch_api.routers.search import run_search
from hsearch_api.schemas.answers import AnswerRequestBody, AnswerResponse
from hsearch_api.schemas.pages import (
    DashboardRead,
    LoginRequest,
    SessionRead,
    TenantOptionRead,
)
from hsearch_api.schemas.search import SearchResponse, search_request_model

LOGIN_PATH = "/ops/login"
STATIC_PATH = "/ops/static"

# The pages load their own scripts and styles only: no inline script, nothing remote.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def page(name: str) -> str:
    """A page's HTML, shipped in this package (``pages/<name>.html``)."""
    return files("hsearch_api").joinpath("pages", f"{name}.html").read_text(encoding="utf-8")


def static_directory() -> str:
    """Where the pages' scripts, styles and the vendored chart library are."""
    return str(files("hsearch_api").joinpath("pages", "static"))


def _secure(request: Request, settings: OpsSettings) -> bool:
    if settings.cookie_secure is CookieSecurity.AUTO:
        return request.url.scheme == "https"
    return settings.cookie_secure is CookieSecurity.ALWAYS


def _set_csrf_cookie(response: Response, token: str, *, secure: bool, max_age: int) -> None:
    # Readable by the page's script (it echoes it in X-CSRF-Token): not HttpOnly.
    response.set_cookie(
        CSRF_COOKIE,
        token,
        max_age=max_age,
        path="/",
        secure=secure,
        httponly=False,
        samesite="strict",
    )


def _html(name: str) -> HTMLResponse:
    return HTMLResponse(page(name), headers=PAGE_HEADERS)


def create_router(search: SearchSettings, ops: OpsSettings, *, legs: Sequence[str]) -> APIRouter:
    """The pages and their JSON endpoints; the playground validates searches against the
    limits in ``search`` and the registered ``legs``. Left out of the OpenAPI document:
    they serve the pages."""
    request_model = search_request_model(search, legs)
    router = APIRouter(include_in_schema=False)

    assets = StaticFiles(directory=static_directory())

    @router.get(STATIC_PATH + "/{asset:path}")
    async def static(asset: str, request: Request) -> Response:
        """The pages' scripts, styles and chart library (a route, not a mount, so the
        request metrics name it by its template)."""
        return await assets.get_response(asset, request.scope)

    @router.get(LOGIN_PATH, response_model=None)
    async def login_page(request: Request, session: OptionalOperatorSessionDep) -> Response:
        """The login form; sets the CSRF cookie its POST echoes (double submit). Logged
        in already: on to /ops."""
        if session is not None:
            return RedirectResponse("/ops", 303)
        response = _html("login")
        if not request.cookies.get(CSRF_COOKIE):
            _set_csrf_cookie(response, new_csrf_token(), secure=_secure(request, ops), max_age=3600)
        return response

    @router.post(LOGIN_PATH)
    async def login(
        body: LoginRequest,
        request: Request,
        response: Response,
        sessions: OperatorSessionsDep,
        csrf: Annotated[str | None, Header(alias=CSRF_HEADER)] = None,
    ) -> SessionRead:
        """Exchange an operator credential for a session cookie."""
        issued: IssuedSession = await anyio.to_thread.run_sync(
            partial(
                sessions.login,
                body.key.get_secret_value(),
                csrf_cookie=request.cookies.get(CSRF_COOKIE),
                csrf_header=csrf,
            )
        )
        secure = _secure(request, ops)
        response.set_cookie(
            SESSION_COOKIE,
            issued.cookie,
            max_age=sessions.ttl_s,
            path="/",
            secure=secure,
            httponly=True,
            samesite="strict",
        )
        # A new token with the session: one the page held before login is not reused.
        _set_csrf_cookie(response, issued.session.csrf, secure=secure, max_age=sessions.ttl_s)
        return SessionRead(operator=issued.session.principal.prefix, expires_in_s=sessions.ttl_s)

    @router.post("/ops/logout", status_code=204)
    async def logout(
        session: CsrfSessionDep, sessions: OperatorSessionsDep, response: Response
    ) -> None:
        """End the session: the browser drops both cookies."""
        await anyio.to_thread.run_sync(sessions.logout, session)
        response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
        response.delete_cookie(CSRF_COOKIE, path="/", samesite="strict")

    @router.get("/ops", response_model=None)
    async def ops_page(session: OptionalOperatorSessionDep) -> Response:
        """Live charts of searches, latency, cache, ingest and jobs."""
        return _html("ops") if session is not None else RedirectResponse(LOGIN_PATH, 303)

    @router.get("/playground", response_model=None)
    async def playground_page(session: OptionalOperatorSessionDep) -> Response:
        """Run a search as a tenant and see each hit explained."""
        return _html("playground") if session is not None else RedirectResponse(LOGIN_PATH, 303)

    @router.get("/ops/api/session")
    async def whoami(session: OperatorSessionDep, sessions: OperatorSessionsDep) -> SessionRead:
        """The session's operator."""
        return SessionRead(operator=session.principal.prefix, expires_in_s=sessions.ttl_s)

    @router.get("/ops/api/dashboard")
    async def dashboard(_session: OperatorSessionDep, services: ServicesDep) -> DashboardRead:
        """Every process's totals and the gauges read now; the page makes the rates."""
        return DashboardRead.model_validate(asdict(await services.dashboard()))

    @router.get("/ops/api/tenants")
    async def tenants(_session: OperatorSessionDep, tenancy: TenancyDep) -> list[TenantOptionRead]:
        """The tenants an operator may search as."""
        found = await anyio.to_thread.run_sync(tenancy.list_tenants)
        return [TenantOptionRead(id=t.id, name=t.name, status=t.status) for t in found]

    @router.post("/ops/api/search")
    async def playground_search(
        body: request_model,  # type: ignore[valid-type]  # a model built at run time
        session: CsrfSessionDep,
        tenancy: TenancyDep,
        service: SearchServiceDep,
        tenant: Annotated[str | None, Header(alias=TENANT_HEADER)] = None,
    ) -> SearchResponse:
        """A search as the tenant named in X-Hsearch-Tenant, written to the audit log like
        any operator request for a tenant."""
        act = partial(
            tenancy.act_for,
            session.principal,
            named_tenant=tenant,
            action="POST /ops/api/search",
        )
        acting = await anyio.to_thread.run_sync(act)
        return await run_search(body, caller=Caller(tenant_id=acting), service=service)

    @router.post("/ops/api/answer")
    async def playground_answer(
        body: AnswerRequestBody,
        session: CsrfSessionDep,
        tenancy: TenancyDep,
        service: AnswerServiceDep,
        tenant: Annotated[str | None, Header(alias=TENANT_HEADER)] = None,
    ) -> AnswerResponse:
        """An answer as the tenant named in X-Hsearch-Tenant (not streamed), audited
        like any operator request for a tenant."""
        act = partial(
            tenancy.act_for,
            session.principal,
            named_tenant=tenant,
            action="POST /ops/api/answer",
        )
        acting = await anyio.to_thread.run_sync(act)
        request = answer_request(body, Caller(tenant_id=acting))
        return answer_response(await service.answer(request))

    return router
