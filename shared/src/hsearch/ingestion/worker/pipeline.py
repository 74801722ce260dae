"""The indexer's write path: a job's batches read, decided, encoded and written, the
store's writes pipelined with the database's.

Each batch is decided at once (:mod:`hsearch.ingestion.worker.decisions`), then encoded
(:mod:`hsearch.ingestion.worker.encoding`) and written in groups, so that progress is
committed about once per group, whatever the documents' size. What is derived from the
documents is written by the registered kinds (:mod:`hsearch.ingestion.derived`: the
chunks in the store, the tenant's lexical statistics and vocabulary, ...) in the
transaction that writes their rows: a document row (and what is derived from it)
changes only in the transaction that marks its job item done, after the store has the
new chunks and the stale ones are deleted, and the chunk ids about to be written are
committed on the items before the store sees them. The job runner
(:mod:`hsearch.ingestion.worker.indexer`) calls :meth:`WritePipeline.index_batches` for a
turn's batches.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hsearch.db.base import utcnow
from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.models import Document, IngestionJob, JobItemStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import ItemRow, JobRepository
from hsearch.embedding.protocol import Embedder, Embedding
from hsearch.errors import BackendError, HsearchError, InvalidRequestError, JobNotFoundError
from hsearch.graph.links import TextLinks, links_from_json
from hsearch.ingestion.chunking import Chunk, Chunker
from hsearch.ingestion.derived.protocol import DerivedDocument, DerivedWriter, WriteUnit
from hsearch.ingestion.derived.registry import DerivedKinds
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.worker.decisions import (
    BatchRead,
    Chunked,
    Decision,
    PreparedItem,
    chunk_ids_of,
    current,
    decide_items,
    document_row,
    failed,
    newer_indexed,
    pending,
    superseded,
    unchanged,
)
from hsearch.ingestion.worker.encoding import Embedded, GroupEncoder
from hsearch.ingestion.worker.lookahead import Lookahead
from hsearch.metrics import instruments

__all__ = ["WritePipeline", "locked_job"]

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _UnitWrite:
    """What the groups of one transaction's write share (:meth:`WritePipeline._write_unit`)."""

    writers: list[DerivedWriter]
    """Every derived kind's writes in this transaction (:mod:`hsearch.ingestion.derived`):
    told of each group, finished once before the commit, and waited for (what they sent
    to the store) before the transaction ends."""
    locked: dict[uuid.UUID, Document] | None = None
    """The documents of every group, locked as the unit began (``None``: a unit of one
    group, which locks its own). A unit's groups hold distinct documents: they are one
    job's, whose external ids are unique (:meth:`JobService.submit`)."""
    indexed: list[int] = field(default_factory=list)
    """The items written, marked indexed once, before the commit."""


_GroupInput = tuple[list[PreparedItem], dict[int, list[Embedding]]]
"""A group to write: its items, and their embeddings by item id."""


