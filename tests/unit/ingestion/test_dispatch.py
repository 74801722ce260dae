"""After-commit dispatch: a unit of work sends its jobs only once they are committed,
sends nothing when it rolls back, and fails a committed job it could not send."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.errors import BackendError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import UnitOfWork, unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue

TENANT = "t1"


def submit(uow: UnitOfWork, external_id: str = "a") -> uuid.UUID:
    documents = [DocumentInput(external_id=external_id, text="Rivers flow to the sea.")]
    jobs = JobService(uow, settings=IngestSettings())
    return jobs.submit(tenant_id=TENANT, documents=documents).id


def stored(sessions: sessionmaker[Session], job_id: uuid.UUID) -> IngestionJob | None:
    with sessions() as s:
        return s.get(IngestionJob, job_id)


class CommitCheckingQueue(InMemoryJobQueue):
    """Notes, at each send, whether another connection can read the job: a worker
    receiving the id before the commit would find nothing."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__()
        self._sessions = sessions
        self.visible_when_sent: list[bool] = []

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        self.visible_when_sent.append(stored(self._sessions, job_id) is not None)
        super().enqueue_job(job_id, turn=turn)


class DeadBrokerQueue(InMemoryJobQueue):
    """A broker that refuses the given jobs (all when none are given), as
    ``CeleryJobQueue`` reports it."""

    def __init__(self, refuse: set[uuid.UUID] | None = None) -> None:
        super().__init__()
        self.refuse = refuse

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        if self.refuse is None or job_id in self.refuse:
            raise BackendError(f"could not enqueue ingest job {job_id}: connection refused")
        super().enqueue_job(job_id, turn=turn)


def test_a_committed_unit_of_work_sends_its_jobs_after_the_commit(
    sessions: sessionmaker[Session],
) -> None:
    queue = CommitCheckingQueue(sessions)
    with unit_of_work(sessions, queue=queue) as uow:
        first, second = submit(uow, "a"), submit(uow, "b")
        assert queue.sent == [], "nothing is sent while the transaction is open"
    assert queue.sent == [first, second]
    assert queue.visible_when_sent == [True, True]


def test_a_rolled_back_unit_of_work_sends_nothing(sessions: sessionmaker[Session]) -> None:
    queue = InMemoryJobQueue()
    written: list[tuple[UnitOfWork, uuid.UUID]] = []

    def failing_request() -> None:
        with unit_of_work(sessions, queue=queue) as uow:
            written.append((uow, submit(uow)))
            raise RuntimeError("the request failed after writing the job")

    with pytest.raises(RuntimeError):
        failing_request()
    [(uow, job_id)] = written
    assert queue.sent == []
    assert uow.jobs.job_ids == (), "the queued jobs were discarded"
    assert stored(sessions, job_id) is None


def test_a_job_that_cannot_be_sent_is_marked_failed(sessions: sessionmaker[Session]) -> None:
    with (
        pytest.raises(BackendError, match="connection refused"),
        unit_of_work(sessions, queue=DeadBrokerQueue()) as uow,
    ):
        job_id = submit(uow)
    job = stored(sessions, job_id)
    assert job is not None, "the job was committed before the send"
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert "connection refused" in job.error
    assert job.finished_at is not None


def test_one_refused_job_does_not_strand_the_others(sessions: sessionmaker[Session]) -> None:
    queue = DeadBrokerQueue(refuse=set())
    written: list[uuid.UUID] = []

    def request() -> None:
        with unit_of_work(sessions, queue=queue) as uow:
            written.extend([submit(uow, "a"), submit(uow, "b")])
            queue.refuse = {written[0]}

    with pytest.raises(BackendError):
        request()
    refused, sent = written
    assert queue.sent == [sent]
    statuses = [getattr(stored(sessions, j), "status", None) for j in (refused, sent)]
    assert statuses == [JobStatus.FAILED, JobStatus.QUEUED]
