"""After ingestion the collection is flushed without anyone asking: a job is reported
finished once a flush that began after its last write has run, and jobs finishing close
together share a flush (Postgres, Milvus Lite, the fake encoder, the worker's indexer
in this process with its real timer thread)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.models import JobStatus
from hsearch.embedding.fake import FakeEmbedder
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.milvus import MilvusVectorStore
from hsearch.vectorstore.protocol import ChunkRecord

pytestmark = pytest.mark.integration

TERMINAL = {JobStatus.SUCCEEDED, JobStatus.PARTIAL, JobStatus.FAILED}


class FlushSpy(MilvusVectorStore):
    """Records, for each flush, how many chunk writes had returned when it began."""

    def __init__(self, uri: str, *, collection: str) -> None:
        super().__init__(uri, collection=collection)
        self.writes = 0
        self.flushes: list[int] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        super().upsert(records)
        self.writes += len(records)

    def send_upsert(self, records: Sequence[ChunkRecord]) -> Callable[[], None]:
        answer = super().send_upsert(records)

        def answered() -> None:
            answer()
            self.writes += len(records)

        return answered

    def flush(self) -> None:
        self.flushes.append(self.writes)
        super().flush()


@pytest.fixture
def sessions(pg_url: str) -> Iterator[sessionmaker[Session]]:
    engine = create_db_engine(pg_url)
    yield create_session_factory(engine)
    engine.dispose()


@pytest.fixture
def store(milvus_uri: str) -> Iterator[FlushSpy]:
    spy = FlushSpy(milvus_uri, collection=f"flush_{uuid.uuid4().hex[:8]}")
    yield spy
    spy.drop_collection()
    spy.close()


def indexer(
    sessions: sessionmaker[Session], store: FlushSpy, *, interval: float
) -> IndexingService:
    return IndexingService(
        session_factory=sessions,
        embedder=FakeEmbedder(),
        store=store,
        statistics=LexicalStatistics(sessions),
        chunker=Chunker(FakeEmbedder().tokenizer, max_tokens=64, overlap_tokens=0),
        flush_min_interval_s=interval,
    )


def submit_jobs(sessions: sessionmaker[Session], tenant: str, count: int) -> list[uuid.UUID]:
    ids = []
    for i in range(count):
        with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
            view = JobService(uow, settings=IngestSettings()).submit(
                tenant_id=tenant,
                documents=[DocumentInput(external_id=f"d{i}", title="", text=f"Passage {i}.")],
            )
        ids.append(view.id)
    return ids


def statuses(
    sessions: sessionmaker[Session], tenant: str, job_ids: list[uuid.UUID]
) -> list[JobStatus]:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=IngestSettings())
        return [jobs.get(j, tenant_id=tenant).status for j in job_ids]


def test_a_job_is_finished_once_flushed_and_close_jobs_share_a_flush(
    sessions: sessionmaker[Session], store: FlushSpy
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    service = indexer(sessions, store, interval=3600)  # the timer never fires here
    jobs = submit_jobs(sessions, tenant, 4)
    assert service.process_job(jobs[0]) is JobStatus.SUCCEEDED
    assert store.flushes == [store.writes], "flushed after the job's writes, before it finished"
    assert [service.process_job(j) for j in jobs[1:]] == [JobStatus.RUNNING] * 3
    assert statuses(sessions, tenant, jobs) == [JobStatus.SUCCEEDED] + [JobStatus.RUNNING] * 3
    service.close()  # a worker shutting down runs the waiting flush
    assert store.flushes == [1, 4]
    assert statuses(sessions, tenant, jobs) == [JobStatus.SUCCEEDED] * 4


def test_the_timer_flushes_for_the_last_job(
    sessions: sessionmaker[Session], store: FlushSpy
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    service = indexer(sessions, store, interval=2.0)
    jobs = submit_jobs(sessions, tenant, 6)
    for job_id in jobs:
        service.process_job(job_id)
    deadline = time.monotonic() + 60
    while set(statuses(sessions, tenant, jobs)) - TERMINAL:
        assert time.monotonic() < deadline, statuses(sessions, tenant, jobs)
        time.sleep(0.1)
    assert store.flushes[-1] == store.writes == 6, "the last flush came after every write"
    assert len(store.flushes) < len(jobs)
    service.close()
