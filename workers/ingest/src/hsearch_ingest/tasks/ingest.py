from __future__ import annotations

import logging
import uuid
from typing import Any

from celery import Task

from hsearch.errors import BackendError
from hsearch.ingestion.queue import INGEST_JOB_TASK, TURN_TASK_HEADER
from hsearch_ingest.celery_app import app
from hsearch_ingest.signals import get_indexing_service

logger = logging.getLogger(__name__)


class IngestTask(Task):  # type: ignore[misc]  # celery is untyped
    """Marks the job failed once retries are exhausted or an unexpected error escapes."""

    def on_failure(
        self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any
    ) -> None:
        """Never raises. An exception here stopped the worker's consumer, the process
        exiting (a message's first delivery: a message whose job id is no UUID made the
        worker crash on every re-delivery), or left the message unacknowledged for good
        (a retry's, run from a timer). A job it cannot mark failed (the database away
        as retries ran out) is left to the sweeper, which sends it again."""
        job_id = kwargs.get("job_id")
        if job_id is None:
            return
        try:
            job = uuid.UUID(str(job_id))
        except ValueError:
            logger.error("ingest.task.bad_job_id task_id=%s job_id=%r", task_id, job_id)
            return
        try:
            get_indexing_service().fail_job(job, error=f"{type(exc).__name__}: {exc}")
        except Exception as failure:
            logger.error(
                "ingest.job.not_marked_failed job_id=%s error=%s: left to the sweeper",
                job,
                f"{type(failure).__name__}: {failure}",
            )


@app.task(  # type: ignore[untyped-decorator]  # celery is untyped
    name=INGEST_JOB_TASK,
    base=IngestTask,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    autoretry_for=(BackendError,),
    retry_backoff=2,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=5,
)
def ingest_job(self: Task, *, job_id: str) -> str:
    """Index the job's pending documents, or a turn's worth of them (safe to run
    twice: a second message for the same turn returns at once)."""
    return get_indexing_service().process_job(uuid.UUID(job_id), turn=sent_turn(self.request)).value


def sent_turn(request: Any) -> int | None:
    """The job's turn the message was sent for (a task header; ``None`` from a sender
    of the previous release, or a header that is not a number)."""
    value = getattr(request, TURN_TASK_HEADER, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(TURN_TASK_HEADER)
    if isinstance(value, bool) or not isinstance(value, int):
        if value is not None:
            logger.warning("ingest.job.bad_turn_header value=%r", value)
        return None
    return value
