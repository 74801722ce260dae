"""After-commit dispatch: the jobs a unit of work writes are sent once it has committed.

A worker must never receive a job id whose rows it cannot read yet, and a job whose rows
were rolled back must never reach a worker. So nothing sends a task by hand: code running
in a :class:`UnitOfWork` queues job ids on it (``uow.jobs.enqueue(job.id, turn=job.turn)``), and
:func:`unit_of_work` commits, then sends them; on rollback they are dropped. This is
polar's ``JobQueueManager`` (jobs queued during a request, flushed once the session has
committed). The API's request dependency drives it; a worker task that writes jobs (a
sweeper re-queuing expired ones) would use the same context manager.

A send that fails after the commit finds the job row already written: the job is marked
failed with the broker's error, so whoever polls it sees why instead of a job queued
forever, and the error is raised (the API answers 503 ``backend_unavailable``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from hsearch.db.base import utcnow
from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.models import JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.errors import BackendError
from hsearch.ingestion.queue import JobQueue

logger = logging.getLogger(__name__)


class PendingJobs:
    """Job ids queued during a unit of work, in order, not sent yet."""

    def __init__(self) -> None:
        self._jobs: list[tuple[uuid.UUID, int]] = []

    @property
    def job_ids(self) -> tuple[uuid.UUID, ...]:
        return tuple(job_id for job_id, _ in self._jobs)

    def enqueue(self, job_id: uuid.UUID, *, turn: int) -> None:
        """Send ``job_id`` for its turn ``turn`` once the unit of work has committed;
        nothing is sent now."""
        self._jobs.append((job_id, turn))

    @property
    def messages(self) -> tuple[tuple[uuid.UUID, int], ...]:
        return tuple(self._jobs)

    def discard(self) -> None:
        """Forget every queued job (the transaction that wrote them rolled back)."""
        self._jobs.clear()


@dataclass(frozen=True, slots=True)
class UnitOfWork:
    """One transaction and the jobs to send after it commits. Services write and
    ``flush()`` through ``session`` and queue through ``jobs``; they never commit."""

    session: Session
    jobs: PendingJobs


@contextmanager
def unit_of_work(sessions: SessionFactory, *, queue: JobQueue) -> Iterator[UnitOfWork]:
    """A session committed on success and rolled back on error; the jobs queued on it
    are sent to ``queue`` only after a successful commit, and dropped otherwise.

    Raises the queue's :class:`BackendError` after the commit if a job could not be
    sent; that job is then marked failed (in a transaction of its own).
    """
    jobs = PendingJobs()
    try:
        with transaction(sessions) as session:
            yield UnitOfWork(session=session, jobs=jobs)
    except BaseException:
        jobs.discard()
        raise
    _send(jobs.messages, queue=queue, sessions=sessions)


def _send(
    messages: Sequence[tuple[uuid.UUID, int]], *, queue: JobQueue, sessions: SessionFactory
) -> None:
    if not messages:
        return
    job_ids = [job_id for job_id, _ in messages]
    # Every job is tried, so one dead send does not strand the others unmarked.
    failures: list[tuple[uuid.UUID, BackendError]] = []
    for job_id, turn in messages:
        try:
            queue.enqueue_job(job_id, turn=turn)
        except BackendError as exc:
            logger.warning("ingest.job.enqueue_failed job_id=%s error=%s", job_id, exc.message)
            failures.append((job_id, exc))
    failed = {job_id for job_id, _ in failures}
    with transaction(sessions) as session:
        # A job committed and never marked sent is sent again by the sweeper
        # (hsearch.ingestion.worker.leases): this process may die right here.
        JobRepository(session).mark_sent([j for j in job_ids if j not in failed], now=utcnow())
        for job_id, error in failures:
            _mark_enqueue_failed(session, job_id=job_id, error=error.message)
    if failures:
        raise failures[0][1]


def _mark_enqueue_failed(session: Session, *, job_id: uuid.UUID, error: str) -> None:
    job = JobRepository(session).get_any_tenant(job_id)
    # A worker may already have picked the job up (a send that errored late): leave it.
    if job is not None and job.status is JobStatus.QUEUED:
        job.status = JobStatus.FAILED
        job.error = error
        job.finished_at = utcnow()
        session.flush()
