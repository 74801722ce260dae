"""Nothing stuck: leases on running jobs and the sweeper that re-sends abandoned ones
(embedded parts: SQLite metadata, the fake encoder, the in-memory store and queue)."""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.base import utcnow
from hsearch.db.models import IngestionJob, JobItem, JobStatus
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import BackendError, VectorStoreError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.leases import JobSweeper, LeaseKeeper, aware, resend_unstarted
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import A, B, C, CrashingStore, docs, make_service, submit

TENANT = "t1"


def indexer(
    sessions: sessionmaker[Session], store: InMemoryVectorStore, owner: str
) -> IndexingService:
    return make_service(sessions, store, owner=owner)


def job_row(sessions: sessionmaker[Session], job_id: uuid.UUID) -> IngestionJob:
    with sessions() as session:
        job = session.get(IngestionJob, job_id)
        assert job is not None
        session.expunge(job)
        return job


def set_job(sessions: sessionmaker[Session], job_id: uuid.UUID, **values: object) -> None:
    with sessions() as session, session.begin():
        job = session.get_one(IngestionJob, job_id)
        for name, value in values.items():
            setattr(job, name, value)


def test_a_job_leased_by_a_live_worker_is_left_to_it(sessions: sessionmaker[Session]) -> None:
    job_id = submit(sessions, docs(A, B))
    until = utcnow() + timedelta(seconds=60)
    set_job(sessions, job_id, status=JobStatus.RUNNING, lease_owner="w1", lease_expires_at=until)
    store = InMemoryVectorStore()
    assert indexer(sessions, store, "w2").process_job(job_id) is JobStatus.RUNNING
    job = job_row(sessions, job_id)
    assert (job.attempts, job.indexed, job.lease_owner) == (0, 0, "w1")
    assert store.count(tenant_id=TENANT) == 0


def test_an_expired_lease_is_taken_over(sessions: sessionmaker[Session]) -> None:
    job_id = submit(sessions, docs(A, B))
    gone = utcnow() - timedelta(seconds=1)
    set_job(sessions, job_id, status=JobStatus.RUNNING, lease_owner="dead", lease_expires_at=gone)
    assert indexer(sessions, InMemoryVectorStore(), "w2").process_job(job_id) is JobStatus.SUCCEEDED
    job = job_row(sessions, job_id)
    assert (job.indexed, job.lease_owner, job.lease_expires_at) == (2, None, None)


def test_a_failing_attempt_lets_its_lease_go_for_the_retry(
    sessions: sessionmaker[Session],
) -> None:
    job_id = submit(sessions, docs(A, B, C))
    with pytest.raises(VectorStoreError):
        indexer(sessions, CrashingStore(), "w1").process_job(job_id)
    job = job_row(sessions, job_id)
    assert job.status is JobStatus.RUNNING
    assert job.lease_owner is None
    assert job.lease_expires_at is not None
    assert aware(job.lease_expires_at) <= utcnow()
    # Another worker (a retry elsewhere) takes it over at once.
    assert indexer(sessions, InMemoryVectorStore(), "w2").process_job(job_id) is JobStatus.SUCCEEDED


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now


