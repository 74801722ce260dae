"""Every request's id, metrics and log line (docs/metrics.md).

An ASGI middleware, outermost but for Starlette's error handler, so that every answer
is counted, refused bodies (413) and unexpected errors (500) included:

* the request id: the caller's ``X-Request-Id`` when well-formed
  (:func:`hsearch.logging.valid_request_id`), else a new one; bound to the request's
  log records, stored on the jobs it submits, sent with their tasks, and returned in
  the response's ``X-Request-Id``;
* ``hsearch_http_requests_total`` and ``hsearch_http_request_duration_seconds`` by
  route *template* (``/v1/jobs/{job_id}``; ``unmatched`` for a path no route has), so
  the labels stay bounded whatever paths are asked for;
* one ``http.request`` log line with the method, the route template, the status and the
  time: never the raw path or its query string.
"""

from __future__ import annotations

import logging
import time

from starlette.datastructures import Headers, MutableHeaders
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hsearch.logging import REQUEST_ID_HEADER, bind_request_id, new_request_id, valid_request_id
from hsearch.metrics import instruments

__all__ = ["UNMATCHED_ROUTE", "RequestObserver"]

logger = logging.getLogger("hsearch_api.http")

UNMATCHED_ROUTE = "unmatched"


class RequestObserver:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = valid_request_id(Headers(scope=scope).get(REQUEST_ID_HEADER)) or (
            new_request_id()
        )
        status = 500  # what the caller gets if the app raises before answering
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        with bind_request_id(request_id):
            try:
                await self._app(scope, receive, send_with_id)
            finally:
                seconds = time.perf_counter() - started
                route = _route_template(scope)
                method = str(scope.get("method", ""))
                instruments.record_http(route=route, method=method, status=status, seconds=seconds)
                logger.info(
                    "http.request method=%s route=%s status=%d duration_ms=%.1f",
                    method,
                    route,
                    status,
                    seconds * 1000,
                )


def _route_template(scope: Scope) -> str:
    """The template of the route that answered (Starlette's router records it in the
    scope), the app's own fixed documents (``/openapi.json``, ``/docs``: FastAPI serves
    them without a route in the scope), or :data:`UNMATCHED_ROUTE`."""
    route = scope.get("route")
    path = getattr(route, "path", None) if isinstance(route, BaseRoute) else None
    if isinstance(path, str) and path:
        return path
    app = scope.get("app")
    fixed = {getattr(app, name, None) for name in ("openapi_url", "docs_url", "redoc_url")}
    asked = scope.get("path")
    return asked if asked in fixed - {None} and isinstance(asked, str) else UNMATCHED_ROUTE
