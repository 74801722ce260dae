"""One error contract: every error is ``{"error": code, "detail": message}``."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from hsearch.errors import HsearchError

logger = logging.getLogger(__name__)

_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})


def _location(loc: tuple[object, ...]) -> str:
    # The first element says where the value came from (body, query string, path).
    parts = [str(p) for p in (loc[1:] if loc and loc[0] in _SOURCES else loc)]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HsearchError)
    async def _domain(_request: Request, exc: HsearchError) -> JSONResponse:
        if exc.status_code >= 500:
            logger.warning("api.error code=%s detail=%s", exc.code, exc.message)
        return JSONResponse(
            status_code=exc.status_code, content={"error": exc.code, "detail": exc.message}
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": _location(tuple(e.get("loc", ()))), "message": e.get("msg", "")}
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
