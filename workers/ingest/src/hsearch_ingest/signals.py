"""Per-process resources: built when a pool process starts (after the fork, so torch
and the database pool are never shared across processes; the encoder is loaded before
the first task, not by it) and released when the process shuts down. Each pool
process also runs the sweeper that re-sends abandoned jobs (hsearch.ingestion.leases)."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery.signals import worker_process_init, worker_process_shutdown, worker_shutdown

from hsearch.config import get_settings
from hsearch.ingestion.indexer import IndexingService
from hsearch.ingestion.leases import JobSweeper
from hsearch.runtime import Services, build_services

logger = logging.getLogger(__name__)

_services: Services | None = None
_indexing: IndexingService | None = None
_sweeper: JobSweeper | None = None
_stop_sweeping = threading.Event()


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


@worker_process_init.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _start(**_kwargs: Any) -> None:
    global _indexing, _sweeper  # noqa: PLW0603 - one of each per process
    services = get_services()  # the encoder loads now, not at the first job
    _sweeper = services.sweeper()
    _indexing = services.indexing(on_finished=_sweeper.wake)
    _stop_sweeping.clear()
    threading.Thread(
        target=_sweeper.run,
        args=(_stop_sweeping,),
        kwargs={"interval_s": services.settings.ingest.sweep_interval_s},
        name="hsearch-sweeper",
        daemon=True,
    ).start()


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # celery is untyped
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _close(**_kwargs: Any) -> None:
    global _services, _indexing, _sweeper  # noqa: PLW0603
    _stop_sweeping.set()
    if _sweeper is not None:
        _sweeper.close()
    if _services is not None:
        _services.close()
    _services = None
    _indexing = None
    _sweeper = None
