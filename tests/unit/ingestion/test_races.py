"""Writers racing on the same documents, interleaved deterministically.

One indexer is stopped while it encodes a group: its batch is decided (the chunk ids it
is about to write are committed on its items) and nothing of it is in the store yet.
Meanwhile another indexer runs a whole job on the same documents, then the first one
goes on. Whatever the order, the store holds exactly the chunks the metadata database
records for each document, the statistics are those of the final versions alone, and
every item ends in one state."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.base import utcnow
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import VectorStoreError
from hsearch.ingestion.api.documents import DocumentService
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.operations.reconcile import Reconciler
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import (
    TENANT,
    CrashingStore,
    docs,
    get_job,
    make_service,
    stats,
    submit,
)

OLD = ("x", "The old version of the page. " * 30)
FIRST = ("x", "A river runs through the valley to the sea. " * 30)
SECOND = ("x", "Mountains rise above the clouds in winter. " * 30)
OTHER = ("y", "Another document, written once. " * 10)


class PausingEmbedder(FakeEmbedder):
    """Runs ``meanwhile`` once, before encoding its first texts: what another worker
    does while this one encodes a decided batch."""

    def __init__(self) -> None:
        super().__init__()
        self.meanwhile: Callable[[], None] | None = None

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        action, self.meanwhile = self.meanwhile, None
        if action is not None:
            action()
        return super().embed_documents(texts, langs=langs)


def indexer(
    sessions: sessionmaker[Session], store: InMemoryVectorStore, owner: str
) -> tuple[IndexingService, PausingEmbedder]:
    embedder = PausingEmbedder()
    return make_service(sessions, store, embedder, owner=owner), embedder


def run_job(service: IndexingService, job_id: uuid.UUID) -> Callable[[], None]:
    def run() -> None:
        assert service.process_job(job_id) is JobStatus.SUCCEEDED

    return run


def assert_consistent(sessions: sessionmaker[Session], store: InMemoryVectorStore) -> None:
    """The store holds exactly the chunks each document records; nothing else."""
    with sessions() as session:
        recorded = {
            str(doc.id): set(doc.chunk_ids)
            for doc in session.scalars(select(Document).where(Document.tenant_id == TENANT))
        }
    for doc_id, chunk_ids in recorded.items():
        assert store.chunk_ids(tenant_id=TENANT, document_id=doc_id) == chunk_ids
    assert store.count(tenant_id=TENANT) == sum(len(ids) for ids in recorded.values())


def final_text(sessions: sessionmaker[Session], external_id: str) -> str:
    with sessions() as session:
        doc = session.get_one(Document, document_id(TENANT, external_id))
        return doc.content


def reference_stats(
    sessions: sessionmaker[Session], *versions: tuple[str, str]
) -> tuple[tuple[int, int], dict[int, int]]:
    """The statistics of ``versions`` indexed alone, in a tenant of their own."""
    service = make_service(sessions, InMemoryVectorStore())
    service.process_job(submit(sessions, docs(*versions), tenant="clean"))
    return stats(sessions, "clean")


def race(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    *,
    slow: list[DocumentInput],
    fast: list[DocumentInput],
    slow_first: bool,
) -> tuple[uuid.UUID, uuid.UUID]:
    """Submit ``slow`` and ``fast`` (in that order unless ``slow_first`` is false) on
    top of an indexed version of the documents; the slow job's indexer runs the whole
    fast job while it encodes its decided batch. Returns the two jobs' ids."""
    make_service(sessions, store).process_job(submit(sessions, docs(OLD, OTHER)))
    if slow_first:
        slow_job, fast_job = submit(sessions, slow), submit(sessions, fast)
    else:
        fast_job, slow_job = submit(sessions, fast), submit(sessions, slow)
    slow_indexer, embedder = indexer(sessions, store, "slow")
    fast_indexer, _ = indexer(sessions, store, "fast")
    embedder.meanwhile = run_job(fast_indexer, fast_job)
    assert slow_indexer.process_job(slow_job) is JobStatus.SUCCEEDED
    return slow_job, fast_job


