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
from hsearch.db.models import JobStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.quotas import QuotaRepository
from hsearch.embedding.fake import FakeEmbedder
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunk, Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import make_service

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
    "job": lambda session, job_id: JobRepository(session).lock_any_tenant(job_id),
    "stale jobs": lambda session, _: JobRepository(session).stale_all_tenants(
        now=utcnow(), unsent_before=utcnow(), sent_before=utcnow()
    ),
    "webhooks due": lambda session, _: JobRepository(session).webhooks_due_all_tenants(
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
            JobRepository(waiting).lock_any_tenant(job_id)
        holder.commit()
    with other() as waiting:
        assert JobRepository(waiting).lock_any_tenant(job_id) is not None, "free once committed"


def test_a_transaction_that_has_written_locks_again_without_a_new_begin(
    database: tuple[sessionmaker[Session], sessionmaker[Session]],
) -> None:
    sessions, _ = database
    job_id = submitted(sessions)
    with sessions() as session:
        job = JobRepository(session).lock_any_tenant(job_id)
        assert job is not None
        job.error = "x"
        session.flush()
        assert JobRepository(session).lock_any_tenant(job_id) is job
        session.commit()


class Probing(Chunker):
    """While it chunks, another process's writer tries to lock a job."""

    def __init__(self, other: sessionmaker[Session], job_id: uuid.UUID) -> None:
        super().__init__(FakeEmbedder().tokenizer, max_tokens=36, overlap_tokens=0)
        self._other, self._job_id = other, job_id
        self.locked_out = 0
        self.chunked = 0

    def chunk(self, text: str, *, title: str = "", lang: str = "") -> list[Chunk]:
        self.chunked += 1
        with self._other() as session:
            try:
                JobRepository(session).lock_any_tenant(self._job_id)
            except OperationalError:
                self.locked_out += 1
        return super().chunk(text, title=title, lang=lang)


def test_documents_are_chunked_before_the_decision_locks(
    database: tuple[sessionmaker[Session], sessionmaker[Session]],
) -> None:
    """Chunking a batch of long documents takes a while: on SQLite, every other writer
    (the API's submissions, the other workers) would wait for it."""
    sessions, other = database
    job_id = submitted(sessions)
    chunker = Probing(other, job_id)
    service = make_service(sessions, InMemoryVectorStore(), chunker=chunker)
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    assert (chunker.chunked, chunker.locked_out) == (1, 0)
