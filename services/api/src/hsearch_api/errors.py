"""One error contract: every error is ``{"error": code, "detail": message}``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hsearch.errors import (
    AuthenticationError,
    FieldError,
    HsearchError,
    InsufficientScopeError,
    InvalidRequestError,
)

logger = logging.getLogger(__name__)

_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})


def field_path(loc: tuple[object, ...]) -> str:
    """A pydantic error location as the field path errors name (``documents[0].tags[1]``);
    ``request`` for the whole of it."""
    # The first element says where the value came from (body, query string, path).
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in _SOURCES else loc)]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "request"


def _field_error(error: FieldError) -> dict[str, object]:
    out: dict[str, object] = {"field": error.field, "message": error.message}
    if error.line is not None:
        out["line"] = error.line
    return out


def _challenge(exc: HsearchError) -> dict[str, str] | None:
    """``WWW-Authenticate`` for a refused credential (RFC 6750, section 3): every 401,
    and a 403 for a missing scope, which names the scopes the route accepts."""
    if isinstance(exc, AuthenticationError):
        if type(exc) is AuthenticationError:  # no credential at all: no error code
            return {"WWW-Authenticate": 'Bearer realm="hsearch"'}
        return {"WWW-Authenticate": 'Bearer realm="hsearch", error="invalid_token"'}
    if isinstance(exc, InsufficientScopeError):
        scopes = " ".join(exc.required)
        return {
            "WWW-Authenticate": (
                f'Bearer realm="hsearch", error="insufficient_scope", scope="{scopes}"'
            )
        }
    return None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HsearchError)
    async def _domain(_request: Request, exc: HsearchError) -> JSONResponse:
        if exc.status_code >= 500:
            logger.warning("api.error code=%s detail=%s", exc.code, exc.message)
        content: dict[str, object] = {"error": exc.code, "detail": exc.message}
        if isinstance(exc, InvalidRequestError) and exc.errors:
            content["errors"] = [_field_error(e) for e in exc.errors]
        return JSONResponse(status_code=exc.status_code, content=content, headers=_challenge(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": field_path(tuple(e.get("loc", ()))), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return JSONResponse(
            status_code=422,
            content={"error": "invalid_request", "detail": detail, "errors": errors},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(
            status_code=exc.status_code, content={"error": code, "detail": str(exc.detail)}
        )
