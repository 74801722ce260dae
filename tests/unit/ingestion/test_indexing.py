"""The indexing service end to end on embedded parts: SQLite metadata (migrated),
the fake encoder and the in-memory store. Fast, and exact about counters, chunks
and BM25 statistics under re-runs, changes, failures and crashes."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.engine import transaction
from hsearch.db.models import Document, JobStatus, LexicalCorpusStats, LexicalTermStats
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError, VectorStoreError
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.indexer import IndexingService, fail_job
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord

TENANT = "t1"


def docs(*pairs: tuple[str, str]) -> list[DocumentInput]:
    return [DocumentInput(external_id=e, title=e.upper(), text=t) for e, t in pairs]


def submit(
    sessions: sessionmaker[Session], batch: list[DocumentInput], tenant: str = TENANT
) -> uuid.UUID:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=IngestSettings())
        return jobs.submit(tenant_id=tenant, documents=batch).id


def get_job(sessions: sessionmaker[Session], job_id: uuid.UUID, tenant: str = TENANT) -> JobView:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        return JobService(uow, settings=IngestSettings()).get(job_id, tenant_id=tenant)


def run(
    sessions: sessionmaker[Session],
    service: IndexingService,
    batch: list[DocumentInput],
    tenant: str = TENANT,
) -> uuid.UUID:
    job_id = submit(sessions, batch, tenant)
    service.process_job(job_id)
    return job_id


def make_service(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    embedder: FakeEmbedder | None = None,
) -> IndexingService:
    return IndexingService(
        session_factory=sessions,
        embedder=embedder or FakeEmbedder(),
        store=store,
        statistics=LexicalStatistics(sessions),
        chunk_max_chars=200,
        chunk_overlap_chars=0,
    )


def stats(
    sessions: sessionmaker[Session], tenant: str = TENANT
) -> tuple[tuple[int, int], dict[int, int]]:
    with sessions() as s:
        corpus = s.get(LexicalCorpusStats, tenant)
        dfs = {
            r.term_id: r.df
            for r in s.scalars(select(LexicalTermStats).where(LexicalTermStats.tenant_id == tenant))
        }
        return ((corpus.chunk_count, corpus.total_length) if corpus else (0, 0)), dfs


A = ("a", "Rivers flow to the sea. " * 12)
B = ("b", "Mountains rise above the clouds.")
C = ("c", "東京は日本の首都です。")


def test_index_counts_and_job_status(sessions: sessionmaker[Session]) -> None:
    store = InMemoryVectorStore()
    job_id = run(sessions, make_service(sessions, store), docs(A, B, C))
    job = get_job(sessions, job_id)
    assert (job.status, job.indexed, job.skipped, job.failed) == (JobStatus.SUCCEEDED, 3, 0, 0)
    a_chunks = store.chunk_ids(tenant_id=TENANT, document_id=str(document_id(TENANT, "a")))
    assert len(a_chunks) > 1, "the long document is chunked"
    assert store.count(tenant_id=TENANT) == len(a_chunks) + 2


def test_rerun_and_resubmit_do_no_work(sessions: sessionmaker[Session]) -> None:
    store = InMemoryVectorStore()
    service = make_service(sessions, store)
    job_id = run(sessions, service, docs(A, B))
    before = (store.count(tenant_id=TENANT), stats(sessions))
    assert service.process_job(job_id) is JobStatus.SUCCEEDED  # a re-delivered task
    job2 = run(sessions, service, docs(A, B))
    view = get_job(sessions, job2)
    assert (view.indexed, view.skipped) == (0, 2)
    assert (store.count(tenant_id=TENANT), stats(sessions)) == before


def test_changed_documents_replace_chunks_and_statistics_exactly(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    store = InMemoryVectorStore()
    service = make_service(sessions, store)
    run(sessions, service, docs(A, B))
    run(sessions, service, docs(("a", "Short now."), C))

    # The same final corpus ingested once, from scratch, in another tenant.
    fresh = InMemoryVectorStore()
    run(sessions, make_service(sessions, fresh), docs(("a", "Short now."), B, C), tenant="t2")
    assert stats(sessions) == stats(sessions, "t2")
    assert store.count(tenant_id=TENANT) == fresh.count(tenant_id="t2") == 3


class FlakyEmbedder(FakeEmbedder):
    """Fails on any text containing ``poison``."""

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        if any("poison" in t for t in texts):
            raise EncoderError("cannot encode poison")
        return super().embed_documents(texts, langs=langs)


def test_a_bad_document_fails_alone_and_keeps_its_previous_version(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    run(sessions, make_service(sessions, store), docs(B))
    old_chunks = store.chunk_ids(tenant_id=TENANT, document_id=str(document_id(TENANT, "b")))
    job_id = run(
        sessions, make_service(sessions, store, FlakyEmbedder()), docs(("b", "poison text"), C)
    )
    view = get_job(sessions, job_id)
    with sessions() as s:
        doc = s.get(Document, document_id(TENANT, "b"))
    assert (view.status, view.indexed, view.failed) == (JobStatus.PARTIAL, 1, 1)
    assert view.errors[0].external_id == "b"
    assert "poison" in view.errors[0].error
    assert doc is not None
    assert doc.content == B[1], "the indexed version is untouched"
    assert (
        store.chunk_ids(tenant_id=TENANT, document_id=str(document_id(TENANT, "b"))) == old_chunks
    )


class CrashingStore(InMemoryVectorStore):
    """Dies (transiently) after writing, before the stale chunks are deleted: what a
    worker killed at the worst moment leaves behind."""

    def __init__(self) -> None:
        super().__init__()
        self.crash = True

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        super().upsert(records)
        if self.crash:
            self.crash = False
            raise VectorStoreError("connection lost")


def test_a_crash_mid_job_loses_nothing_and_duplicates_nothing(
    sessions: sessionmaker[Session],
) -> None:
    store = CrashingStore()
    service = make_service(sessions, store)
    job_id = submit(sessions, docs(A, B, C))
    with pytest.raises(VectorStoreError):
        service.process_job(job_id)
    assert get_job(sessions, job_id).status is JobStatus.RUNNING
    assert service.process_job(job_id) is JobStatus.SUCCEEDED  # the retry

    clean = InMemoryVectorStore()
    run(sessions, make_service(sessions, clean), docs(A, B, C), tenant="t2")
    assert store.count(tenant_id=TENANT) == clean.count(tenant_id="t2")
    assert stats(sessions) == stats(sessions, "t2")
    view = get_job(sessions, job_id)
    assert (view.indexed, view.failed, view.attempts) == (3, 0, 2)


def test_chunks_of_an_abandoned_attempt_are_removed_by_the_next_version(
    sessions: sessionmaker[Session],
) -> None:
    store = CrashingStore()
    service = make_service(sessions, store)
    abandoned = submit(sessions, docs(A))
    with pytest.raises(VectorStoreError):
        service.process_job(abandoned)
    doc = str(document_id(TENANT, "a"))
    orphans = store.chunk_ids(tenant_id=TENANT, document_id=doc)
    assert orphans, "the dead attempt left chunks behind"
    with transaction(sessions) as session:  # retries exhausted: the job is given up
        fail_job(session, job_id=abandoned, error="worker lost")

    run(sessions, service, docs(("a", "A new, short version.")))
    assert store.chunk_ids(tenant_id=TENANT, document_id=doc).isdisjoint(orphans)
    assert store.count(tenant_id=TENANT) == 1
