"""The HTTP API in this process, over given services: a client of one tenant.

The app with its lifespan (``asgi-lifespan``) reached through httpx's ASGI transport: the
request's JSON, middleware, authentication and the response model, no network. Used by
``bench.cache_hit`` (its in-process hits) and by ``bench.graph_sweep --http`` (every
search of a sweep).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence

import httpx
from asgi_lifespan import LifespanManager

from hsearch.runtime import Services
from hsearch.types import Scope
from hsearch_api.main import create_app

__all__ = ["api_client"]


@contextlib.asynccontextmanager
async def api_client(
    resources: Services,
    *,
    tenant: str,
    scopes: Sequence[Scope] = (Scope.SEARCH,),
    timeout: float = 60.0,
) -> AsyncIterator[httpx.AsyncClient]:
    """The app over ``resources`` (their settings: a benchmark turns rate limits off
    where it sends many requests), and a client with a new key of ``tenant`` (created if
    missing) holding ``scopes``."""
    root = logging.getLogger()
    handlers, levels = list(root.handlers), {n: logging.getLogger(n).level for n in ("", "hsearch")}
    app = create_app(services=resources)
    # create_app sets up the process's logging as a server's (every request at INFO);
    # the benchmark keeps its own.
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    async with LifespanManager(app) as manager:
        resources.tenancy.ensure_tenant(tenant, actor="bench")
        key = resources.tenancy.create_key(tenant, scopes=list(scopes), actor="bench").key
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app),
            base_url="http://bench",
            headers={"Authorization": f"Bearer {key}"},
            timeout=timeout,
        ) as client:
            yield client
