"""Start-up and shut-down: the typed state every request reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypedDict

from fastapi import FastAPI

from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.queue import CeleryJobQueue, JobQueue, create_celery
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.runtime import Resources, build_resources
from hsearch.search.service import SearchService


class State(TypedDict):
    resources: Resources
    search: SearchService
    queue: JobQueue


def make_lifespan(settings: Settings, *, migrate: bool = True):  # type: ignore[no-untyped-def]  # FastAPI's lifespan type is a private alias
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[State]:
        if migrate:
            upgrade_database(settings.database_url)
        resources = build_resources(settings, with_reranker=True)
        search = SearchService(
            embedder=resources.embedder,
            store=resources.store,
            statistics=LexicalStatistics(resources.sessions),
            settings=settings.search,
            reranker=resources.reranker,
            rerank_depth=settings.rerank.depth,
        )
        queue = CeleryJobQueue(create_celery(settings.broker_url, name="hsearch-api"))
        try:
            yield {"resources": resources, "search": search, "queue": queue}
        finally:
            await resources.store.aclose()
            resources.close()

    return lifespan
