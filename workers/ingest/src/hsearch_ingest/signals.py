"""Per-process resources: built once per worker process on first use (after the
fork, so torch and the database pool are never shared across processes) and
released when the process shuts down."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import worker_process_shutdown, worker_shutdown

from hsearch.config import get_settings
from hsearch.ingestion.service import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.runtime import Resources, build_resources

logger = logging.getLogger(__name__)

_resources: Resources | None = None
_indexing: IndexingService | None = None


def get_indexing_service() -> IndexingService:
    global _resources, _indexing  # noqa: PLW0603 - one set of resources per process
    if _indexing is None:
        settings = get_settings()
        _resources = build_resources(settings)
        _indexing = IndexingService(
            session_factory=_resources.sessions,
            embedder=_resources.embedder,
            store=_resources.store,
            statistics=LexicalStatistics(_resources.sessions),
            chunk_max_chars=settings.ingest.chunk_max_chars,
            chunk_overlap_chars=settings.ingest.chunk_overlap_chars,
        )
        logger.info("worker.resources.ready encoder=%s", _resources.embedder.info.fingerprint)
    return _indexing


def get_resources() -> Resources:
    get_indexing_service()
    assert _resources is not None
    return _resources


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # celery is untyped
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _close(**_kwargs: Any) -> None:
    global _resources, _indexing  # noqa: PLW0603
    if _resources is not None:
        _resources.close()
    _resources = None
    _indexing = None
