"""Workers and sweepers racing on a job's turn, interleaved deterministically (SQLite,
where reading the job's row locks nothing: two workers may both read it before either
writes). Each turn runs once, a turn taken over ends without writing to the job, and
no job is left without a message that can run it."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.base import utcnow
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import BackendError, VectorStoreError
from hsearch.ingestion.indexer import IndexingService
from hsearch.ingestion.leases import JobSweeper
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.test_fairness import RecordingStore, submit
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


def test_two_workers_reading_the_same_turn_run_it_once(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The original message and the sweeper's re-send reach two workers at once: both
    read the job at the same turn. Only the first to write starts it."""
    queue = InMemoryJobQueue()
    store = RecordingStore()
    job = submit(sessions, queue, "t", 4)
    message = queue.messages.pop(0)
    first, second = (worker(sessions, store, queue, n) for n in ("w1", "w2"))
    outcome: list[JobStatus] = []

    def second_runs_its_copy() -> None:
        outcome.append(second.process_job(message.job_id, turn=message.turn))

    with after_reading_jobs(monkeypatch, "lock", second_runs_its_copy):
        assert first.process_job(message.job_id, turn=message.turn) is JobStatus.RUNNING
    assert outcome == [JobStatus.RUNNING], "the second worker ran the turn and ended it"
    assert store.tenants == ["t", "t"], "one turn's batch, written once"
    assert [m.turn for m in queue.messages] == [1], "one message for the next turn"
    row = job_row(sessions, job)
    assert (row.turn, row.attempts, row.indexed) == (1, 1, 2)


def test_a_sweep_does_not_take_a_job_a_worker_started_after_it_was_read(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweeper reads a job whose lease has expired; a worker starts its turn before
    the sweeper writes. The sweeper neither wipes that worker's lease nor re-sends."""
    queue = InMemoryJobQueue()
    job = submit(sessions, queue, "t", 4)
    message = queue.messages.pop(0)
    with sessions() as session, session.begin():  # a dead worker's job, between turns
        row = session.get_one(IngestionJob, job)
        row.status, row.lease_expires_at = JobStatus.RUNNING, utcnow() - timedelta(seconds=1)
    leases_while_running: list[str | None] = []

    class Watching(RecordingStore):
        def upsert(self, records: Sequence[ChunkRecord]) -> None:
            leases_while_running.append(job_row(sessions, job).lease_owner)
            super().upsert(records)

    started = worker(sessions, Watching(), InMemoryJobQueue(), "w1")

    def worker_starts_the_turn() -> None:
        started.process_job(message.job_id, turn=message.turn)

    sweeper = JobSweeper(sessions, queue, lease_s=60)
    with after_reading_jobs(monkeypatch, "stale", worker_starts_the_turn):
        assert sweeper.sweep() == []
    assert queue.messages == [], "nothing re-sent"
    assert leases_while_running == ["w1"]


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
