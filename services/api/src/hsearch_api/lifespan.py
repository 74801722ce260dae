"""Start-up and shut-down: the typed state every request reads."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import TypedDict

from fastapi import FastAPI

from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.metrics.exposition import process_exited
from hsearch.runtime import Services, build_services, keep_startup_heap


class State(TypedDict):
    services: Services


def make_lifespan(  # type: ignore[no-untyped-def]  # FastAPI's lifespan type is a private alias
    settings: Settings,
    *,
    migrate: bool = True,
    services: Services | None = None,
    legs: Sequence[str] | None = None,
):
    """Migrate (optionally), then serve ``services``: the given ones, which their builder
    closes, or ones built from ``settings`` here and closed at shut-down. ``legs``: the
    sources the app's routes were built for; services that register others are refused
    (the OpenAPI document would not describe them)."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[State]:
        try:
            async with _serving() as state:
                yield state
        finally:
            # This process's live samples leave the shared metrics directory with it.
            process_exited(os.getpid())

    @asynccontextmanager
    async def _serving() -> AsyncIterator[State]:
        if migrate:
            upgrade_database(settings.database_url)
        if services is not None:
            _ = services.tenancy  # the server key is read (or generated) before serving
            yield {"services": services}
            return
        built = build_services(settings, with_reranker=True, with_cache=True)
        try:
            if legs is not None and tuple(legs) != built.search.sources.names:
                msg = (
                    f"the app was built for the legs {list(legs)}, the services register "
                    f"{list(built.search.sources.names)}"
                )
                raise RuntimeError(msg)
            _ = built.tenancy
            keep_startup_heap()  # the encoder and the services live as long as the process
            # Snapshots of the search figures on a timer: /ops opens on the recent past
            # even when nothing scrapes /metrics.
            history = asyncio.create_task(built.keep_search_history())
            try:
                yield {"services": built}
            finally:
                history.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await history
        finally:
            await built.aclose()

    return lifespan
