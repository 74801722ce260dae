"""The chunks of a document in the vector store, with their vectors: a derived kind.

Indexing sends a group's records to the store from the write pipeline's ``store-write``
thread while the transaction writes the rows (the records' Python runs while the
transaction waits for the database), without waiting for the answer, so the next
group's records are made while the store writes these; the answers are waited for in
order on the ``store-answer`` thread, and the stale chunks (what the replaced version
had, and what interrupted attempts wrote) deleted there by primary key once the upsert
has succeeded: a failed write leaves the indexed version whole. The transaction ends
only once every answer is in (:meth:`DerivedWriter.wait`). No two writes in flight hold
the same chunk: a unit's groups hold distinct documents.

The document row records the ids of its chunks (``documents.chunk_ids``, written by the
indexer with the row, committed on the job item before the store sees them); reconcile
compares them with what the store holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from hsearch.db.engine import Session, SessionFactory
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.records import chunk_records
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore

__all__ = ["ChunkDrift", "StoredChunks"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChunkDrift:
    """One tenant's drift between the documents' chunk ids and the store."""

    tenant_id: str
    recorded_chunks: int
    stored_chunks: int
    orphans: tuple[str, ...]
    """Chunk ids in the store that no document records and no write in flight will
    record (sorted): searchable, and belonging to nothing."""
    missing: dict[str, int] = field(default_factory=dict)
    """Per external id, how many of the document's chunks the store lacks (a lost
    write, a restored backup)."""
    kind: str = "chunks"

    @property
    def clean(self) -> bool:
        return not self.orphans and not self.missing

    def figures(self) -> dict[str, object]:
        return {
            "recorded_chunks": self.recorded_chunks,
            "stored_chunks": self.stored_chunks,
            "orphan_chunks": len(self.orphans),
            "documents_missing_chunks": self.missing,
        }


class StoredChunks:
    """A document's chunks in the vector store (module docstring)."""

    name = "chunks"

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    def writer(self, unit: WriteUnit) -> _ChunkWriter:
        return _ChunkWriter(self._store, unit)

    def remove(self, session: Session, removal: Removal) -> None:
        """The documents' chunks deleted by primary key (inside the caller's
        transaction: if the store fails nothing changes; if the commit fails after it,
        the rows stay and a second delete finishes, deleting absent chunks being a
        no-op), and what their abandoned attempts recorded."""
        chunk_ids = [c for doc in removal.documents for c in doc.chunk_ids]
        gone = sorted(removal.attempts.difference(chunk_ids))
        if chunk_ids or gone:
            self._store.delete_chunks([*chunk_ids, *gone], tenant_id=removal.tenant_id)

    def sweep(self, tenant_id: str) -> None:
        """Every chunk of the tenant deleted by the tenant condition (with Milvus, its
        partition key: only its partition is touched)."""
        self._store.delete_tenant(tenant_id=tenant_id)

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        return {}  # nothing in the database: the chunk ids are on the document rows

    def rebuild(self, context: RebuildContext) -> _ChunkRebuild:
        return _ChunkRebuild(context.store)

    def check(self, sessions: SessionFactory, tenant_id: str) -> ChunkDrift:
        """Orphans: chunks the store holds that no document records and no write in
        flight will record (an item of an unfinished job records the ids it is about to
        write before it writes them, so those are left alone). Missing: chunks a
        document records that the store lacks."""
        stored = self._store.tenant_chunk_ids(tenant_id=tenant_id)
        with sessions() as session:
            rows = DocumentRepository(session).chunk_ids_by_external_id(tenant_id)
            in_flight = JobRepository(session).in_flight_chunk_ids(tenant_id)
        recorded: set[str] = set()
        missing: dict[str, int] = {}
        for external_id, chunk_ids in rows:
            ids = set(chunk_ids)
            recorded |= ids
            if lacking := len(ids - stored):
                missing[external_id] = lacking
        return ChunkDrift(
            tenant_id=tenant_id,
            recorded_chunks=len(recorded),
            stored_chunks=len(stored),
            orphans=tuple(sorted(stored - recorded - in_flight)),
            missing=missing,
        )

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """The orphans deleted; the documents with missing chunks to be submitted again
        from their stored text."""
        if not isinstance(drift, ChunkDrift):
            raise TypeError(f"not a drift of chunks: {drift!r}")
        if drift.orphans:
            self._store.delete_chunks(list(drift.orphans), tenant_id=drift.tenant_id)
            logger.warning(
                "reconcile.orphans_deleted tenant=%s chunks=%d", drift.tenant_id, len(drift.orphans)
            )
        return Repair(resubmit=tuple(sorted(drift.missing)), changed=bool(drift.orphans))