def test_the_sweeper_resends_abandoned_jobs_once_per_lease(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    queue = InMemoryJobQueue()
    sweeper = JobSweeper(sessions, queue, lease_s=60, unsent_after_s=30, clock=clock)
    abandoned = submit(sessions, docs(A))
    live = submit(sessions, docs(B))
    done = submit(sessions, docs(C))
    waiting = submit(sessions, docs(("d", "Deserts are dry.")))  # queued and sent
    expired = clock.now - timedelta(seconds=1)
    set_job(
        sessions, abandoned, status=JobStatus.RUNNING, lease_owner="x", lease_expires_at=expired
    )
    later = clock.now + timedelta(seconds=60)
    set_job(sessions, live, status=JobStatus.RUNNING, lease_owner="y", lease_expires_at=later)
    set_job(sessions, done, status=JobStatus.SUCCEEDED)
    assert job_row(sessions, waiting).sent_at is not None, "the unit of work marks it sent"

    assert sweeper.sweep() == [abandoned]
    assert queue.sent == [abandoned]
    job = job_row(sessions, abandoned)
    assert job.lease_owner is None
    assert job.lease_expires_at is not None
    assert aware(job.lease_expires_at) == clock.now + timedelta(seconds=60)
    assert sweeper.sweep() == [], "not again before the new lease has passed"
    clock.now += timedelta(seconds=61)
    # Both leases have expired now, and the queued job was sent a lease ago and never
    # started: its message may be lost (test_a_queued_job_whose_message_was_lost_...).
    assert set(sweeper.sweep()) == {abandoned, live, waiting}


def test_the_sweeper_sends_a_job_committed_but_never_sent(
    sessions: sessionmaker[Session],
) -> None:
    class DyingQueue(InMemoryJobQueue):
        def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
            raise SystemExit  # the process dies between the commit and the send

    with pytest.raises(SystemExit), unit_of_work(sessions, queue=DyingQueue()) as uow:
        job_id = (
            JobService(uow, settings=IngestSettings())
            .submit(tenant_id=TENANT, documents=docs(A))
            .id
        )
    assert job_row(sessions, job_id).sent_at is None
    clock = Clock()
    queue = InMemoryJobQueue()
    sweeper = JobSweeper(sessions, queue, lease_s=60, unsent_after_s=30, clock=clock)
    assert sweeper.sweep() == [], "too recent: its send may still be on its way"
    clock.now += timedelta(seconds=31)
    assert sweeper.sweep() == [job_id]
    assert sweeper.sweep() == []
    assert indexer(sessions, InMemoryVectorStore(), "w").process_job(job_id) is JobStatus.SUCCEEDED


def test_the_keeper_renews_held_leases_and_lets_them_go_on_close(
    sessions: sessionmaker[Session],
) -> None:
    job_id = submit(sessions, docs(A))
    soon = utcnow() + timedelta(seconds=1)
    set_job(sessions, job_id, status=JobStatus.RUNNING, lease_owner="me", lease_expires_at=soon)
    keeper = LeaseKeeper(sessions, owner="me", lease_s=60)
    keeper.hold(job_id)
    keeper.renew()
    renewed = job_row(sessions, job_id).lease_expires_at
    assert renewed is not None
    assert aware(renewed) > utcnow() + timedelta(seconds=50)
    other = LeaseKeeper(sessions, owner="other", lease_s=600)
    other.hold(job_id)
    other.renew()
    assert job_row(sessions, job_id).lease_expires_at == renewed, "only the owner renews"
    other.close()
    keeper.close()
    job = job_row(sessions, job_id)
    assert job.lease_owner is None
    assert job.lease_expires_at is not None
    assert aware(job.lease_expires_at) <= utcnow()


# -- cancelling: finished documents stay, the rest are never written --------------------


class CancellingEmbedder(FakeEmbedder):
    """Cancels the job while the batch holding document ``at`` is being encoded, as a
    client would while a worker runs it, once ``indexed`` documents are committed: the
    encoder works a group ahead of the writes, so the group before is being written
    meanwhile (a cancel before its commit would cancel it too, which is right, but not
    what this test is about)."""

    def __init__(self, sessions: sessionmaker[Session], at: str, *, indexed: int) -> None:
        super().__init__()
        self.sessions = sessions
        self.at = at
        self.indexed = indexed
        self.job_id: uuid.UUID | None = None

    def embed_documents(self, texts: Sequence[str], **kwargs: Any) -> list[Embedding]:
        if self.job_id is not None and any(self.at in t for t in texts):
            deadline = time.monotonic() + 10
            while job_row(self.sessions, self.job_id).indexed < self.indexed:
                assert time.monotonic() < deadline, "the group before was never written"
                time.sleep(0.01)
            with unit_of_work(self.sessions, queue=InMemoryJobQueue()) as uow:
                JobService(uow, settings=IngestSettings()).cancel(self.job_id, tenant_id=TENANT)
            self.job_id = None
        return super().embed_documents(texts, **kwargs)


def test_a_job_cancelled_mid_run_keeps_what_it_indexed_and_writes_nothing_more(
    sessions: sessionmaker[Session],
) -> None:
    batch = [(f"d{i}", f"Document number{i} about rivers.") for i in range(5)]
    job_id = submit(sessions, docs(*batch))
    embedder = CancellingEmbedder(sessions, at="number2", indexed=2)
    embedder.job_id = job_id
    store = InMemoryVectorStore()
    service = make_service(sessions, store, embedder, batch_documents=2)
    assert service.process_job(job_id) is JobStatus.CANCELLED
    job = job_row(sessions, job_id)
    assert (job.indexed, job.failed, job.skipped) == (2, 0, 0)
    assert {i.status.value for i in job_items(sessions, job_id)[2:]} == {"cancelled"}
    assert store.count(tenant_id=TENANT) == 2, "only the first batch was written"
    assert service.process_job(job_id) is JobStatus.CANCELLED, "a re-delivery does nothing"
    assert store.count(tenant_id=TENANT) == 2


def job_items(sessions: sessionmaker[Session], job_id: uuid.UUID) -> list[JobItem]:
    with sessions() as session:
        items = list(
            session.scalars(
                select(JobItem).where(JobItem.job_id == job_id).order_by(JobItem.ordinal)
            )
        )
        session.expunge_all()
        return items


def test_the_sweeper_purges_finished_jobs_past_their_retention(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    old, recent, running = (submit(sessions, docs((f"d{i}", "Text."))) for i in range(3))
    set_job(sessions, old, status=JobStatus.SUCCEEDED, finished_at=clock.now - timedelta(days=31))
    set_job(sessions, recent, status=JobStatus.FAILED, finished_at=clock.now - timedelta(days=1))
    long_ago = clock.now + timedelta(seconds=60)
    set_job(sessions, running, status=JobStatus.RUNNING, lease_owner="w", lease_expires_at=long_ago)
    sweeper = JobSweeper(
        sessions, InMemoryJobQueue(), lease_s=60, retention_s=30 * 86400, clock=clock
    )
    sweeper.sweep()
    with sessions() as session:
        left = set(session.scalars(select(IngestionJob.id)))
        items = set(session.scalars(select(JobItem.job_id)))
    assert left == items == {recent, running}


def resent_seconds(sweeper: JobSweeper, clock: Clock, since: datetime) -> list[int]:
    """The seconds after ``since`` at which ``sweeper`` sent something, sweeping every
    second for 50 minutes."""
    resent_at = []
    for second in range(3000):
        clock.now = aware(since) + timedelta(seconds=second)
        if sweeper.sweep():
            resent_at.append(second)
    return resent_at


def assert_ever_less_often(resent_at: list[int]) -> None:
    """Each re-send as long after the one before as the job had waited then (at most
    ten leases of 60 s; the sweep that finds it comes a second on), 8 in 50 minutes
    against 49 at one re-send per lease."""
    for before, after in itertools.pairwise(resent_at):
        assert after - before - min(before, 600) in (0, 1), resent_at
    assert len(resent_at) == 8, resent_at


def test_a_job_waiting_for_its_next_turn_is_re_sent_ever_less_often(
    sessions: sessionmaker[Session],
) -> None:
    """Its message is most likely still queued behind other jobs' turns: each re-send
    is a message the workers drop, but the queue's depth (what autoscaling reads)
    counts it. The wait between re-sends doubles, up to ten leases; a dead worker's job
    is re-sent every lease (test above)."""
    queue = InMemoryJobQueue()
    job = submit(sessions, docs(A, B, C), tenant="t")
    service = make_service(
        sessions, InMemoryVectorStore(), batch_documents=1, batches_per_task=1, requeue=queue
    )
    set_job(sessions, job, sent_at=utcnow() - timedelta(hours=1))  # sent long ago
    turn_ran = utcnow()
    assert service.process_job(job) is JobStatus.RUNNING  # turn 1 ends; back in the queue
    ended = job_row(sessions, job).sent_at
    assert ended is not None
    assert aware(ended) >= turn_ran, "the end of the turn is when it went back"
    clock = Clock()
    clock.now = aware(ended)
    sweeper = JobSweeper(sessions, queue, lease_s=60, clock=clock)
    resent_at = resent_seconds(sweeper, clock, aware(ended))
    assert 59 <= resent_at[0] <= 61, "first once its lease has expired"
    assert_ever_less_often(resent_at)


def test_a_failed_re_send_of_a_waiting_job_is_tried_again_a_lease_later(
    sessions: sessionmaker[Session],
) -> None:
    """The broker is down when the sweeper first re-sends a job waiting for its next
    turn (the turn's own send failed too): the backoff, meant for messages that are
    queued, does not apply to one that never was."""
    queue = InMemoryJobQueue()
    job = submit(sessions, docs(A, B, C), tenant="t")
    service = make_service(
        sessions, InMemoryVectorStore(), batch_documents=1, batches_per_task=1, requeue=queue
    )
    assert service.process_job(job) is JobStatus.RUNNING
    ended = job_row(sessions, job).sent_at
    assert ended is not None
    clock = Clock()

    class Down(InMemoryJobQueue):
        def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
            raise BackendError("broker down")

    down = JobSweeper(sessions, Down(), lease_s=60, clock=clock)
    up = JobSweeper(sessions, queue, lease_s=60, clock=clock)
    queue.messages.clear()
    for second in range(2000):
        clock.now = aware(ended) + timedelta(seconds=second)
        (down if second < 300 else up).sweep()
        if queue.messages:
            break
    assert 300 <= second <= 361, "within a lease of the broker's return"


def test_a_queued_job_whose_message_was_lost_is_sent_again_ever_less_often(
    sessions: sessionmaker[Session],
) -> None:
    """The broker lost the message of a queued job (a Redis restarted without
    persistence, a connection that stopped answering once it had taken the message):
    nothing else would ever send it again. It is re-sent a lease after it was sent,
    then as long again as it has waited (at most ten leases apart), like a job waiting
    for its next turn, since its message is most likely still queued behind others."""
    queue = InMemoryJobQueue()
    job = submit(sessions, docs(A, B), tenant="t")
    sent = job_row(sessions, job).sent_at
    assert sent is not None, "the unit of work marks it sent"
    clock = Clock()
    sweeper = JobSweeper(sessions, queue, lease_s=60, clock=clock)
    resent_at = resent_seconds(sweeper, clock, aware(sent))
    assert 60 <= resent_at[0] <= 61, "first a lease after it was sent"
    assert_ever_less_often(resent_at)
    assert queue.sent == [job] * 8
    # Every message is for the job's first turn: the first to arrive runs it, the
    # others are dropped.
    service = make_service(sessions, InMemoryVectorStore())
    assert {m.turn for m in queue.messages} == {0}
    assert service.process_job(job, turn=0) is JobStatus.SUCCEEDED
    assert service.process_job(job, turn=0) is JobStatus.SUCCEEDED  # finished: left as is


def test_a_queued_job_a_worker_starts_is_not_sent_again(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    job = submit(sessions, docs(A), tenant="t")
    sent = job_row(sessions, job).sent_at
    assert sent is not None
    clock = Clock()
    clock.now = aware(sent) + timedelta(seconds=30)
    sweeper = JobSweeper(sessions, queue, lease_s=60, clock=clock)
    assert sweeper.sweep() == [], "sent less than a lease ago"
    running_until = aware(sent) + timedelta(hours=1)
    set_job(
        sessions, job, status=JobStatus.RUNNING, lease_owner="w", lease_expires_at=running_until
    )
    clock.now = aware(sent) + timedelta(seconds=120)
    assert sweeper.sweep() == [], "a worker holds it"


def test_a_queued_job_whose_re_send_failed_counts_as_never_sent(
    sessions: sessionmaker[Session],
) -> None:
    class Down(InMemoryJobQueue):
        def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
            raise BackendError("broker down")

    job = submit(sessions, docs(A), tenant="t")
    sent = job_row(sessions, job).sent_at
    assert sent is not None
    clock = Clock()
    clock.now = aware(sent) + timedelta(seconds=61)
    assert JobSweeper(sessions, Down(), lease_s=60, clock=clock).sweep() == [job]
    row = job_row(sessions, job)
    assert (row.sent_at, row.lease_expires_at) == (None, None)
    queue = InMemoryJobQueue()
    clock.now += timedelta(seconds=1)
    assert JobSweeper(sessions, queue, lease_s=60, unsent_after_s=30, clock=clock).sweep() == [job]
    assert queue.sent == [job]


@pytest.mark.parametrize(
    ("busy", "waiting", "depth", "resent"),
    [
        (0, 1, 1, True),  # no worker busy: the message would have been taken
        (0, 1, None, True),
        (1, 1, 1, False),  # its message waits behind the busy worker
        (1, 2, 5, False),  # duplicates count too: nothing is missing
        (1, 2, 1, True),  # a message is missing: one job has none
        (1, 1, 0, True),  # the queue is empty: the message was lost
        (1, 1, None, False),  # the broker cannot tell: the workers are busy
    ],
)
def test_resend_unstarted(busy: int, waiting: int, depth: int | None, resent: bool) -> None:
    assert resend_unstarted(busy=busy, waiting=waiting, depth=depth) is resent


def test_a_job_whose_message_waits_behind_a_busy_worker_is_not_re_sent(
    sessions: sessionmaker[Session],
) -> None:
    """The only worker encodes one large document for many minutes (its lease renewed);
    the job submitted after it waits in the queue. Re-sent every lease, it had two
    messages queued (depth 2 for one job). Its message is there: nothing is re-sent,
    however long the wait, until the message is gone or the worker is."""
    queue = InMemoryJobQueue()
    clock = Clock()
    big = submit(sessions, docs(("big", "Text.")), tenant="t")
    held = clock.now + timedelta(hours=2)  # renewed all along by its live worker
    set_job(sessions, big, status=JobStatus.RUNNING, lease_owner="w1", lease_expires_at=held)
    behind = submit(sessions, docs(A), tenant="t")
    sent = job_row(sessions, behind).sent_at
    assert sent is not None
    queue.enqueue_job(behind, turn=0)  # where the unit of work put it
    sweeper = JobSweeper(sessions, queue, lease_s=60, clock=clock)
    assert resent_seconds(sweeper, clock, aware(sent)) == []
    assert [m.job_id for m in queue.messages] == [behind], "one message for one job"

    queue.messages.clear()  # the broker lost it: the queue holds fewer than wait
    clock.now += timedelta(seconds=1)
    assert sweeper.sweep() == [behind]


def test_a_job_waiting_behind_a_dead_worker_is_re_sent(
    sessions: sessionmaker[Session],
) -> None:
    """The busy worker's lease expired (it died): its job and the one waiting are
    re-sent as before."""
    queue = InMemoryJobQueue()
    clock = Clock()
    big = submit(sessions, docs(("big", "Text.")), tenant="t")
    gone = clock.now - timedelta(seconds=1)
    set_job(sessions, big, status=JobStatus.RUNNING, lease_owner="w1", lease_expires_at=gone)
    behind = submit(sessions, docs(A), tenant="t")
    queue.enqueue_job(behind, turn=0)
    sent = job_row(sessions, behind).sent_at
    assert sent is not None
    clock.now = aware(sent) + timedelta(seconds=61)
    assert set(JobSweeper(sessions, queue, lease_s=60, clock=clock).sweep()) == {big, behind}
