"""The API's limits (docs/api.md, Limits): the per-key rate limits and the cap on
concurrent searches (:class:`ApiLimits`, built with the app), and the request body
limit (``api.max_request_bytes``), enforced before any route reads a body.

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
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, cast

from fastapi import Depends, FastAPI, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hsearch.config import Settings
from hsearch.ratelimit.concurrency import ConcurrencyGate
from hsearch.ratelimit.limiter import RateLimiter
from hsearch.ratelimit.policy import RateLimitPolicy
from hsearch.ratelimit.redis import RedisRateLimitStorage, redis_storage

__all__ = ["ApiLimits", "BodySizeLimit", "SearchSlotDep", "get_api_limits", "with_limits"]


@dataclass(frozen=True, slots=True)
class ApiLimits:
    """One API process's rate limiter and search gate."""

    rates: RateLimiter
    searches: ConcurrencyGate
    redis: RedisRateLimitStorage | None

    @classmethod
    def from_settings(cls, settings: Settings) -> ApiLimits:
        url = settings.redis.url
        shared = (
            None
            if url is None
            else redis_storage(url.get_secret_value(), timeout_s=settings.ratelimit.redis_timeout_s)
        )
        rates = RateLimiter(
            RateLimitPolicy(settings.ratelimit),
            shared=None if shared is None else shared.storage,
            retry_s=settings.ratelimit.redis_retry_s,
        )
        gate = ConcurrencyGate(
            settings.api.max_concurrent_searches, setting="api.max_concurrent_searches"
        )
        return cls(rates=rates, searches=gate, redis=shared)

    async def aclose(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def with_limits(lifespan: Lifespan, limits: ApiLimits) -> Lifespan:
    """``lifespan``, then ``limits`` closed at shut-down."""

    @asynccontextmanager
    async def wrapped(app: FastAPI) -> AsyncIterator[Any]:
        try:
            async with lifespan(app) as state:
                yield state
        finally:
            await limits.aclose()

    return wrapped


def get_api_limits(request: Request) -> ApiLimits:
    return cast("ApiLimits", request.app.state.limits)


async def search_slot(request: Request) -> AsyncIterator[None]:
    """Holds one of the process's search slots for the request (503 ``overloaded`` at
    once when none is free)."""
    with get_api_limits(request).searches.slot():
        yield


SearchSlotDep = Annotated[None, Depends(search_slot, scope="function")]


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
