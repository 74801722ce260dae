"""Fair to tenants: a large job takes turns with the jobs queued after it, so another
tenant's small job does not wait for it to finish (the service layer, the fake encoder,
a FIFO queue standing for the broker, one worker)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import timedelta

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.base import utcnow
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.errors import VectorStoreError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.leases import JobSweeper
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.test_indexing import make_service


class RecordingStore(InMemoryVectorStore):
    """Records the tenant of every document written, in order (a document's first
    chunk stands for it; one upsert may carry several documents)."""

    def __init__(self) -> None:
        super().__init__()
        self.tenants: list[str] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.tenants.extend(r.tenant_id for r in records if r.ordinal == 0)
        super().upsert(records)


def submit(
    sessions: sessionmaker[Session], queue: InMemoryJobQueue, tenant: str, n: int
) -> uuid.UUID:
    documents = [DocumentInput(external_id=f"{tenant}-{i}", text=f"Text {i}.") for i in range(n)]
    with unit_of_work(sessions, queue=queue) as uow:
        return (
            JobService(uow, settings=IngestSettings())
            .submit(tenant_id=tenant, documents=documents)
            .id
        )


def run_worker(queue: InMemoryJobQueue, service: IndexingService) -> list[JobStatus]:
    """One worker taking messages in the order they were sent, as a broker queue does."""
    statuses = []
    while queue.messages:
        message = queue.messages.pop(0)
        statuses.append(service.process_job(message.job_id, turn=message.turn))
    return statuses


def run_one(queue: InMemoryJobQueue, service: IndexingService) -> JobStatus:
    message = queue.messages.pop(0)
    return service.process_job(message.job_id, turn=message.turn)


def indexer(
    sessions: sessionmaker[Session], store: InMemoryVectorStore, queue: InMemoryJobQueue, turn: int
) -> IndexingService:
    return make_service(
        sessions,
        store,
        batch_documents=2,
        batches_per_task=turn,
        requeue=queue if turn else None,
    )


def test_a_small_job_runs_between_the_turns_of_a_large_one(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    store = RecordingStore()
    big = submit(sessions, queue, "big", 10)  # five batches of two
    small = submit(sessions, queue, "small", 2)  # one batch
    statuses = run_worker(queue, indexer(sessions, store, queue, turn=1))
    # One batch of the large job, then the small job, then the large job's other turns.
    assert store.tenants == ["big"] * 2 + ["small"] * 2 + ["big"] * 8
    assert statuses.count(JobStatus.SUCCEEDED) == 2
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=IngestSettings())
        assert jobs.get(big, tenant_id="big").indexed == 10
        assert jobs.get(small, tenant_id="small").indexed == 2
        # Five turns, one attempt: a turn that follows one ended as planned is no re-run.
        assert jobs.get(big, tenant_id="big").attempts == 1


def test_a_turn_interrupted_is_run_again_as_a_new_attempt(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    store = FailsOnce()
    job = submit(sessions, queue, "big", 6)  # three turns of one batch of two
    service = indexer(sessions, store, queue, turn=1)
    assert run_one(queue, service) is JobStatus.RUNNING  # turn 1, ended
    interrupted = queue.messages[0]
    with pytest.raises(VectorStoreError):  # turn 2 dies mid-way
        run_one(queue, service)
    queue.messages.append(interrupted)  # the retry of the same message
    statuses = run_worker(queue, service)
    assert statuses[-1] is JobStatus.SUCCEEDED
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        view = JobService(uow, settings=IngestSettings()).get(job, tenant_id="big")
    assert (view.indexed, view.attempts) == (6, 2)


class FailsOnce(InMemoryVectorStore):
    """Refuses its second upsert, once, as a lost connection would."""

    def __init__(self) -> None:
        super().__init__()
        self.upserts = 0

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.upserts += 1
        if self.upserts == 2:
            raise VectorStoreError("connection lost")
        super().upsert(records)


def test_without_turns_the_large_job_holds_the_worker(sessions: sessionmaker[Session]) -> None:
    queue = InMemoryJobQueue()
    store = RecordingStore()
    submit(sessions, queue, "big", 10)
    submit(sessions, queue, "small", 2)
    run_worker(queue, indexer(sessions, store, queue, turn=0))
    assert store.tenants == ["big"] * 10 + ["small"] * 2


def test_a_job_resent_while_its_message_waits_still_takes_one_turn_per_round(
    sessions: sessionmaker[Session],
) -> None:
    """The sweeper re-sends a job whose lease ran out while it waited between turns,
    although its message is still queued (many jobs take turns), and a job waiting as
    long for its first turn. Both messages of the first ran a turn and sent the job
    back: it kept two messages, took two turns per round and ran ahead of the job
    queued after it (first, first, second, second)."""
    queue = InMemoryJobQueue()
    store = RecordingStore()
    first = submit(sessions, queue, "first", 6)  # three turns of one batch of two
    second = submit(sessions, queue, "second", 6)
    service = indexer(sessions, store, queue, turn=1)
    run_one(queue, service)  # first's turn 1 ends; its message queues behind second's
    sweeper = JobSweeper(
        sessions, queue, lease_s=60, clock=lambda: utcnow() + timedelta(seconds=61)
    )
    # Its lease ran out while it waited; second, sent a lease ago and never started,
    # is re-sent too (the broker may have lost its message).
    assert sorted(sweeper.sweep()) == sorted([first, second])
    assert [m.job_id for m in queue.messages].count(first) == 2
    assert [m.job_id for m in queue.messages].count(second) == 2
    run_worker(queue, service)
    assert store.tenants[::2] == ["first", "second"] * 3, "one turn each, in turn"
    assert not queue.messages
    for job_id, tenant in ((first, "first"), (second, "second")):
        with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
            view = JobService(uow, settings=IngestSettings()).get(job_id, tenant_id=tenant)
        assert (view.status, view.indexed, view.attempts) == (JobStatus.SUCCEEDED, 6, 1)


def test_a_message_of_a_killed_turn_is_dropped_once_the_job_is_resent(
    sessions: sessionmaker[Session],
) -> None:
    """A worker killed mid-turn leaves the turn started and its lease held; the broker
    may hand its message to another worker after the sweeper has re-sent the job
    (Redis after its visibility timeout). The re-send runs the job; the old message,
    whichever comes first, does not run it a second time."""
    queue = InMemoryJobQueue()
    store = RecordingStore()
    job = submit(sessions, queue, "one", 4)
    original = queue.messages.pop(0)
    with sessions() as session, session.begin():  # what the killed worker committed
        row = session.get_one(IngestionJob, job)
        row.status, row.turn, row.attempts = JobStatus.RUNNING, original.turn + 1, 1
        row.lease_owner, row.lease_expires_at = "dead", utcnow() - timedelta(seconds=1)
    assert JobSweeper(sessions, queue, lease_s=60).sweep() == [job]
    resent = queue.messages.pop(0)
    assert resent.turn == original.turn + 1
    service = indexer(sessions, store, queue, turn=1)
    assert service.process_job(job, turn=original.turn) is JobStatus.RUNNING
    assert store.tenants == [], "the old message ran nothing"
    queue.messages.append(resent)
    assert run_worker(queue, service)[-1] is JobStatus.SUCCEEDED
    assert store.tenants == ["one"] * 4
    with sessions() as session:
        assert session.get_one(IngestionJob, job).attempts == 2
