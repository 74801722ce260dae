"""The request body limit (``api.max_request_bytes``), before any route reads a body.

Starlette and FastAPI read a body whole, whatever its size. This ASGI middleware refuses
a body over the limit with the API's error contract and status 413, naming the limit:
by its ``Content-Length`` before reading a byte, or, for a body without one (chunked),
as soon as what has arrived passes the limit. A body within the limit is handed on
unchanged.

Starlette 1.10 and FastAPI 0.165 have a ``max_body_size`` of their own, but it answers
a plain-text "Content Too Large": no error code, and no word of which limit or setting
was passed, which every other error of this API gives (``{"error", "detail"}``).
Rewriting that response would take more code than this middleware.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodySizeLimit"]


class BodySizeLimit:
    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self._app = app
        self._max = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self._max:
            await self._refuse(send, got=f"{declared} bytes")
            return
        received = 0
        buffered: list[Message] = []
        while True:  # read the body first: a route must never see part of a refused one
            message = await receive()
            buffered.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > self._max:
                await self._refuse(send, got=f"more than {self._max} bytes")
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return buffered.pop(0) if buffered else await receive()

        await self._app(scope, replay, send)

    async def _refuse(self, send: Send, *, got: str) -> None:
        detail = f"request body: at most {self._max} bytes (api.max_request_bytes), got {got}"
        body = json.dumps({"error": "payload_too_large", "detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
