"""The ingest service: accepting batches (API side) and indexing jobs (worker side).

Indexing a job is safe to run twice and to kill at any point:
* documents and chunks have deterministic ids and are written with upsert;
* a document row (and the tenant's lexical statistics) changes only in the same
  transaction that marks its job item done, after Milvus has the new chunks and the
  stale ones are deleted, so a re-delivered job redoes exactly the unfinished items;
* unchanged content (same hash, same encoder) is skipped without touching Milvus.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.base import utcnow
from hsearch.db.engine import transaction
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.lexical import LexicalStatsRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.bm25 import bm25_document_weights
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import BackendError, HsearchError, InvalidRequestError, JobNotFoundError
from hsearch.ingestion.chunking import chunk_text
from hsearch.ingestion.ids import chunk_id, content_hash, document_id
from hsearch.ingestion.models import DocumentInput, ItemError, JobView
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore

logger = logging.getLogger(__name__)

TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.PARTIAL, JobStatus.FAILED})


def submit_documents(
    session: Session, *, tenant_id: str, documents: Sequence[DocumentInput]
) -> IngestionJob:
    """Write a job and its items (one per document); the caller commits, then enqueues."""
    if not documents:
        raise InvalidRequestError("documents: at least one document is required")
    seen: dict[str, int] = {}
    for i, doc in enumerate(documents):
        if doc.external_id in seen:
            msg = (
                f"documents[{i}].external_id: {doc.external_id!r} repeats "
                f"documents[{seen[doc.external_id]}] in the same batch"
            )
            raise InvalidRequestError(msg)
        seen[doc.external_id] = i
    TenantRepository(session).ensure(tenant_id)
    job = IngestionJob(
        id=uuid.uuid4(),
        tenant_id=tenant_id,
        status=JobStatus.QUEUED,
        total=len(documents),
        indexed=0,
        skipped=0,
        failed=0,
        attempts=0,
    )
    job.items = [
        JobItem(
            ordinal=i,
            external_id=doc.external_id,
            title=doc.title,
            source=doc.source,
            lang=doc.lang,
            tags=list(doc.tags),
            metadata_=dict(doc.metadata),
            content=doc.text,
            content_hash=content_hash(
                title=doc.title,
                text=doc.text,
                source=doc.source,
                lang=doc.lang,
                tags=list(doc.tags),
                metadata=doc.metadata,
            ),
            status=JobItemStatus.PENDING,
        )
        for i, doc in enumerate(documents)
    ]
    JobRepository(session).add(job)
    return job


def mark_enqueue_failed(session: Session, *, job_id: uuid.UUID, error: str) -> None:
    job = JobRepository(session).get(job_id)
    if job is not None and job.status is JobStatus.QUEUED:
        job.status = JobStatus.FAILED
        job.error = error
        job.finished_at = utcnow()
        session.flush()


def fail_job(session: Session, *, job_id: uuid.UUID, error: str) -> None:
    """Give up on a job (retries exhausted): remaining items are marked failed."""
    job = JobRepository(session).lock(job_id)
    if job is None or job.status in TERMINAL:
        return
    for item in job.items:
        if item.status is JobItemStatus.PENDING:
            item.status = JobItemStatus.FAILED
            item.error = error
            job.failed += 1
    job.status = _final_status(job)
    job.error = error
    job.finished_at = utcnow()
    session.flush()


def get_job(session: Session, *, job_id: uuid.UUID, tenant_id: str) -> JobView:
    repo = JobRepository(session)
    job = repo.get(job_id, tenant_id=tenant_id)
    if job is None:
        raise JobNotFoundError(f"job {job_id} not found")
    errors = tuple(
        ItemError(ordinal=i.ordinal, external_id=i.external_id, error=i.error or "")
        for i in repo.failed_items(job_id)
    )
    return JobView(
        id=job.id,
        tenant_id=job.tenant_id,
        status=job.status,
        total=job.total,
        indexed=job.indexed,
        skipped=job.skipped,
        failed=job.failed,
        error=job.error,
        attempts=job.attempts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        errors=errors,
    )


@dataclass(frozen=True, slots=True)
class _PreparedItem:
    item_id: int
    document_id: uuid.UUID
    chunks: tuple[str, ...]


class IndexingService:
    """Worker side: turns a job's pending items into indexed chunks."""

    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        embedder: Embedder,
        store: VectorStore,
        chunk_max_chars: int,
        chunk_overlap_chars: int,
        batch_documents: int = 16,
    ) -> None:
        self._sessions = session_factory
        self._embedder = embedder
        self._store = store
        self._chunk_max = chunk_max_chars
        self._chunk_overlap = chunk_overlap_chars
        self._batch = batch_documents
        self._collection_ready = False

    def process_job(self, job_id: uuid.UUID) -> JobStatus:
        """Index every pending item of ``job_id``; returns the final status.

        Raises :class:`BackendError` (transient) with the job left ``running`` so a
        retry or a re-delivery picks up the remaining items.
        """
        with transaction(self._sessions) as session:
            job = JobRepository(session).lock(job_id)
            if job is None:
                raise JobNotFoundError(f"job {job_id} not found")
            if job.status in TERMINAL:
                logger.info("ingest.job.already_done job_id=%s status=%s", job_id, job.status)
                return job.status
            job.status = JobStatus.RUNNING
            job.attempts += 1
            job.started_at = job.started_at or utcnow()
            tenant_id = job.tenant_id
            pending = JobRepository(session).pending_item_ids(job_id)

        if not self._collection_ready:
            self._store.ensure_collection(self._embedder.info)
            self._collection_ready = True

        changed = False
        for start in range(0, len(pending), self._batch):
            changed |= self._process_batch(job_id, tenant_id, pending[start : start + self._batch])

        with transaction(self._sessions) as session:
            job = JobRepository(session).lock(job_id)
            if job is None:
                raise JobNotFoundError(f"job {job_id} not found")
            job.status = _final_status(job)
            job.finished_at = utcnow()
            if changed:
                TenantRepository(session).bump_generation(tenant_id)
            logger.info(
                "ingest.job.finished job_id=%s status=%s indexed=%d skipped=%d failed=%d",
                job_id,
                job.status,
                job.indexed,
                job.skipped,
                job.failed,
            )
            return job.status

    def _process_batch(self, job_id: uuid.UUID, tenant_id: str, item_ids: list[int]) -> bool:
        with transaction(self._sessions) as session:
            job = JobRepository(session).lock(job_id)
            if job is None:
                raise JobNotFoundError(f"job {job_id} not found")
            items = JobRepository(session).items(item_ids)
            docs = DocumentRepository(session)
            fingerprint = self._embedder.info.fingerprint
            todo: list[tuple[JobItem, _PreparedItem]] = []
            for item in items:
                if item.status is not JobItemStatus.PENDING:
                    continue
                doc_id = document_id(tenant_id, item.external_id)
                existing = docs.get_for_update(doc_id)
                if (
                    existing is not None
                    and existing.content_hash == item.content_hash
                    and existing.encoder == fingerprint
                ):
                    item.status = JobItemStatus.SKIPPED
                    item.document_id = doc_id
                    job.skipped += 1
                    logger.info(
                        "ingest.document.skipped job_id=%s external_id=%s", job_id, item.external_id
                    )
                    continue
                try:
                    chunks = chunk_text(
                        item.content, max_chars=self._chunk_max, overlap_chars=self._chunk_overlap
                    )
                    if not chunks:
                        raise InvalidRequestError("text: the document has no text to index")
                except (ValueError, InvalidRequestError) as exc:
                    self._fail(job, item, exc)
                    continue
                todo.append((item, _PreparedItem(item.id, doc_id, tuple(chunks))))

            embeddings = self._embed_items(job, todo)
            for item, prepared in todo:
                vectors = embeddings.get(prepared.item_id)
                if vectors is None:
                    continue  # failed and recorded by _embed_items
                self._index_item(
                    session,
                    job=job,
                    item=item,
                    prepared=prepared,
                    vectors=vectors,
                    tenant_id=tenant_id,
                )
            return any(item.status is JobItemStatus.INDEXED for item, _ in todo)

    def _embed_items(
        self, job: IngestionJob, todo: list[tuple[JobItem, _PreparedItem]]
    ) -> dict[int, list[Embedding]]:
        """Embed all chunks of the batch at once; on failure, item by item so one bad
        document fails alone."""
        texts = [_embedding_text(item.title, c) for item, p in todo for c in p.chunks]
        out: dict[int, list[Embedding]] = {}
        try:
            flat = self._embedder.embed_documents(texts) if texts else []
        except HsearchError:
            for item, prepared in todo:
                try:
                    out[prepared.item_id] = self._embedder.embed_documents(
                        [_embedding_text(item.title, c) for c in prepared.chunks]
                    )
                except HsearchError as exc:
                    self._fail(job, item, exc)
            return out
        pos = 0
        for _, prepared in todo:
            out[prepared.item_id] = flat[pos : pos + len(prepared.chunks)]
            pos += len(prepared.chunks)
        return out

    def _index_item(
        self,
        session: Session,
        *,
        job: IngestionJob,
        item: JobItem,
        prepared: _PreparedItem,
        vectors: list[Embedding],
        tenant_id: str,
    ) -> None:
        docs = DocumentRepository(session)
        lexical = LexicalStatsRepository(session)
        existing = docs.get(prepared.document_id)
        term_counts: Counter[int] = Counter()
        length = 0
        if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
            for e in vectors:
                term_counts.update(e.sparse.indices)
                length += int(sum(e.sparse.values))
            old_terms = {
                int(k): int(v) for k, v in (existing.lexical_terms if existing else {}).items()
            }
            old_chunks = existing.chunk_count if existing and existing.lexical_length else 0
            old_length = existing.lexical_length if existing else 0
            deltas = Counter(term_counts)
            deltas.subtract(old_terms)
            n_chunks, total = lexical.corpus(tenant_id)
            new_n = n_chunks - old_chunks + len(vectors)
            new_total = total - old_length + length
            avg_length = new_total / new_n if new_n > 0 else 1.0
            vectors = [
                Embedding(
                    dense=e.dense,
                    sparse=bm25_document_weights(
                        e.sparse,
                        length=max(1, int(sum(e.sparse.values))),
                        avg_length=max(avg_length, 1.0),
                    ),
                )
                for e in vectors
            ]
        created = existing.created_at if existing else utcnow()
        records = [
            ChunkRecord(
                chunk_id=chunk_id(prepared.document_id, i, text),
                document_id=str(prepared.document_id),
                tenant_id=tenant_id,
                external_id=item.external_id,
                title=item.title,
                text=text,
                ordinal=i,
                dense=e.dense,
                sparse=e.sparse,
                source=item.source,
                lang=item.lang,
                tags=tuple(item.tags),
                created_at=int(created.timestamp()),
                metadata=item.metadata_,
            )
            for i, (text, e) in enumerate(zip(prepared.chunks, vectors, strict=True))
        ]
        try:
            self._store.upsert(records)
            self._store.delete_document_chunks(
                tenant_id=tenant_id,
                document_id=str(prepared.document_id),
                keep=[r.chunk_id for r in records],
            )
        except BackendError:
            raise  # transient: the task retries; this batch's transaction rolls back
        except HsearchError as exc:
            self._fail(job, item, exc)
            return

        if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
            lexical.apply_delta(
                tenant_id,
                chunks=len(vectors) - old_chunks,
                length=length - old_length,
                term_deltas=deltas,
            )
        values = {
            "title": item.title,
            "source": item.source,
            "lang": item.lang,
            "tags": list(item.tags),
            "metadata_": dict(item.metadata_),
            "content": item.content,
            "content_hash": item.content_hash,
            "chunk_count": len(records),
            "lexical_terms": {str(k): v for k, v in term_counts.items()},
            "lexical_length": length,
            "encoder": self._embedder.info.fingerprint,
        }
        if existing is None:
            docs.add(
                Document(
                    id=prepared.document_id,
                    tenant_id=tenant_id,
                    external_id=item.external_id,
                    created_at=created,
                    **values,
                )
            )
        else:
            for key, value in values.items():
                setattr(existing, key, value)
        item.status = JobItemStatus.INDEXED
        item.document_id = prepared.document_id
        job.indexed += 1
        session.flush()
        logger.info(
            "ingest.document.indexed job_id=%s external_id=%s chunks=%d",
            job.id,
            item.external_id,
            len(records),
        )

    @staticmethod
    def _fail(job: IngestionJob, item: JobItem, exc: Exception) -> None:
        item.status = JobItemStatus.FAILED
        item.error = f"{type(exc).__name__}: {exc}"
        job.failed += 1
        logger.warning(
            "ingest.document.failed job_id=%s external_id=%s error=%s",
            job.id,
            item.external_id,
            item.error,
        )


def _embedding_text(title: str, chunk: str) -> str:
    # The title travels with every chunk: it is often the best evidence of the topic.
    return f"{title}\n{chunk}" if title else chunk


def _final_status(job: IngestionJob) -> JobStatus:
    if job.failed == 0:
        return JobStatus.SUCCEEDED
    if job.failed == job.total:
        return JobStatus.FAILED
    return JobStatus.PARTIAL
