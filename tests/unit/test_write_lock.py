"""Rows read to be changed are locked on SQLite too. SQLite drops ``FOR UPDATE`` and
its driver begins a transaction at the first write, so two processes could both read a
job's turn, a document's version or a tenant's quota before either wrote; reading them
"for update" now takes the database's write lock, and another writer waits (here: gives
up after its short busy timeout) until the holder commits."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.base import utcnow
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.quotas import QuotaRepository
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue

TENANT = "t1"


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[sessionmaker[Session], sessionmaker[Session]]]:
    """Sessions of a writer, and of another process's writer that waits 0.2 s at most."""
    url = f"sqlite:///{tmp_path / 'meta.sqlite'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    impatient = create_engine(url, connect_args={"timeout": 0.2})
    yield create_session_factory(engine), create_session_factory(impatient)
    engine.dispose()
    impatient.dispose()


def submitted(sessions: sessionmaker[Session]) -> uuid.UUID:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        return (
            JobService(uow, settings=IngestSettings())
            .submit(tenant_id=TENANT, documents=[DocumentInput(external_id="a", text="A.")])
            .id
        )


LOCKS: dict[str, Callable[[Session, uuid.UUID], object]] = {
    "job": lambda session, job_id: JobRepository(session).lock(job_id),
    "stale jobs": lambda session, _: JobRepository(session).stale(
        now=utcnow(), unsent_before=utcnow()
    ),
    "webhooks due": lambda session, _: JobRepository(session).webhooks_due(
        now=utcnow(), max_attempts=3
    ),
    "document": lambda session, _: DocumentRepository(session).get_for_update(uuid.uuid4()),
    "documents": lambda session, _: DocumentRepository(session).get_many(
        {uuid.uuid4()}, for_update=True
    ),
    "tenant quota": lambda session, _: QuotaRepository(session).lock_tenant(TENANT),
}


@pytest.mark.parametrize("lock", LOCKS.values(), ids=LOCKS.keys())
def test_a_read_for_update_keeps_other_writers_out_until_commit(
    database: tuple[sessionmaker[Session], sessionmaker[Session]],
    lock: Callable[[Session, uuid.UUID], object],
) -> None:
    sessions, other = database
    job_id = submitted(sessions)
    with sessions() as holder:
        lock(holder, job_id)
        with other() as waiting, pytest.raises(OperationalError, match="locked"):
            JobRepository(waiting).lock(job_id)
        holder.commit()
    with other() as waiting:
        assert JobRepository(waiting).lock(job_id) is not None, "free once committed"


def test_a_transaction_that_has_written_locks_again_without_a_new_begin(
    database: tuple[sessionmaker[Session], sessionmaker[Session]],
) -> None:
    sessions, _ = database
    job_id = submitted(sessions)
    with sessions() as session:
        job = JobRepository(session).lock(job_id)
        assert job is not None
        job.error = "x"
        session.flush()
        assert JobRepository(session).lock(job_id) is job
        session.commit()
