"""Per-process resources: built when the worker's pool starts (``worker_process_init``;
the solo pool, celery_app.py, runs tasks in the worker process itself, and a prefork
child would send it after the fork, so torch and the database pool are never shared
across processes; the encoder is loaded before the first task, not by it) and released
when the process shuts down. Each worker process also runs the sweeper that re-sends
abandoned jobs (hsearch.ingestion.worker.leases).

Each task's log records carry the id of the API request that submitted its job (the
task header :data:`~hsearch.ingestion.queue.REQUEST_ID_TASK_HEADER`). With
``PROMETHEUS_MULTIPROC_DIR`` set, the worker records its metrics there and is marked
dead when it exits; ``metrics.worker_port`` serves them (docs/metrics.md)."""

from __future__ import annotations

import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from celery.signals import (
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from hsearch.config import get_settings
from hsearch.errors import BackendError
from hsearch.ingestion.queue import REQUEST_ID_TASK_HEADER
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.leases import JobSweeper
from hsearch.logging import request_id, valid_request_id
from hsearch.metrics.exposition import process_exited, start_worker_server
from hsearch.runtime import Services, build_services, keep_startup_heap

logger = logging.getLogger(__name__)

_services: Services | None = None
_indexing: IndexingService | None = None
_sweeper: JobSweeper | None = None
_stop_sweeping = threading.Event()
_request_ids: dict[str, contextvars.Token[str | None]] = {}


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


_START_RETRY_MAX_S = 30.0
"""The longest wait between two attempts to build the process's services at start."""


def services_when_ready(sleep: Callable[[float], None] = time.sleep) -> Services:
    """The process's services, built before it takes a task. While a backing service is
    down (Milvus: the store connects as it is built), they are built again, 1 s, 2 s,
    4 s ... at most 30 s apart, each failure logged: the worker takes no task meanwhile,
    since it could index none. Any other error (a collection of another encoder, a bad
    setting) ends the process, for its supervisor to report. Raised out of Celery's
    ``worker_process_init`` handler, either was logged and ignored: the worker took
    tasks, built its services at the first (and failed it), and never ran a sweeper.

    SIGTERM (what ``hsearch run``, compose and Kubernetes send) and Ctrl-C stop the wait
    as they stop any process: Celery installs its own handlers only later, once its
    worker runs."""
    delay = 1.0
    while True:
        try:
            return get_services()
        except BackendError as exc:
            logger.warning("worker.start.waiting error=%s: trying again in %.0f s", exc, delay)
            sleep(delay)
            delay = min(2 * delay, _START_RETRY_MAX_S)
        except Exception as exc:
            logger.critical("worker.start.failed error=%s: %s", type(exc).__name__, exc)
            raise SystemExit(1) from exc


@worker_process_init.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _start(**_kwargs: Any) -> None:
    global _indexing, _sweeper  # noqa: PLW0603 - one of each per process
    services = services_when_ready()  # the encoder loads now, not at the first job
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
    keep_startup_heap()  # the encoder and the services live as long as the process


@worker_ready.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _serve_metrics(**_kwargs: Any) -> None:
    """The worker serves its metrics on ``metrics.worker_port`` (once the pool has
    started, so that a forked pool process could not inherit the listening socket)."""
    settings = get_settings().metrics
    if settings.worker_port is None:
        return
    start_worker_server(settings.worker_port, host=settings.worker_host)
    logger.info("metrics.worker.serving port=%d", settings.worker_port)


@task_prerun.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _bind_request_id(task_id: str, task: Any, **_kwargs: Any) -> None:
    """The task's log records carry its job's request id (a task header)."""
    sent = getattr(task.request, REQUEST_ID_TASK_HEADER, None) or (
        getattr(task.request, "headers", None) or {}
    ).get(REQUEST_ID_TASK_HEADER)
    _request_ids[task_id] = request_id.set(valid_request_id(sent))


@task_postrun.connect  # type: ignore[untyped-decorator]  # celery is untyped
def _unbind_request_id(task_id: str, **_kwargs: Any) -> None:
    token = _request_ids.pop(task_id, None)
    if token is not None:
        request_id.reset(token)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # celery is untyped
@worker_shutdown.connect  # type: ignore[untyped-decorator]
def _close(**_kwargs: Any) -> None:
    global _services, _indexing, _sweeper  # noqa: PLW0603
    process_exited(os.getpid())
    _stop_sweeping.set()
    if _sweeper is not None:
        _sweeper.close()
    if _services is not None:
        _services.close()
    _services = None
    _indexing = None
    _sweeper = None