def test_a_newer_submission_written_while_an_older_one_encodes_wins(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    older, newer = race(sessions, store, slow=docs(FIRST), fast=docs(SECOND), slow_first=True)

    assert final_text(sessions, "x") == SECOND[1]
    assert_consistent(sessions, store)
    assert stats(sessions) == reference_stats(sessions, SECOND, OTHER)
    old_job, new_job = get_job(sessions, older), get_job(sessions, newer)
    assert (old_job.status, old_job.indexed, old_job.skipped) == (JobStatus.SUCCEEDED, 0, 1)
    assert (new_job.status, new_job.indexed) == (JobStatus.SUCCEEDED, 1)


def test_an_older_submission_written_while_a_newer_one_encodes_is_replaced(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    newer, older = race(sessions, store, slow=docs(SECOND), fast=docs(FIRST), slow_first=False)

    assert final_text(sessions, "x") == SECOND[1]
    assert_consistent(sessions, store)
    assert stats(sessions) == reference_stats(sessions, SECOND, OTHER)
    assert get_job(sessions, older).indexed == get_job(sessions, newer).indexed == 1


def test_the_same_batch_submitted_twice_and_written_at_once_is_indexed_once(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    race(sessions, store, slow=docs(FIRST, OTHER), fast=docs(FIRST, OTHER), slow_first=True)

    assert final_text(sessions, "x") == FIRST[1]
    assert_consistent(sessions, store)
    assert stats(sessions) == reference_stats(sessions, FIRST, OTHER)


def test_a_worker_whose_lease_expired_mid_batch_writes_nothing_twice(
    sessions: sessionmaker[Session],
) -> None:
    """The worker stalls while encoding (its lease expires), another takes the job
    over and finishes it; the stalled one then wakes up with its encoded batch."""
    store = InMemoryVectorStore()
    make_service(sessions, store).process_job(submit(sessions, docs(OLD)))
    job_id = submit(sessions, docs(FIRST, OTHER))
    stalled, embedder = indexer(sessions, store, "stalled")
    taker, _ = indexer(sessions, store, "taker")

    def take_over() -> None:
        with sessions.begin() as session:
            session.execute(
                update(IngestionJob)
                .where(IngestionJob.id == job_id)
                .values(lease_expires_at=utcnow() - timedelta(seconds=1))
            )
        assert taker.process_job(job_id) is JobStatus.SUCCEEDED

    embedder.meanwhile = take_over

    stalled.process_job(job_id)

    assert_consistent(sessions, store)
    assert stats(sessions) == reference_stats(sessions, FIRST, OTHER)
    view = get_job(sessions, job_id)
    assert (view.status, view.indexed, view.skipped, view.failed) == (
        JobStatus.SUCCEEDED,
        2,
        0,
        0,
    )
    with sessions() as session:
        items = session.scalars(select(JobItem).where(JobItem.job_id == job_id)).all()
    assert {i.status for i in items} == {JobItemStatus.INDEXED}
    assert all(i.document_id == document_id(TENANT, i.external_id) for i in items)


def test_a_delete_while_the_submission_encodes_wins(sessions: sessionmaker[Session]) -> None:
    """The delete comes after the submission; the worker had decided it (its chunk ids
    recorded) and was encoding it: nothing of it is written, and its job goes on."""
    store = InMemoryVectorStore()
    make_service(sessions, store).process_job(submit(sessions, docs(OLD, OTHER)))
    job_id = submit(sessions, docs(FIRST, ("z", "A third document. " * 10)))
    service, embedder = indexer(sessions, store, "slow")
    documents = DocumentService(sessions, store=store, statistics=LexicalStatistics(sessions))
    deletions = []
    embedder.meanwhile = lambda: deletions.append(
        documents.delete(tenant_id=TENANT, external_id="x")
    )
    assert service.process_job(job_id) is JobStatus.SUCCEEDED

    assert deletions[0].superseded_jobs == (job_id,)
    assert deletions[0].deleted_chunks > 0  # the old version's
    with sessions() as session:
        assert session.get(Document, document_id(TENANT, "x")) is None
    assert store.chunk_ids(tenant_id=TENANT, document_id=str(document_id(TENANT, "x"))) == set()
    assert_consistent(sessions, store)
    assert stats(sessions) == reference_stats(sessions, OTHER, ("z", "A third document. " * 10))
    job = get_job(sessions, job_id)
    assert (job.indexed, job.skipped, job.total) == (1, 1, 2)


def test_a_delete_removes_what_a_dead_attempt_of_a_newer_version_stored(
    sessions: sessionmaker[Session],
) -> None:
    """The newer version's worker stored its chunks and died before its commit: the
    delete, under the document's row lock, removes them with the indexed version's."""
    store = CrashingStore()
    store.crash = False
    make_service(sessions, store).process_job(submit(sessions, docs(OLD)))
    newer = submit(sessions, docs(FIRST))
    store.crash = True
    with pytest.raises(VectorStoreError):
        make_service(sessions, store).process_job(newer)
    doc = str(document_id(TENANT, "x"))
    assert len(store.chunk_ids(tenant_id=TENANT, document_id=doc)) > 1, "both versions stored"

    documents = DocumentService(sessions, store=store, statistics=LexicalStatistics(sessions))
    deletion = documents.delete(tenant_id=TENANT, external_id="x")
    assert deletion.superseded_jobs == (newer,)
    assert store.chunk_ids(tenant_id=TENANT, document_id=doc) == set()
    assert store.count(tenant_id=TENANT) == 0


def test_a_delete_leaves_a_delete_job_to_its_work(sessions: sessionmaker[Session]) -> None:
    """A delete-by-filter job's pending item is no version of the document: it is not
    reported superseded, and the job ends as it would have (the document is gone)."""
    store = InMemoryVectorStore()
    make_service(sessions, store).process_job(submit(sessions, docs(OLD, OTHER)))
    queue = InMemoryJobQueue()
    with unit_of_work(sessions, queue=queue) as uow:
        job = JobService(uow, settings=IngestSettings()).submit_delete(
            tenant_id=TENANT, filter=None, everything=True
        )
    service = make_service(sessions, store, batch_documents=1, batches_per_task=1, requeue=queue)
    first = queue.messages.pop(0)
    assert service.process_job(first.job_id, turn=first.turn) is JobStatus.RUNNING  # one deleted
    with sessions() as session:
        (left,) = session.scalars(
            select(JobItem.external_id).where(
                JobItem.job_id == job.id, JobItem.status == JobItemStatus.PENDING
            )
        ).all()
    documents = DocumentService(sessions, store=store, statistics=LexicalStatistics(sessions))
    deletion = documents.delete(tenant_id=TENANT, external_id=left)
    assert deletion.superseded_jobs == ()
    assert deletion.deleted_chunks > 0
    while queue.messages:
        message = queue.messages.pop(0)
        service.process_job(message.job_id, turn=message.turn)
    assert get_job(sessions, job.id).status is JobStatus.SUCCEEDED
    assert store.count(tenant_id=TENANT) == 0


def test_a_delete_of_a_document_never_indexed_leaves_a_dead_attempt_to_reconcile(
    sessions: sessionmaker[Session],
) -> None:
    """With no document row there is nothing to lock on Postgres: a newer submission
    written meanwhile would store chunks of the ids a dead attempt stored (the same
    text), so the delete leaves those ids alone; reconcile reports them as orphans."""
    store = CrashingStore()
    job_id = submit(sessions, docs(FIRST))
    with pytest.raises(VectorStoreError):
        make_service(sessions, store).process_job(job_id)
    doc = str(document_id(TENANT, "x"))
    stored = store.chunk_ids(tenant_id=TENANT, document_id=doc)
    assert stored, "the dead attempt's chunks"

    documents = DocumentService(sessions, store=store, statistics=LexicalStatistics(sessions))
    deletion = documents.delete(tenant_id=TENANT, external_id="x")
    assert (deletion.deleted_chunks, deletion.superseded_jobs) == (0, (job_id,))
    assert store.chunk_ids(tenant_id=TENANT, document_id=doc) == stored
    reconciler = Reconciler(
        sessions, store=store, queue=InMemoryJobQueue(), settings=IngestSettings()
    )
    assert set(reconciler.check(TENANT).orphans) == stored