class _ChunkWriter:
    def __init__(self, store: VectorStore, unit: WriteUnit) -> None:
        self._store = store
        self._unit = unit
        self._answers: list[Future[None]] = []

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        """Send the group's records (the store's thread makes them), then read the chunk
        ids of unfinished attempts (one query for the group) and delete the stale
        chunks once the upsert has succeeded (module docstring)."""
        sent = self._unit.thread("store-write").submit(self._send, documents)
        answers = self._unit.thread("store-answer")
        upserted = answers.submit(_answer, sent)
        self._answers.append(upserted)
        unfinished = JobRepository(session).unfinished_chunk_ids_of(
            {d.document_id: d.item_id for d in documents}
        )
        stale: set[str] = set()
        for doc in documents:
            old = set(doc.replaced.chunk_ids if doc.replaced else ())
            # What interrupted attempts wrote, this item's own included.
            old.update(unfinished[doc.document_id], doc.attempts)
            old.difference_update(doc.chunk_ids)
            doc.stale_chunks = len(old)
            stale.update(old)
        if stale:
            self._answers.append(answers.submit(self._delete_stale, upserted, sorted(stale)))

    def finish(self, session: Session) -> None:
        pass

    def wait(self) -> BaseException | None:
        errors = [f.exception() for f in self._answers]  # every one waited for
        return next((e for e in errors if e is not None), None)

    def _send(self, documents: Sequence[DerivedDocument]) -> Callable[[], None]:
        """Send the records of ``documents`` to the store (their vectors as the kinds
        before made them, :meth:`DerivedDocument.stored_vectors`); returns the wait for
        the store's answer (:meth:`VectorStore.send_upsert`)."""
        records: list[ChunkRecord] = []
        for doc in documents:
            records.extend(_records(doc))
        return self._store.send_upsert(records)

    def _delete_stale(self, upserted: Future[None], stale: list[str]) -> None:
        """Delete ``stale`` chunks once ``upserted`` (the group's upsert, run before on
        the same thread) has succeeded: a failed write leaves the indexed version whole."""
        if upserted.exception() is None:
            self._store.delete_chunks(stale, tenant_id=self._unit.tenant_id)


class _ChunkRebuild:
    """Every document's chunks written to the collection being built, as indexing
    writes them (same ids, same records)."""

    def __init__(self, store: VectorStore) -> None:
        self._store = store

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        for doc in documents:
            self._store.upsert(_records(doc))

    def recount(self, document: DerivedDocument) -> None:
        pass

    def commit(self, session: Session) -> None:
        pass  # the rebuild switches the collection itself, last


def _records(doc: DerivedDocument) -> list[ChunkRecord]:
    """The store records of ``doc``'s chunks."""
    return chunk_records(
        tenant_id=doc.tenant_id,
        document_id=doc.document_id,
        external_id=doc.external_id,
        title=doc.title,
        source=doc.source,
        lang=doc.lang,
        tags=doc.tags,
        metadata=doc.metadata,
        created_at=doc.created_at,
        chunk_ids=doc.chunk_ids,
        chunks=doc.chunks,
        offsets=doc.offsets,
        vectors=doc.stored_vectors(),
    )


def _answer(sent: Future[Callable[[], None]]) -> None:
    """Wait for the store's answer to the write ``sent`` (raising what it raised)."""
    sent.result()()
