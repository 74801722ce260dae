"""Per-process resources: built once per worker process on first use (after the
fork, so torch and the database pool are never shared across processes) and
released when the process shuts down."""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import worker_process_shutdown, worker_shutdown

from hsearch.config import get_settings
from hsearch.ingestion.indexer import IndexingService
from hsearch.runtime import Services, build_services

logger = logging.getLogger(__name__)

_services: Services | None = None
_indexing: IndexingService | None = None


def get_services() -> Services:
    global _services  # noqa: PLW0603 - one set of resources per process
    if _services is None:
        _services = build_services(get_settings())
        logger.info("worker.resources.ready encoder=%s", _services.embedder.info.fingerprint)
    return _services


def get_indexing_service() -> IndexingService:
    global _indexing  # noqa: PLW0603 - one indexing service per process
    if _indexing is None:
        _indexing = get_services().indexing()
    return _indexing


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # celery is untyped
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _close(**_kwargs: Any) -> None:
    global _services, _indexing  # noqa: PLW0603
    if _services is not None:
        _services.close()
    _services = None
    _indexing = None
