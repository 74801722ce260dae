"""One error contract: every error is ``{"error": code, "detail": message}`` (the
:class:`~hsearch_api.schemas.errors.ErrorBody` each route lists in the OpenAPI document):
the domain's errors, FastAPI's validation errors, Starlette's 404 and 405, the metadata
database's unavailability (503 ``metadata_unavailable`` with ``Retry-After``, whatever
the route: its transaction was rolled back, nothing was written), and any other
exception, which answers 500 ``internal_error`` with a fixed message (its cause is logged,
never sent)."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hsearch.db.engine import DATABASE_UNAVAILABLE, unavailable
from hsearch.errors import (
    AuthenticationError,
    FieldError,
    HsearchError,
    InsufficientScopeError,
    InvalidRequestError,
    QuotaExceededError,
    SessionRequiredError,
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


_NAMED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+|\[\d+\])*): (.+)", re.DOTALL)
"""A message that names its field first (``offset: pages end at ...``), as the services'
messages do."""


def _named_field(message: str) -> FieldError:
    """The field a service's message names first; ``request`` when it names none."""
    named = _NAMED.fullmatch(message)
    if named is None:
        return FieldError(field="request", message=message)
    return FieldError(field=named.group(1), message=named.group(2))


INTERNAL_ERROR_DETAIL = "the server failed to answer this request; it has been logged"
"""The 500 answer's message: the same for every unexpected error, so nothing of the cause
(a stack trace, a query, a path on the server) reaches a client."""


_UNPARSABLE_BODY = "There was an error parsing the body"
"""FastAPI's words for a body it could not decode (fastapi.routing)."""


def _invalid_json(error: Mapping[str, Any], body: object) -> dict[str, object]:
    """FastAPI's error for a body it could not parse as JSON, whose location is the
    character the parser stopped at (``("body", 0)``, which would read as ``[0]``): said
    as the body's fault, with the line and column, as editors count them."""
    loc = tuple(error.get("loc", ()))
    reason = str(error.get("ctx", {}).get("error", "")) or "not JSON"
    message = f"the body is not valid JSON: {reason}"
    if len(loc) == 2 and isinstance(loc[1], int) and isinstance(body, str):
        pos = loc[1]
        line = body.count("\n", 0, pos) + 1
        column = pos - (body.rfind("\n", 0, pos) + 1) + 1
        message += f" at line {line}, column {column} (character {pos})"
    return {"field": "request", "message": message}


def _whole_body(error: Mapping[str, Any]) -> bool:
    """Whether ``error`` refuses the body as a whole for not being an object (what
    FastAPI reports when it did not read the body as JSON)."""
    return tuple(error.get("loc", ())) == ("body",) and error.get("type") in (
        "model_attributes_type",
        "dict_type",
    )


def _is_json(media_type: str) -> bool:
    """Whether ``media_type`` (its parameters left out) declares JSON."""
    subtype = media_type.lower().rpartition("/")[2]
    return subtype == "json" or subtype.endswith("+json")


def _not_json_body(media_type: str) -> dict[str, object]:
    """The body sent as another media type: FastAPI reads JSON only when it is declared
    as such, and would say the body is not an object."""
    sent = media_type or "no Content-Type"
    return {
        "field": "request",
        "message": f"the body must be sent as Content-Type: application/json (it was {sent})",
    }


def _headers(exc: HsearchError) -> dict[str, str] | None:
    headers = _challenge(exc) or {}
    retry_after = getattr(exc, "retry_after", None)
    if isinstance(retry_after, int):
        headers["Retry-After"] = str(retry_after)
    return headers or None


def _challenge(exc: HsearchError) -> dict[str, str] | None:
    """``WWW-Authenticate`` for a refused credential (RFC 6750, section 3): every 401,
    and a 403 for a missing scope, which names the scopes the route accepts."""
    if isinstance(exc, SessionRequiredError):  # the pages' cookie, not a bearer token
        return None
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
    if isinstance(exc, QuotaExceededError) and exc.retry_after_s is not None:
        return {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return None


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HsearchError)
    async def _domain(_request: Request, exc: HsearchError) -> JSONResponse:
        if exc.status_code >= 500:
            logger.warning("api.error code=%s detail=%s", exc.code, exc.message)
        content: dict[str, object] = {"error": exc.code, "detail": exc.message}
        if isinstance(exc, InvalidRequestError) and exc.errors:
            content["errors"] = [_field_error(e) for e in exc.errors]
        elif isinstance(exc, InvalidRequestError) and exc.status_code == 422:
            # Every 422 lists its fields, whether pydantic or a service found the problem.
            content["errors"] = [_field_error(_named_field(exc.message))]
        return JSONResponse(status_code=exc.status_code, content=content, headers=_headers(exc))

    for kind in DATABASE_UNAVAILABLE:

        @app.exception_handler(kind)
        async def _database(request: Request, exc: Exception) -> JSONResponse:
            return await _domain(request, unavailable(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        media_type = request.headers.get("content-type", "").split(";", 1)[0].strip()
        errors = [
            _invalid_json(e, exc.body)
            if e.get("type") == "json_invalid"
            else _not_json_body(media_type)
            if _whole_body(e) and not _is_json(media_type)
            else {"field": field_path(tuple(e.get("loc", ()))), "message": e.get("msg", "")}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return JSONResponse(
            status_code=422,
            content={"error": "invalid_request", "detail": detail, "errors": errors},
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == _UNPARSABLE_BODY:
            # FastAPI's answer to a body it cannot decode at all (not UTF-8, say), while
            # one that is merely not JSON is a 422: one answer for both.
            error = {"field": "request", "message": "the body is not JSON in UTF-8"}
            return JSONResponse(
                status_code=422,
                content={
                    "error": "invalid_request",
                    "detail": f"request: {error['message']}",
                    "errors": [error],
                },
            )
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(
            status_code=exc.status_code,
            content={"error": code, "detail": str(exc.detail)},
            headers=exc.headers,  # a 405's Allow
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises the exception once this answer is sent, so the server logs
        # its traceback; this line ties it to the request.
        logger.error(
            "api.error.unhandled method=%s path=%s exception=%s",
            request.method,
            request.url.path,
            type(exc).__name__,
        )
        return JSONResponse(
            status_code=500, content={"error": "internal_error", "detail": INTERNAL_ERROR_DETAIL}
        )
