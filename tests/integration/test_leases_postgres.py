"""A worker's lease renewal and a transaction that locks several jobs (a document's
delete, a flush) take the job rows in the same order on Postgres, so they wait for each
other instead of deadlocking: the renewal locks the jobs it holds in id order before
changing them. A plain ``UPDATE ... WHERE id IN`` locks them in the order Postgres scans
them, which a sequential scan makes the table's (forced here, since a scan of the
primary key's index would hide it)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.base import utcnow
from hsearch.db.engine import create_db_engine, create_session_factory, transaction
from hsearch.db.models import IngestionJob
from hsearch.db.repositories.jobs import JobRepository
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue

pytestmark = pytest.mark.integration

OWNER = "worker-under-test"
TABLE = IngestionJob.__tablename__


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    engine = create_db_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def scanning_engine(pg_url: str) -> Iterator[Engine]:
    """Connections whose planner reads a table only by scanning it."""
    engine = create_engine(
        pg_url, connect_args={"options": "-c enable_indexscan=off -c enable_bitmapscan=off"}
    )
    yield engine
    engine.dispose()


def leased_jobs(sessions: sessionmaker[Session], tenant: str) -> tuple[uuid.UUID, uuid.UUID]:
    """Two running jobs leased by :data:`OWNER`, as ``(lower id, higher id)``, the row
    of the higher id placed before the other's in the table."""
    queue = InMemoryJobQueue()
    for name in ("a", "b"):
        with unit_of_work(sessions, queue=queue) as uow:
            JobService(uow, settings=IngestSettings()).submit(
                tenant_id=tenant, documents=[DocumentInput(external_id=name, text="t")]
            )
    low, high = sorted(queue.sent)
    for job_id in (high, low):
        lease(sessions, job_id)
    for _ in range(20):  # an update writes the row anew, after the rows it finds
        if position(sessions, high) < position(sessions, low):
            return low, high
        lease(sessions, low)
    raise AssertionError("could not place the rows in the table's order the test needs")


def lease(sessions: sessionmaker[Session], job_id: uuid.UUID) -> None:
    with transaction(sessions) as session:
        session.execute(
            text(
                f"UPDATE {TABLE} SET status = 'running', lease_owner = :owner, "
                "lease_expires_at = :until WHERE id = :id"
            ),
            {"owner": OWNER, "until": utcnow() + timedelta(minutes=5), "id": job_id},
        )


def position(sessions: sessionmaker[Session], job_id: uuid.UUID) -> tuple[int, int]:
    with sessions() as session:
        ctid = session.execute(
            text(f"SELECT ctid::text FROM {TABLE} WHERE id = :id"), {"id": job_id}
        )
        page, item = ctid.scalar_one().strip("()").split(",")
        return int(page), int(item)


def test_a_lease_renewal_waits_for_a_delete_instead_of_deadlocking(
    engine: Engine, scanning_engine: Engine, tenant: str
) -> None:
    sessions = create_session_factory(engine)
    low, high = leased_jobs(sessions, tenant)
    renewing_pid: list[int] = []
    outcome: list[int | BaseException] = []

    def renew() -> None:
        try:
            with transaction(create_session_factory(scanning_engine)) as session:
                renewing_pid.append(session.execute(text("SELECT pg_backend_pid()")).scalar_one())
                outcome.append(
                    JobRepository(session).renew_leases(
                        [low, high], owner=OWNER, until=utcnow() + timedelta(minutes=10)
                    )
                )
        except BaseException as exc:
            outcome.append(exc)

    renewal = threading.Thread(target=renew)
    with transaction(sessions) as deleting:
        # As a document's delete takes the jobs it supersedes: in id order.
        jobs = JobRepository(deleting)
        assert jobs.lock_any_tenant(low) is not None
        renewal.start()
        wait_until_blocked(engine, renewing_pid)
        # The renewal waits for the lower id; it must hold nothing this needs. Locking
        # the higher one first (the table's order), it would: Postgres then aborts one
        # of the two transactions as a deadlock (after its deadlock_timeout, 1 s).
        assert jobs.lock_any_tenant(high) is not None
    renewal.join(timeout=30)
    assert outcome == [2]
    with sessions() as session:
        for job_id in (low, high):
            job = session.get(IngestionJob, job_id)
            assert job is not None
            assert job.lease_expires_at is not None
            assert job.lease_expires_at > utcnow() + timedelta(minutes=7)


def wait_until_blocked(engine: Engine, pid: list[int], *, timeout: float = 30) -> None:
    """Return once the backend in ``pid`` (filled by another thread) waits for a lock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pid:
            with engine.connect() as connection:
                waiting = connection.execute(
                    text("SELECT count(*) FROM pg_locks WHERE pid = :pid AND NOT granted"),
                    {"pid": pid[0]},
                ).scalar_one()
            if waiting:
                return
        time.sleep(0.01)
    raise AssertionError("the renewal never waited for the locked job")
