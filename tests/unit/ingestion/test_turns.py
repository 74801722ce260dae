"""Workers and sweepers racing on a job's turn, interleaved deterministically (SQLite,
where reading the job's row locks nothing: two workers may both read it before either
writes). Each turn runs once, a turn taken over ends without writing to the job, and
no job is left without a message that can run it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.base import utcnow
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import BackendError, VectorStoreError
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.leases import JobSweeper
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.test_fairness import submit
from tests.unit.ingestion.test_indexing import make_service


def job_row(sessions: sessionmaker[Session], job_id: uuid.UUID) -> IngestionJob:
    with sessions() as session:
        job = session.get_one(IngestionJob, job_id)
        session.expunge(job)
        return job


def worker(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    queue: InMemoryJobQueue,
    name: str,
    embedder: FakeEmbedder | None = None,
) -> IndexingService:
    """Turns of one batch of two documents."""
    return make_service(
        sessions,
        store,
        embedder,
        batch_documents=2,
        batches_per_task=1,
        requeue=queue,
        owner=name,
    )


class TakenOver(FakeEmbedder):
    """While this worker encodes its turn's batch (stalled past its lease), the sweeper
    re-sends the job and worker ``w2`` starts the next turn."""

    def __init__(self, sessions: sessionmaker[Session], job_id: uuid.UUID) -> None:
        super().__init__()
        self._sessions, self._job_id = sessions, job_id

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        with self._sessions() as session, session.begin():
            row = session.get_one(IngestionJob, self._job_id)
            row.turn, row.lease_owner = row.turn + 1, "w2"
            row.lease_expires_at = utcnow() + timedelta(seconds=60)
        return super().embed_documents(texts, langs=langs)


@contextmanager
def after_reading_jobs(
    monkeypatch: pytest.MonkeyPatch, method: str, meanwhile: Callable[[], None]
) -> Iterator[None]:
    """Runs ``meanwhile`` once, right after the first call of ``JobRepository.<method>``
    has read its rows and before its caller writes anything."""
    original = getattr(JobRepository, method)
    done = False

    def reading(self: JobRepository, *args: object, **kwargs: object) -> object:
        nonlocal done
        rows = original(self, *args, **kwargs)
        if not done:
            done = True
            meanwhile()
        return rows

    monkeypatch.setattr(JobRepository, method, reading)
    yield
    assert done


def start_turn_meanwhile(
    sessions: sessionmaker[Session], job_id: uuid.UUID, *, owner: str, now: datetime
) -> None:
    """A worker starts the job's turn in a transaction of its own, committed."""
    with sessions() as session, session.begin():
        row = session.get_one(IngestionJob, job_id)
        assert JobRepository(session).start_turn(
            row, owner=owner, until=now + timedelta(seconds=60), now=now
        )


def test_a_turn_starts_only_if_no_one_started_it_since_the_job_was_read(
    sessions: sessionmaker[Session],
) -> None:
    """Reading the job to start its turn locks it (on SQLite, the database's write
    lock: test_write_lock.py); the start itself is also a compare-and-set on the turn,
    so a worker acting on a row read earlier starts nothing."""
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 4)
    now = utcnow()
    with sessions() as late:
        stale = late.get_one(IngestionJob, job)  # read, not locked
        start_turn_meanwhile(sessions, job, owner="w1", now=now)
        started = JobRepository(late).start_turn(
            stale, owner="w2", until=now + timedelta(seconds=60), now=now
        )
        late.commit()
    assert not started
    row = job_row(sessions, job)
    assert (row.turn, row.lease_owner, row.attempts) == (1, "w1", 1)


def test_a_sweep_does_not_take_a_job_a_worker_started_after_it_was_read(
    sessions: sessionmaker[Session],
) -> None:
    """A job whose lease had expired when the sweeper read it, started by a worker
    before the sweeper writes, is neither re-sent nor stripped of that worker's lease
    (the sweeper's read locks the rows it returns; the take is a compare-and-set too)."""
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 4)
    now = utcnow()
    with sessions() as session, session.begin():  # a dead worker's job, between turns
        row = session.get_one(IngestionJob, job)
        row.status, row.lease_expires_at = JobStatus.RUNNING, now - timedelta(seconds=1)
    with sessions() as sweeping:
        expired = sweeping.get_one(IngestionJob, job)  # read, not locked
        start_turn_meanwhile(sessions, job, owner="w1", now=now)
        taken = JobRepository(sweeping).take_expired(
            expired, now=now, until=now + timedelta(seconds=60)
        )
        sweeping.commit()
    assert not taken
    assert job_row(sessions, job).lease_owner == "w1"


def test_a_turn_taken_over_ends_without_touching_the_job(
    sessions: sessionmaker[Session],
) -> None:
    """A worker stalls past its lease mid-turn; the sweeper re-sends the job and another
    worker starts the next turn. When the first goes on, it neither ends that turn (the
    other worker's lease would be gone) nor sends the job again."""
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 6)
    message = queue.messages.pop(0)

    stalled = worker(sessions, InMemoryVectorStore(), queue, "w1", TakenOver(sessions, job))
    assert stalled.process_job(message.job_id, turn=message.turn) is JobStatus.RUNNING
    assert queue.messages == [], "the job is not sent again"
    row = job_row(sessions, job)
    assert (row.turn, row.lease_owner, row.between_turns) == (2, "w2", False)


def test_a_failed_turn_does_not_reopen_a_turn_another_worker_started(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 6)
    message = queue.messages.pop(0)

    class Fails(InMemoryVectorStore):
        def upsert(self, records: Sequence[ChunkRecord]) -> None:
            raise VectorStoreError("connection lost")

    with pytest.raises(VectorStoreError):
        worker(sessions, Fails(), queue, "w1", TakenOver(sessions, job)).process_job(
            message.job_id, turn=message.turn
        )
    row = job_row(sessions, job)
    assert (row.turn, row.lease_owner) == (2, "w2"), "w2's turn and lease stand"


def test_a_never_sent_job_whose_send_fails_is_sent_at_a_later_sweep(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 2)
    queue.messages.clear()
    with sessions() as session, session.begin():  # committed, never sent
        row = session.get_one(IngestionJob, job)
        row.sent_at, row.created_at = None, utcnow() - timedelta(seconds=60)

    class Down(InMemoryJobQueue):
        def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
            raise BackendError("broker down")

    assert JobSweeper(sessions, Down(), lease_s=60).sweep() == [job]
    assert job_row(sessions, job).sent_at is None
    assert JobSweeper(sessions, queue, lease_s=60).sweep() == [job], "the broker is back"
    assert [m.job_id for m in queue.messages] == [job]
    assert job_row(sessions, job).sent_at is not None