class WritePipeline:
    """A job's batches read, decided, encoded and written (:meth:`index_batches`)."""

    def __init__(
        self,
        *,
        session_factory: SessionFactory,
        embedder: Embedder,
        derived: DerivedKinds,
        chunker: Chunker,
        batch_chunks: int = 128,
        groups_per_commit: int = 4,
    ) -> None:
        """``chunker`` cuts documents; what is derived from them is written by the kinds
        of ``derived`` (the chunks in the store among them); up to ``groups_per_commit``
        groups of ``batch_chunks`` that are encoded already are written in one
        transaction."""
        self._sessions = session_factory
        self._embedder = embedder
        self._derived = derived
        self._chunker = chunker
        self._batch_chunks = batch_chunks
        self._groups_per_commit = max(1, groups_per_commit)
        self._encoder = GroupEncoder(session_factory, embedder=embedder, batch_chunks=batch_chunks)
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._threads_lock = threading.Lock()

    def close(self) -> None:
        """Stop the pipeline's threads (a group queued and not started is dropped)."""
        with self._threads_lock:
            threads, self._threads = list(self._threads.values()), {}
        for thread in threads:
            thread.shutdown(wait=True, cancel_futures=True)

    def index_batches(self, job_id: uuid.UUID, tenant_id: str, batches: list[list[int]]) -> bool:
        """Index the items of ``batches``; returns whether any document changed.

        Each batch is decided at once (skip unchanged documents, chunk the others), then
        encoded and written in groups of at most ``batch_chunks`` chunks (a larger
        document is a group of its own), so that progress is committed about once per
        group, whatever the documents' size. The encoder works ahead, in a thread of its
        own: while it encodes a group, this thread writes the ones before, and the
        groups after it are queued behind it, so the encoder goes from group to group
        without waiting for a decision (encoding changes nothing, so a group encoded for
        nothing, the job cancelled or failing meanwhile, costs only its time).

        The store is the bound of the write path. A group's own rows are read and its
        records made before its store write can start; so when the encoder is ahead
        (its next groups encoded by the time a write begins), up to
        ``groups_per_commit`` groups are written in one transaction, each one's reads
        and records made while the store writes the one before (:meth:`_write_unit`).
        With an encoder slower than the store, that is one group per transaction, as
        the encoder finishes it. Batches are decided, and read and chunked before that,
        while groups are being stored (:class:`Lookahead`), not between two groups'
        store writes.
        """
        fingerprint = self._embedder.info.fingerprint
        reader = self._thread("read")

        def decide(
            item_ids: list[int], read: BatchRead, held: tuple[Session, IngestionJob] | None
        ) -> Decision:
            if held is None:
                return self._decide(job_id, tenant_id, item_ids, read)
            session, job = held
            return self._decide_in(session, job, tenant_id, item_ids, read, in_write=True)

        ahead = Lookahead(
            batches,
            read=lambda item_ids: reader.submit(
                self._chunk_unlocked, tenant_id, item_ids, fingerprint
            ),
            decide=decide,
            max_chunks=self._batch_chunks,
            depth=self._groups_per_commit,
        )
        encoder = self._thread("encode")
        queued: deque[tuple[list[PreparedItem], Future[Embedded]]] = deque()

        def fill(*, alone: bool = True) -> None:
            """Queue for encoding the groups decided, up to a unit and one more; decide
            a batch on its own (``alone``) only when nothing at all is queued (batches
            are decided in the writes otherwise)."""
            while len(queued) <= self._groups_per_commit:
                group = ahead.next_group(decide=alone and not queued)
                if group is None:
                    return
                queued.append(
                    (group, encoder.submit(self._encoder.embed_items, group, job_id=job_id))
                )

        changed = False
        try:
            fill()
            while queued:
                group, encoding = queued.popleft()
                unit = [(group, encoding.result())]
                # Groups encoded meanwhile join it, up to a unit: one transaction, and
                # each group's rows read while the group before is being stored.
                while len(unit) < self._groups_per_commit and queued and queued[0][1].done():
                    group, encoding = queued.popleft()
                    unit.append((group, encoding.result()))
                # The groups decided after it encode while this unit is written. The
                # next batch is decided in the write, not on its own before it (the
                # store would wait for that decision): a job's first write starts once
                # its first batch is decided.
                fill(alone=False)
                changed |= self._process_unit(job_id, tenant_id, unit, ahead=ahead)
                fill()
        finally:
            for _, encoding in queued:
                encoding.cancel()  # groups not yet encoding when one failed
        return changed

    def _process_unit(
        self,
        job_id: uuid.UUID,
        tenant_id: str,
        unit: list[tuple[list[PreparedItem], Embedded]],
        *,
        ahead: Lookahead,
    ) -> bool:
        """1. encoded (``unit``: groups and their embeddings), with no transaction open
           (the slow part); the documents the encoder failed on are marked failed (a
           transaction of their own, only when there are any);
        2. in one transaction, under the documents' row locks, group after group: what
           every derived kind keeps of the group's documents (its chunks upserted in the
           store, the stale ones deleted by primary key, the statistics), the documents'
           rows, the items marked (:meth:`_write`). The chunk ids
           were recorded on the items when the batch was decided (:meth:`_decide`).
           ``ahead`` decides and reads the next batches while the store writes
           (:meth:`_write_group`).
        """
        writes: list[_GroupInput] = []
        for group, (embeddings, errors) in unit:
            if errors:
                self._fail_encoded(job_id, group, errors)
            ready = [p for p in group if p.item_id not in errors]
            if ready:
                writes.append((ready, embeddings))
        if not writes:
            return False
        return self._write(job_id, tenant_id, writes, ahead=ahead)

    def _fail_encoded(
        self, job_id: uuid.UUID, group: list[PreparedItem], errors: dict[int, HsearchError]
    ) -> None:
        """The documents of ``group`` the encoder failed on (``errors``) marked failed."""
        with transaction(self._sessions) as session:
            job = locked_job(session, job_id)
            jobs = JobRepository(session)
            states = jobs.item_states(sorted(errors))
            rows = {p.item_id: p.item for p in group}
            jobs.update_items(
                [
                    failed(job, rows[item_id], error)
                    for item_id, error in errors.items()
                    if pending(states[item_id])  # else cancelled while it was encoded
                ]
            )

    def _write(
        self,
        job_id: uuid.UUID,
        tenant_id: str,
        groups: list[_GroupInput],
        *,
        ahead: Lookahead,
    ) -> bool:
        """Write ``groups`` in one transaction; returns whether any document changed.
        The batches ``ahead`` decides in that transaction count only once it commits.

        A store error that is not transient (the store refused the records) rolls the
        transaction back and writes its groups one by one, and a group's documents one
        by one, so that the document at fault fails alone and the others are indexed.
        """
        try:
            try:
                with transaction(self._sessions) as session:
                    documents, chunks = self._write_unit(
                        session, job_id, tenant_id, groups, ahead=ahead
                    )
            except BaseException:
                ahead.settle(committed=False)
                raise
            ahead.settle(committed=True)
            # Counted once committed: a group rolled back is indexed again, counted then.
            instruments.record_ingest(outcome="indexed", documents=documents, chunks=chunks)
            return documents > 0
        except _StoreRefusedError as refused:
            if len(groups) > 1:
                written = [self._write(job_id, tenant_id, [g], ahead=ahead) for g in groups]
                return any(written)
            ((ready, embeddings),) = groups
            if len(ready) > 1:
                written = [
                    self._write(job_id, tenant_id, [([p], embeddings)], ahead=ahead) for p in ready
                ]
                return any(written)
            with transaction(self._sessions) as session:
                job = locked_job(session, job_id)
                jobs = JobRepository(session)
                item = ready[0].item
                if pending(jobs.item_states([item.id])[item.id]):
                    jobs.update_items([failed(job, item, refused.error)])
            return False

    def _write_unit(
        self,
        session: Session,
        job_id: uuid.UUID,
        tenant_id: str,
        groups: list[_GroupInput],
        *,
        ahead: Lookahead,
    ) -> tuple[int, int]:
        """The groups' writes in ``session``, one after the other: a group's rows are
        read, weighed and made into records while the store writes the group before
        (the store's thread takes their calls in order). The documents of every group
        are locked first, in id order, as a group's are: two workers writing
        overlapping units wait for each other instead of deadlocking. Returns the
        documents and chunks written, once the store has answered every call."""
        job = locked_job(session, job_id)
        unit = _UnitWrite(
            writers=self._derived.writers(
                WriteUnit(tenant_id=tenant_id, encoder=self._embedder.info, thread=self._thread)
            )
        )
        if len(groups) > 1:
            unit.locked = DocumentRepository(session).get_many(
                {p.document_id for ready, _ in groups for p in ready}, for_update=True
            )
        written: list[tuple[ItemRow, int, int]] = []
        try:
            for ready, embeddings in groups:
                written += self._write_group(
                    session, job, tenant_id, ready, embeddings, ahead=ahead, unit=unit
                )
            # What the kinds keep changes once for the unit's groups (the statistics: a
            # row per term), the items once, and the job's row once (each change of an
            # object loaded costs a flush of it).
            for writer in unit.writers:
                writer.finish(session)
            JobRepository(session).update_items(
                [{"id": item_id, "status": JobItemStatus.INDEXED} for item_id in unit.indexed]
            )
            job.indexed += len(written)
        finally:
            # Never committed, nor rolled back, before the store has answered.
            errors = [writer.wait() for writer in unit.writers]  # every one waited for
            error = next((e for e in errors if e is not None), None)
        if isinstance(error, HsearchError) and not isinstance(error, BackendError):
            raise _StoreRefusedError(error) from error
        if error is not None:
            raise error  # transient (BackendError) or unexpected: this transaction rolls back
        _log_indexed(job_id, written)
        return len(written), sum(count for _, count, _ in written)

    def _decide(
        self, job_id: uuid.UUID, tenant_id: str, item_ids: list[int], read: BatchRead
    ) -> Decision:
        """:meth:`_decide_in` a transaction of its own."""
        with transaction(self._sessions) as session:
            job = locked_job(session, job_id)
            return self._decide_in(session, job, tenant_id, item_ids, read, in_write=False)

    def _decide_in(
        self,
        session: Session,
        job: IngestionJob,
        tenant_id: str,
        item_ids: list[int],
        read: BatchRead,
        *,
        in_write: bool,
    ) -> Decision:
        """Skip what needs no work (unchanged or superseded documents), chunk the rest
        (``read``: the batch's items read, and chunked, before the job is locked), in
        ``session``, whose transaction holds ``job`` locked; the items' state and the
        documents read in one query each, and the documents it would skip read again,
        locked (skipping changes their rows). Returns what is to be encoded and written,
        valid once the transaction commits (:func:`decide_items`).

        ``in_write``: the transaction is a group's write, which holds its documents'
        rows: the items of unchanged documents are left undecided (``deferred``), since
        skipping one changes its document's row (its version), and taking that row
        while holding others could deadlock with a worker writing that document."""
        fingerprint = self._embedder.info.fingerprint
        jobs = JobRepository(session)
        states = jobs.item_states(item_ids)
        items = [
            current(row, states[row.id])
            for row in read.items
            if row.id in states and pending(states[row.id])
        ]
        known = read.document_ids
        ids = {
            i.id: known[i.id] if i.id in known else document_id(tenant_id, i.external_id)
            for i in items
        }
        documents = DocumentRepository(session).get_many(set(ids.values()))
        if not in_write:
            # Skipping an unchanged document changes its row (its version): those rows
            # are read again, locked, so that a worker writing one of them meanwhile is
            # waited for and what it wrote decided on (its newer version supersedes this
            # item; its other content, older, is replaced by this item's).
            skipping = {
                ids[i.id] for i in items if unchanged(documents.get(ids[i.id]), i, fingerprint)
            }
            if skipping:
                locked = DocumentRepository(session).get_many(skipping, for_update=True)
                for doc_id in skipping:
                    if doc_id in locked:
                        documents[doc_id] = locked[doc_id]
                    else:  # deleted meanwhile: indexed anew
                        del documents[doc_id]
        decided = decide_items(
            job,
            items,
            ids=ids,
            documents=documents,
            fingerprint=fingerprint,
            read=read,
            chunk=self._chunk,
            in_write=in_write,
        )
        jobs.update_items(decided.changes)
        return decided.decision

    def _chunk(self, item: ItemRow) -> list[Chunk]:
        chunks = self._chunker.chunk(item.content, title=item.title, lang=item.lang)
        if not chunks:
            raise InvalidRequestError("text: the document has no text to index")
        return chunks

    def _chunk_unlocked(self, tenant_id: str, item_ids: list[int], fingerprint: str) -> BatchRead:
        """The batch's items, and the chunks (or the error) of each that, as its
        document stands now, will be written: read and cut before the decision locks
        the job (on SQLite, the database's write lock), since chunking a batch of long
        documents takes a while and every other writer would wait for it. The decision
        checks again under the lock; an item's text never changes, so its chunks stay
        right."""
        with self._sessions() as session:
            items = JobRepository(session).item_rows(item_ids)
            waiting = [i for i in items if pending(i)]
            ids = {i.id: document_id(tenant_id, i.external_id) for i in waiting}
            documents = DocumentRepository(session).get_many(set(ids.values()))
            wanted = []
            for item in waiting:
                existing = documents.get(ids[item.id])
                if not (newer_indexed(existing, item) or unchanged(existing, item, fingerprint)):
                    wanted.append(item)
        out: Chunked = {}
        cids: dict[int, tuple[str, ...]] = {}
        for item in wanted:
            try:
                chunks = out[item.id] = self._chunk(item)
            except (ValueError, InvalidRequestError) as exc:
                out[item.id] = exc
            else:
                cids[item.id] = chunk_ids_of(ids[item.id], chunks)
        return BatchRead(items=items, chunks=out, document_ids=ids, chunk_ids=cids)

    def _write_group(
        self,
        session: Session,
        job: IngestionJob,
        tenant_id: str,
        ready: list[PreparedItem],
        embeddings: dict[int, list[Embedding]],
        *,
        ahead: Lookahead,
        unit: _UnitWrite,
    ) -> list[tuple[ItemRow, int, int]]:
        """The group's statements in ``session``, which holds ``job`` locked, one per
        kind rather than one per document: the items and the documents (locked, in id
        order: two workers writing overlapping groups wait for each other instead of
        deadlocking) read in one query each; the derived kinds told of the group's
        documents (each kind in registration order: the statistics weigh a document as
        the tenant's corpus stands once the documents before it are counted in, the
        store's kind sends the records and reads the chunk ids of unfinished attempts);
        the new documents inserted together. Once the rows are written, while the store
        writes, ``ahead`` decides the next batch in this transaction and reads the one
        after. Returns the documents written (item, chunks, stale chunks deleted), which
        the caller counts on the job."""
        docs = DocumentRepository(session)
        jobs = JobRepository(session)
        states = jobs.item_states([p.item_id for p in ready])
        # Cancelled meanwhile: nothing of it is written.
        todo = sorted(
            (p for p in ready if pending(states[p.item_id])), key=lambda p: p.document_id.int
        )
        wanted = {p.document_id for p in todo}
        if unit.locked is None:
            existing = docs.get_many(wanted, for_update=True)
        else:  # locked, and read, as the unit began
            existing = {d: unit.locked[d] for d in wanted if d in unit.locked}
        live = self._skip_superseded(jobs, job, todo, existing)
        if not live:
            return []
        now = utcnow()
        documents = [
            _derived_document(
                tenant_id,
                p,
                existing.get(p.document_id),
                now=now,
                embeddings=embeddings[p.item_id],
                attempts=states[p.item_id].chunk_ids,
            )
            for p in live
        ]
        for writer in unit.writers:
            writer.write_group(session, documents)
        encoder = self._embedder.info.fingerprint
        added: list[dict[str, Any]] = []
        written: list[tuple[ItemRow, int, int]] = []
        for prepared, document in zip(live, documents, strict=True):
            new = document_row(prepared.item, document, encoder=encoder)
            if new is not None:
                added.append(new)
            written.append((prepared.item, len(prepared.chunks), document.stale_chunks))
        unit.indexed.extend(p.item_id for p in live)
        docs.insert_all(added)
        session.flush()
        ahead.during_write(session, job)
        return written

    @staticmethod
    def _skip_superseded(
        jobs: JobRepository,
        job: IngestionJob,
        todo: list[PreparedItem],
        existing: dict[uuid.UUID, Document],
    ) -> list[PreparedItem]:
        """``todo`` but the items whose document holds a newer submission, which are
        skipped (:func:`~hsearch.ingestion.worker.decisions.superseded`)."""
        live: list[PreparedItem] = []
        skipped: list[dict[str, Any]] = []
        for prepared in todo:
            if newer_indexed(existing.get(prepared.document_id), prepared.item):
                skipped.append(superseded(job, prepared.item, prepared.document_id))
            else:
                live.append(prepared)
        jobs.update_items(skipped)
        return live

    def _thread(self, name: str) -> ThreadPoolExecutor:
        """The pipeline's thread ``name``: ``encode`` (the encoder, a group ahead of the
        writes), ``read`` (batches read and chunked ahead of their decisions,
        :class:`Lookahead`), or one a derived kind asks for (:class:`WriteUnit`: the
        store's ``store-write``, a group's records made and sent beside its rows', and
        ``store-answer``, the store's answers waited for in order)."""
        with self._threads_lock:
            if name not in self._threads:
                self._threads[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
            return self._threads[name]


def locked_job(session: Session, job_id: uuid.UUID) -> IngestionJob:
    """``job_id``'s row, locked in ``session``'s transaction; JobNotFoundError if gone."""
    job = JobRepository(session).lock_any_tenant(job_id)
    if job is None:
        raise JobNotFoundError(f"job {job_id} not found")
    return job


class _StoreRefusedError(Exception):
    """The store refused a group's records with an error that is not transient."""

    def __init__(self, error: HsearchError) -> None:
        super().__init__(str(error))
        self.error = error


def _derived_document(
    tenant_id: str,
    prepared: PreparedItem,
    replaced: Document | None,
    *,
    now: datetime,
    embeddings: list[Embedding],
    attempts: list[str] | None,
) -> DerivedDocument:
    """``prepared``'s document as the derived kinds are told of it."""
    item = prepared.item
    return DerivedDocument(
        tenant_id=tenant_id,
        document_id=prepared.document_id,
        external_id=item.external_id,
        title=item.title,
        source=item.source,
        lang=item.lang,
        tags=item.tags,
        metadata=item.metadata,
        links=links_from_json(item.links),
        text_links=None if item.text_links is None else frozenset(map(TextLinks, item.text_links)),
        content=item.content,
        created_at=replaced.created_at if replaced is not None else now,
        chunks=prepared.chunks,
        offsets=prepared.offsets,
        chunk_ids=prepared.chunk_ids,
        embeddings=embeddings,
        replaced=replaced,
        item_id=item.id,
        attempts=frozenset(attempts or ()),
    )


def _log_indexed(job_id: uuid.UUID, written: list[tuple[ItemRow, int, int]]) -> None:
    for item, count, deleted in written:
        logger.info(
            "ingest.document.indexed job_id=%s external_id=%s chunks=%d stale_deleted=%d",
            job_id,
            item.external_id,
            count,
            deleted,
        )
