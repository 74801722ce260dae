"""The worker side of ingestion: indexing a job's pending items into chunks.

The API side (accepting a batch, reading a job) is :mod:`hsearch.ingestion.api.jobs`; the
two meet only through the job rows and the job id the queue carries.

Indexing a job is safe to run twice and to kill at any point:
* documents and chunks have deterministic ids and are written with upsert;
* a document row (and the tenant's lexical statistics) changes only in the same
  transaction that marks its job item done, after Milvus has the new chunks and the
  stale ones are deleted, so a re-delivered job redoes exactly the unfinished items;
* unchanged content (same hash, same encoder) is skipped without touching Milvus.

A job is reported finished (its terminal status) only once a store flush that began
after its last write has run, so a finished job's chunks are sealed and fast to search.
Until then it stays ``running`` with no pending item; :class:`FlushSchedule` decides when
the flush runs, one for many jobs when they finish close together. A worker finishes
the jobs it wrote; its first flush also finishes those a stopped worker left waiting.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, TypeGuard

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.base import utcnow
from hsearch.db.engine import DATABASE_UNAVAILABLE, duplicate_row, transaction, unavailable
from hsearch.db.models import Document, IngestionJob, JobItemStatus, JobStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import ItemRow, ItemState, JobRepository
from hsearch.db.repositories.lexical import VocabularyRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import (
    BackendError,
    ConcurrentWriteError,
    HsearchError,
    InvalidRequestError,
    JobNotFoundError,
)
from hsearch.ingestion.chunking import Chunk, Chunker
from hsearch.ingestion.deletion import DocumentDeleter
from hsearch.ingestion.ids import chunk_id, document_id
from hsearch.ingestion.queue import JobQueue
from hsearch.ingestion.records import chunk_records, embedding_text
from hsearch.ingestion.worker.flushing import FlushSchedule, TimerFactory, start_thread_timer
from hsearch.ingestion.worker.leases import LeaseKeeper, aware, worker_identity
from hsearch.lexical.statistics import (
    LexicalContribution,
    LexicalStatistics,
    PendingStatistics,
    WeightedDocument,
    weigh_chunks,
)
from hsearch.lexical.typos import vocabulary_words
from hsearch.metrics import instruments
from hsearch.types import FINISHED_JOB_STATUSES, SEARCHABLE_JOB_STATUSES, JobKind
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore

logger = logging.getLogger(__name__)

_DOCUMENT_KEYS = ("pk_documents", "uq_documents_tenant_id")
"""The documents table's unique constraints: a document id, a tenant's external id."""


@dataclass(frozen=True, slots=True)
class _PreparedItem:
    item: ItemRow  # as read before the decision: what it is used for never changes
    document_id: uuid.UUID
    chunks: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    chunk_ids: tuple[str, ...]

    @property
    def item_id(self) -> int:
        return self.item.id


_Chunked = dict[int, list[Chunk] | ValueError | InvalidRequestError]
"""Per item id, its chunks or why it has none."""


@dataclass(frozen=True, slots=True)
class _BatchRead:
    """A batch's items, read before its decision locks the job, and the chunks of those
    that would be written as their documents stood then (:meth:`_chunk_unlocked`)."""

    items: list[ItemRow]
    chunks: _Chunked
    document_ids: dict[int, uuid.UUID] = field(default_factory=dict)
    """Per item id, its document's id, for the items read pending."""
    chunk_ids: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Per item id, the ids of the chunks in :attr:`chunks`."""


@dataclass(slots=True)
class _UnitWrite:
    """What the groups of one transaction's write share (:meth:`IndexingService._write_unit`)."""

    stored: list[Future[None]] = field(default_factory=list)
    """The store's answers to the unit's writes, waited for before the transaction ends."""
    pending: PendingStatistics = field(default_factory=PendingStatistics)
    """The documents weighed, whose statistics change once, before the commit."""
    locked: dict[uuid.UUID, Document] | None = None
    """The documents of every group, locked as the unit began (``None``: a unit of one
    group, which locks its own). A unit's groups hold distinct documents: they are one
    job's, whose external ids are unique (:meth:`JobService.submit`)."""
    indexed: list[int] = field(default_factory=list)
    """The items written, marked indexed once, before the commit."""
    words: set[str] = field(default_factory=set)
    """The words of the documents written, listed in the tenant's vocabulary once,
    before the commit (:mod:`hsearch.lexical.typos`)."""


_Embedded = tuple[dict[int, list[Embedding]], dict[int, HsearchError]]
"""A group's embeddings and the errors of its documents that failed, by item id."""

_GroupInput = tuple[list["_PreparedItem"], dict[int, list[Embedding]]]
"""A group to write: its items, and their embeddings by item id."""


class IndexingService:
    """Worker side: turns a job's pending items into indexed chunks."""

    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        embedder: Embedder,
        store: VectorStore,
        statistics: LexicalStatistics,
        chunker: Chunker | None = None,
        batch_documents: int = 64,
        batch_chunks: int = 128,
        groups_per_commit: int = 4,
        flush_min_interval_s: float = 0.0,
        lease_s: float = 60.0,
        owner: str | None = None,
        batches_per_task: int = 0,
        requeue: JobQueue | None = None,
        on_finished: Callable[[], None] | None = None,
        collection_ready: bool = False,
        clock: Callable[[], float] = time.monotonic,
        start_timer: TimerFactory = start_thread_timer,
    ) -> None:
        """``chunker`` cuts documents (default: the encoder's tokenizer, default sizes);
        up to ``groups_per_commit`` groups of ``batch_chunks`` that are encoded already
        are written in one transaction (:meth:`_index_batches`);
        ``flush_min_interval_s`` 0 flushes at the end of every job that wrote chunks;
        with ``batches_per_task`` (and ``requeue``) a job runs that many batches, then
        goes to the back of the queue (``requeue``) so that other jobs, other tenants'
        among them, take turns with it (0: each job runs whole);
        ``lease_s`` is the lease on a job this service works on
        (:mod:`hsearch.ingestion.worker.leases`), ``owner`` its name (default: unique to the
        process); ``on_finished`` is called once the end of a job is committed (the
        worker's sweeper then delivers its webhook); ``collection_ready``: the store's
        collection was ensured for ``embedder`` already (by
        :func:`~hsearch.runtime.build_services`), else the first job ensures it;
        ``clock`` and ``start_timer`` drive the flush schedule (tests replace them)."""
        self._sessions = session_factory
        self._embedder = embedder
        self._store = store
        self._statistics = statistics
        self._chunker = chunker or Chunker(embedder.tokenizer)
        self._batch = batch_documents
        self._batch_chunks = batch_chunks
        self._groups_per_commit = max(1, groups_per_commit)
        self._collection_ready = collection_ready
        # Jobs written here and not yet finished; the timer thread reads it too.
        self._waiting: set[uuid.UUID] = set()
        self._waiting_lock = threading.Lock()
        self._started = utcnow()
        self._swept = False
        self._flushes = FlushSchedule(
            self._seal, min_interval_s=flush_min_interval_s, clock=clock, start_timer=start_timer
        )
        self._leases = LeaseKeeper(
            session_factory, owner=owner or worker_identity(), lease_s=lease_s
        )
        self._turn = batches_per_task * batch_documents if requeue is not None else 0
        self._requeue = requeue
        self._deleter = DocumentDeleter(store=store, statistics=statistics)
        self._on_finished = on_finished
        self._threads: dict[str, ThreadPoolExecutor] = {}
        self._threads_lock = threading.Lock()
        # Jobs ended in a transaction, counted in the metrics once it has committed
        # (:meth:`_ended`), per thread: the flush timer's thread ends jobs too.
        self._ends = threading.local()

    def process_job(self, job_id: uuid.UUID, *, turn: int | None = None) -> JobStatus:
        """:meth:`_process_job`, with the database's transient errors (unreachable, or a
        transaction it aborted: a deadlock, a serialization failure) raised as
        :class:`~hsearch.errors.MetadataUnavailableError`, a :class:`BackendError`, so
        the task retries the job instead of failing its documents. So is a new
        document's row inserted by another worker while this one wrote it
        (:class:`~hsearch.errors.ConcurrentWriteError`): on Postgres the insert waits
        for the other's commit and then fails; the retry finds the row and decides on
        it (a newer submission supersedes an older one)."""
        try:
            return self._process_job(job_id, turn=turn)
        except DATABASE_UNAVAILABLE as exc:
            raise unavailable(exc) from exc
        except IntegrityError as exc:
            if not duplicate_row(exc, table="documents", constraints=_DOCUMENT_KEYS):
                raise
            logger.info("ingest.job.concurrent_insert job_id=%s", job_id)
            msg = "another worker inserted a document of this job first; retry"
            raise ConcurrentWriteError(msg) from exc

    def _process_job(self, job_id: uuid.UUID, *, turn: int | None) -> JobStatus:
        """Index every pending item of ``job_id`` (or a turn's worth of them); returns
        the final status, or ``running`` when the job's chunks wait for a flush that a
        timer runs (the job finishes then) or its turn has ended.

        ``turn`` is the job's turn the message was sent for: a message for a turn that
        another message has started is a duplicate and returns at once (``None``: a
        message of a release that sent none, or a caller indexing the job itself).

        Raises :class:`BackendError` (transient) with the job left ``running`` so a
        retry or a re-delivery of the same message picks up the remaining items (or the
        flush).
        """
        with transaction(self._sessions) as session:
            jobs = JobRepository(session)
            job = jobs.lock_any_tenant(job_id)
            if job is None:
                raise JobNotFoundError(f"job {job_id} not found")
            if job.status in FINISHED_JOB_STATUSES:
                logger.info("ingest.job.already_done job_id=%s status=%s", job_id, job.status)
                return job.status
            if turn is not None and turn != job.turn:
                # Another message for the same turn ran it (the sweeper re-sent a job
                # that waited long in the queue; the broker re-delivered a message of
                # a killed worker, whose job the sweeper has re-sent since).
                logger.info(
                    "ingest.job.duplicate_message job_id=%s turn=%d current=%d",
                    job_id,
                    turn,
                    job.turn,
                )
                return job.status
            if self._leased_elsewhere(job):
                # Another worker works on it (a duplicate or re-delivered message):
                # leave it; if that worker dies, its lease expires and the job is re-sent.
                logger.info(
                    "ingest.job.leased_elsewhere job_id=%s owner=%s", job_id, job.lease_owner
                )
                return job.status
            read_turn = job.turn
            if not jobs.start_turn(
                job, owner=self._leases.owner, until=self._leases.until(), now=utcnow()
            ):
                # Another worker started the turn since the row was read (the lock
                # above rules it out; the compare-and-set guards the turn besides).
                logger.info(
                    "ingest.job.duplicate_message job_id=%s turn=%d started elsewhere",
                    job_id,
                    read_turn,
                )
                return JobStatus.RUNNING
            started_turn = job.turn
            tenant_id, kind = job.tenant_id, job.kind
            if kind is JobKind.DELETE and job.total == 0:
                self._deleter.plan(session, job)  # its documents, selected once
            pending = jobs.pending_item_ids(job_id)
        self._leases.hold(job_id)
        try:
            return self._index(job_id, tenant_id, pending, kind=kind, turn=started_turn)
        except BaseException:
            # A retry of this message, or the sweeper's re-send, may take the job over at
            # once (here or on another worker).
            self._release(job_id, turn=started_turn)
            raise

    def _leased_elsewhere(self, job: IngestionJob) -> bool:
        return (
            job.status is JobStatus.RUNNING
            and job.lease_owner is not None
            and job.lease_owner != self._leases.owner
            and job.lease_expires_at is not None
            and aware(job.lease_expires_at) > utcnow()
        )

    def _release(self, job_id: uuid.UUID, *, turn: int) -> None:
        """Let the lease on ``job_id`` go and reopen ``turn``, the turn this worker
        started and could not end: the message that started it (a retry, a re-delivery)
        or the sweeper's re-send for it runs it again, whichever comes first."""
        self._leases.drop(job_id)
        with transaction(self._sessions) as session:
            JobRepository(session).reopen_turn(
                job_id, owner=self._leases.owner, turn=turn, now=utcnow()
            )

    def _index(
        self, job_id: uuid.UUID, tenant_id: str, pending: list[int], *, kind: JobKind, turn: int
    ) -> JobStatus:
        if not self._collection_ready:
            self._store.ensure_collection(self._embedder.info)
            self._collection_ready = True

        now, later = (pending[: self._turn], pending[self._turn :]) if self._turn else (pending, [])
        changed = False
        batches = [now[start : start + self._batch] for start in range(0, len(now), self._batch)]
        if kind is JobKind.DELETE:
            for batch in batches:
                changed |= self._delete_batch(job_id, tenant_id, batch)
        else:
            changed = self._index_batches(job_id, tenant_id, batches)

        turn_ended, next_turn = False, 0
        finished: JobStatus | None = None
        self._forget_ends()
        with transaction(self._sessions) as session:
            job = self._lock(session, job_id)
            if changed:
                TenantRepository(session).bump_generation(tenant_id)
            if not self._still_running(job, turn=turn):
                return job.status
            if later:
                # Unowned, like a job the sweeper re-sends: any worker may take it.
                job.lease_owner = None
                job.lease_expires_at = self._leases.until()
                job.between_turns = True  # its next turn is no new attempt
                job.sent_at = utcnow()  # when it went back to the queue (the sweeper's backoff)
                self._leases.drop(job_id)
                turn_ended, next_turn = True, job.turn
            elif job.indexed == 0:
                self._leases.drop(job_id)
                finished = self._finish(job)  # nothing of it in the store: nothing to seal
            else:
                logger.info(
                    "ingest.job.written job_id=%s indexed=%d: finished at the next flush",
                    job_id,
                    job.indexed,
                )
        if finished is not None:
            self._ended()
            return finished
        if turn_ended:  # sent once the unowned lease is committed
            return self._end_turn(job_id, turn=next_turn)
        with self._waiting_lock:
            self._waiting.add(job_id)
        # The lease is kept while the job waits for its flush, which drops it.
        if not self._flushes.request():
            return JobStatus.RUNNING
        with transaction(self._sessions) as session:
            return self._lock(session, job_id).status

    def _still_running(self, job: IngestionJob, *, turn: int) -> bool:
        """Whether this worker still runs ``job``'s turn ``turn``; if not, its lease on
        the job is dropped and the turn ends with nothing more written to the job."""
        if job.status in FINISHED_JOB_STATUSES:  # cancelled, or finished by another flush
            self._leases.drop(job.id)
            return False
        if job.turn != turn or job.lease_owner != self._leases.owner:
            # This worker stalled past its lease, and the job was re-sent and taken over:
            # the turn that runs now ends it, not this one.
            logger.warning(
                "ingest.job.taken_over job_id=%s turn=%d current=%d owner=%s",
                job.id,
                turn,
                job.turn,
                job.lease_owner,
            )
            self._leases.drop(job.id)
            return False
        return True

    def _end_turn(self, job_id: uuid.UUID, *, turn: int) -> JobStatus:
        """Send the job (committed with an unowned lease) for its next turn ``turn`` to
        the back of the queue, so that jobs queued meanwhile run before that turn. If
        the send fails, the sweeper sends it once that lease has expired."""
        requeue = self._requeue
        if requeue is None:  # no turns without a queue; kept for the type checker
            raise RuntimeError("a job's turn ended with no queue to send it back to")
        try:
            requeue.enqueue_job(job_id, turn=turn)
        except BackendError as exc:
            logger.warning("ingest.job.requeue_failed job_id=%s error=%s", job_id, exc.message)
        logger.info("ingest.job.turn_ended job_id=%s", job_id)
        return JobStatus.RUNNING

    def close(self) -> None:
        """Run a flush that is waiting for its interval now, so the jobs it would
        finish do not stay ``running`` (a worker process shutting down). If it fails
        they finish with the next flush of any worker."""
        try:
            self._flushes.drain()
        except HsearchError as exc:
            logger.warning("ingest.flush.failed at shutdown error=%s", exc)
        try:
            self._leases.close()  # what is still held is re-sent by the next sweep
        except Exception as exc:  # shutting down: report, never raise
            logger.warning("ingest.lease.release_failed at shutdown error=%s", exc)
        with self._threads_lock:
            threads, self._threads = list(self._threads.values()), {}
        for thread in threads:
            thread.shutdown(wait=True, cancel_futures=True)

    def _seal(self) -> None:
        """Flush the store, then report finished the jobs written before the flush
        began: this worker's, and at its first flush those a worker stopped before its
        timer fired left waiting (jobs with every item done that started before this
        service; a worker finishes only its own jobs otherwise, since the metadata
        database may serve collections it does not flush, as in the test suite)."""
        with self._waiting_lock:
            jobs = set(self._waiting)
        if not self._swept:
            with transaction(self._sessions) as session:
                jobs.update(
                    JobRepository(session).written_ids_all_tenants(started_before=self._started)
                )
        if not jobs:
            return
        started = time.perf_counter()
        self._store.flush()
        self._forget_ends()
        with transaction(self._sessions) as session:
            sealed: set[str] = set()
            # In id order, as other transactions that lock several jobs (a document's
            # delete) take them: two such transactions wait instead of deadlocking.
            for job_id in sorted(jobs):
                job = JobRepository(session).lock_any_tenant(job_id)
                if job is not None and job.status is JobStatus.RUNNING:
                    self._finish(job)
                    sealed.add(job.tenant_id)
            # Bumped again now that the flush has made the jobs' chunks searchable: a
            # search between the write's bump and the flush may have cached a result
            # that missed them (a store whose searches lag writes), under that bump.
            tenants = TenantRepository(session)
            for tenant_id in sorted(sealed):
                tenants.bump_generation(tenant_id)
        self._ended()
        with self._waiting_lock:
            self._waiting.difference_update(jobs)
        for job_id in jobs:
            self._leases.drop(job_id)
        self._swept = True
        logger.info(
            "ingest.flush.done jobs=%d seconds=%.2f", len(jobs), time.perf_counter() - started
        )

    def _finish(self, job: IngestionJob) -> JobStatus:
        """Mark ``job`` finished in this transaction; it is logged and counted once the
        transaction has committed (:meth:`_ended`)."""
        job.status = _final_status(job)
        job.finished_at = utcnow()
        self._pending_ends().append(_ended_figures(job))
        job.lease_owner = None
        job.lease_expires_at = None
        return job.status

    def fail_job(self, job_id: uuid.UUID, *, error: str) -> None:
        """Give up on a job (retries exhausted, or an unexpected error escaped the task):
        its remaining items are marked failed with ``error``. A finished job is left as
        it is. Its own transaction, so the task wrapper needs no database access."""
        self._forget_ends()
        with transaction(self._sessions) as session:
            job = JobRepository(session).lock_any_tenant(job_id)
            if job is None or job.status in FINISHED_JOB_STATUSES:
                return
            for item in job.items:
                if item.status is JobItemStatus.PENDING:
                    item.status = JobItemStatus.FAILED
                    item.error = error
                    job.failed += 1
            job.status = _final_status(job)
            job.error = error
            job.finished_at = utcnow()
            self._pending_ends().append(_ended_figures(job))
            job.lease_owner = None
            job.lease_expires_at = None
        self._ended()

    def _pending_ends(self) -> list[_EndedJob]:
        pending: list[_EndedJob] | None = getattr(self._ends, "jobs", None)
        if pending is None:
            pending = self._ends.jobs = []
        return pending

    def _forget_ends(self) -> None:
        """Before a transaction that may end jobs: what this thread still holds was
        ended by a transaction that rolled back (a commit is always followed by
        :meth:`_ended`), so it is not counted."""
        self._pending_ends().clear()

    def _ended(self) -> None:
        """Jobs have ended (committed): count them in the metrics, then tell whoever
        asked (the worker's sweeper, which delivers their webhooks)."""
        pending = self._pending_ends()
        while pending:
            _record_ended(pending.pop())
        if self._on_finished is not None:
            try:
                self._on_finished()
            except Exception as exc:  # a notification never fails indexing
                logger.warning("ingest.job.on_finished_failed error=%s", exc)

    def _delete_batch(self, job_id: uuid.UUID, tenant_id: str, item_ids: list[int]) -> bool:
        """Delete one batch of a delete job's documents, in one transaction (deletes need
        no flush to be seen by searches: such a job finishes at its end)."""
        with transaction(self._sessions) as session:
            job = self._lock(session, job_id)
            items = JobRepository(session).items(item_ids)
            changed = self._deleter.delete(session, job, items)
        logger.info(
            "ingest.delete.batch job_id=%s tenant=%s items=%d", job_id, tenant_id, len(item_ids)
        )
        return changed

    def _index_batches(self, job_id: uuid.UUID, tenant_id: str, batches: list[list[int]]) -> bool:
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
        while groups are being stored (:class:`_Lookahead`), not between two groups'
        store writes.
        """
        fingerprint = self._embedder.info.fingerprint
        reader = self._thread("read")

        def decide(
            item_ids: list[int], read: _BatchRead, held: tuple[Session, IngestionJob] | None
        ) -> _Decision:
            if held is None:
                return self._decide(job_id, tenant_id, item_ids, read)
            session, job = held
            return self._decide_in(session, job, tenant_id, item_ids, read, in_write=True)

        ahead = _Lookahead(
            batches,
            read=lambda item_ids: reader.submit(
                self._chunk_unlocked, tenant_id, item_ids, fingerprint
            ),
            decide=decide,
            max_chunks=self._batch_chunks,
            depth=self._groups_per_commit,
        )
        encoder = self._thread("encode")
        queued: deque[tuple[list[_PreparedItem], Future[_Embedded]]] = deque()

        def fill(*, alone: bool = True) -> None:
            """Queue for encoding the groups decided, up to a unit and one more; decide
            a batch on its own (``alone``) only when nothing at all is queued (batches
            are decided in the writes otherwise)."""
            while len(queued) <= self._groups_per_commit:
                group = ahead.next_group(decide=alone and not queued)
                if group is None:
                    return
                queued.append((group, encoder.submit(self._embed_items, group, job_id=job_id)))

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
        unit: list[tuple[list[_PreparedItem], _Embedded]],
        *,
        ahead: _Lookahead,
    ) -> bool:
        """1. encoded (``unit``: groups and their embeddings), with no transaction open
           (the slow part); the documents the encoder failed on are marked failed (a
           transaction of their own, only when there are any);
        2. in one transaction, under the documents' row locks, group after group:
           upsert every chunk of the group, delete the stale ones by primary key, update
           statistics and the documents, mark the items (:meth:`_write`). The chunk ids
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
        self, job_id: uuid.UUID, group: list[_PreparedItem], errors: dict[int, HsearchError]
    ) -> None:
        """The documents of ``group`` the encoder failed on (``errors``) marked failed."""
        with transaction(self._sessions) as session:
            job = self._lock(session, job_id)
            jobs = JobRepository(session)
            states = jobs.item_states(sorted(errors))
            rows = {p.item_id: p.item for p in group}
            jobs.update_items(
                [
                    self._fail(job, rows[item_id], error)
                    for item_id, error in errors.items()
                    if _pending(states[item_id])  # else cancelled while it was encoded
                ]
            )

    def _write(
        self,
        job_id: uuid.UUID,
        tenant_id: str,
        groups: list[_GroupInput],
        *,
        ahead: _Lookahead,
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
                job = self._lock(session, job_id)
                jobs = JobRepository(session)
                item = ready[0].item
                if _pending(jobs.item_states([item.id])[item.id]):
                    jobs.update_items([self._fail(job, item, refused.error)])
            return False

    def _write_unit(
        self,
        session: Session,
        job_id: uuid.UUID,
        tenant_id: str,
        groups: list[_GroupInput],
        *,
        ahead: _Lookahead,
    ) -> tuple[int, int]:
        """The groups' writes in ``session``, one after the other: a group's rows are
        read, weighed and made into records while the store writes the group before
        (the store's thread takes their calls in order). The documents of every group
        are locked first, in id order, as a group's are: two workers writing
        overlapping units wait for each other instead of deadlocking. Returns the
        documents and chunks written, once the store has answered every call."""
        job = self._lock(session, job_id)
        unit = _UnitWrite()
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
            # The statistics change once for the unit's groups (a row per term), the
            # items once, and the job's row once (each change of an object loaded costs
            # a flush of it).
            self._statistics.record_all(
                session, tenant_id=tenant_id, documents=unit.pending.documents
            )
            VocabularyRepository(session).add(tenant_id, unit.words)
            JobRepository(session).update_items(
                [{"id": item_id, "status": JobItemStatus.INDEXED} for item_id in unit.indexed]
            )
            job.indexed += len(written)
        finally:
            # Never committed, nor rolled back, before the store has answered.
            errors = [f.exception() for f in unit.stored]  # every one waited for
            error = next((e for e in errors if e is not None), None)
        if isinstance(error, HsearchError) and not isinstance(error, BackendError):
            raise _StoreRefusedError(error) from error
        if error is not None:
            raise error  # transient (BackendError) or unexpected: this transaction rolls back
        _log_indexed(job_id, written)
        return len(written), sum(count for _, count, _ in written)

    @staticmethod
    def _lock(session: Session, job_id: uuid.UUID) -> IngestionJob:
        job = JobRepository(session).lock_any_tenant(job_id)
        if job is None:
            raise JobNotFoundError(f"job {job_id} not found")
        return job

    def _decide(
        self, job_id: uuid.UUID, tenant_id: str, item_ids: list[int], read: _BatchRead
    ) -> _Decision:
        """:meth:`_decide_in` a transaction of its own."""
        with transaction(self._sessions) as session:
            job = self._lock(session, job_id)
            return self._decide_in(session, job, tenant_id, item_ids, read, in_write=False)

    def _decide_in(
        self,
        session: Session,
        job: IngestionJob,
        tenant_id: str,
        item_ids: list[int],
        read: _BatchRead,
        *,
        in_write: bool,
    ) -> _Decision:
        """Skip what needs no work (unchanged or superseded documents), chunk the rest
        (``read``: the batch's items read, and chunked, before the job is locked), in
        ``session``, whose transaction holds ``job`` locked; the items' state and the
        documents read in one query each, and the documents it would skip read again,
        locked (skipping changes their rows). Returns what is to be encoded and written,
        valid once the transaction commits.

        ``in_write``: the transaction is a group's write, which holds its documents'
        rows: the items of unchanged documents are left undecided (``deferred``), since
        skipping one changes its document's row (its version), and taking that row
        while holding others could deadlock with a worker writing that document."""
        fingerprint = self._embedder.info.fingerprint
        chunked = read.chunks
        todo: list[_PreparedItem] = []
        deferred: list[int] = []
        jobs = JobRepository(session)
        states = jobs.item_states(item_ids)
        items = [
            _current(row, states[row.id])
            for row in read.items
            if row.id in states and _pending(states[row.id])
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
                ids[i.id] for i in items if _unchanged(documents.get(ids[i.id]), i, fingerprint)
            }
            if skipping:
                locked = DocumentRepository(session).get_many(skipping, for_update=True)
                for doc_id in skipping:
                    if doc_id in locked:
                        documents[doc_id] = locked[doc_id]
                    else:  # deleted meanwhile: indexed anew
                        del documents[doc_id]
        changes: list[dict[str, Any]] = []
        for item in items:
            doc_id = ids[item.id]
            existing = documents.get(doc_id)
            if _newer_indexed(existing, item):
                changes.append(self._superseded(job, item, doc_id))
                continue
            if _unchanged(existing, item, fingerprint):
                if in_write:
                    deferred.append(item.id)
                    continue
                changes.append(
                    {"id": item.id, "status": JobItemStatus.SKIPPED, "document_id": doc_id}
                )
                job.skipped += 1
                # The indexed version is this submission's now: an older one
                # pending elsewhere must not replace it.
                existing.version = max(existing.version, item.id)
                logger.info(
                    "ingest.document.skipped job_id=%s external_id=%s", job.id, item.external_id
                )
                continue
            try:
                chunks = chunked[item.id] if item.id in chunked else self._chunk(item)
                if isinstance(chunks, Exception):
                    raise chunks
            except (ValueError, InvalidRequestError) as exc:
                changes.append(self._fail(job, item, exc))
                continue
            cids = (
                read.chunk_ids[item.id] if item.id in read.chunk_ids else _chunk_ids(doc_id, chunks)
            )
            # Committed with the decision, before Milvus sees them: a crash can never
            # leave chunks nobody knows of (the next attempt deletes what it does
            # not rewrite). What a dead attempt of this item wrote, if it chunked
            # otherwise (other settings before a restart), is kept: the write
            # deletes it.
            earlier = set(item.chunk_ids or ()).difference(cids)
            changes.append(
                {"id": item.id, "document_id": doc_id, "chunk_ids": [*cids, *sorted(earlier)]}
            )
            todo.append(
                _PreparedItem(
                    item=item,
                    document_id=doc_id,
                    chunks=tuple(c.text for c in chunks),
                    offsets=tuple((c.start, c.end) for c in chunks),
                    chunk_ids=cids,
                )
            )
        jobs.update_items(changes)
        return _Decision(todo=todo, deferred=deferred)

    def _chunk(self, item: ItemRow) -> list[Chunk]:
        chunks = self._chunker.chunk(item.content, title=item.title, lang=item.lang)
        if not chunks:
            raise InvalidRequestError("text: the document has no text to index")
        return chunks

    def _chunk_unlocked(self, tenant_id: str, item_ids: list[int], fingerprint: str) -> _BatchRead:
        """The batch's items, and the chunks (or the error) of each that, as its
        document stands now, will be written: read and cut before the decision locks
        the job (on SQLite, the database's write lock), since chunking a batch of long
        documents takes a while and every other writer would wait for it. The decision
        checks again under the lock; an item's text never changes, so its chunks stay
        right."""
        with self._sessions() as session:
            items = JobRepository(session).item_rows(item_ids)
            pending = [i for i in items if _pending(i)]
            ids = {i.id: document_id(tenant_id, i.external_id) for i in pending}
            documents = DocumentRepository(session).get_many(set(ids.values()))
            wanted = []
            for item in pending:
                existing = documents.get(ids[item.id])
                if not (_newer_indexed(existing, item) or _unchanged(existing, item, fingerprint)):
                    wanted.append(item)
        out: _Chunked = {}
        cids: dict[int, tuple[str, ...]] = {}
        for item in wanted:
            try:
                chunks = out[item.id] = self._chunk(item)
            except (ValueError, InvalidRequestError) as exc:
                out[item.id] = exc
            else:
                cids[item.id] = _chunk_ids(ids[item.id], chunks)
        return _BatchRead(items=items, chunks=out, document_ids=ids, chunk_ids=cids)

    def _embed_items(
        self, todo: list[_PreparedItem], *, job_id: uuid.UUID | None = None
    ) -> _Embedded:
        """Embed all chunks of the batch at once; on failure, item by item so one bad
        document fails alone. Returns embeddings and errors by item id."""
        texts = [embedding_text(p.item.title, c) for p in todo for c in p.chunks]
        langs = [p.item.lang for p in todo for _ in p.chunks]
        out: dict[int, list[Embedding]] = {}
        errors: dict[int, HsearchError] = {}
        try:
            flat = self._encode(todo, texts, langs, job_id=job_id) if texts else []
        except HsearchError:
            for prepared in todo:
                try:
                    out[prepared.item_id] = self._embedder.embed_documents(
                        [embedding_text(prepared.item.title, c) for c in prepared.chunks],
                        langs=[prepared.item.lang] * len(prepared.chunks),
                    )
                except HsearchError as exc:
                    errors[prepared.item_id] = exc
            return out, errors
        pos = 0
        for prepared in todo:
            out[prepared.item_id] = flat[pos : pos + len(prepared.chunks)]
            pos += len(prepared.chunks)
        return out, errors

    def _encode(
        self,
        todo: list[_PreparedItem],
        texts: list[str],
        langs: list[str],
        *,
        job_id: uuid.UUID | None,
    ) -> list[Embedding]:
        """``texts`` encoded. A document of more chunks than a group (a group of its
        own) is encoded ``batch_chunks`` at a time, and how far it has got is recorded
        on the job after each (:meth:`_record_encoding`): an 840,000-character document
        held a worker for minutes while its job showed nothing moving. Encoded in one
        call or in parts, each chunk's embedding is the same."""
        step = self._batch_chunks
        if job_id is None or len(todo) != 1 or len(texts) <= step:
            return self._embedder.embed_documents(texts, langs=langs)
        document = todo[0].item.external_id
        total = len(texts)
        encoded: list[Embedding] = []
        self._record_encoding(job_id, document=document, done=0, total=total)
        for start in range(0, total, step):
            encoded.extend(
                self._embedder.embed_documents(
                    texts[start : start + step], langs=langs[start : start + step]
                )
            )
            self._record_encoding(job_id, document=document, done=len(encoded), total=total)
        return encoded

    def _record_encoding(self, job_id: uuid.UUID, *, document: str, done: int, total: int) -> None:
        """Record on the job how far its document's encoding has got (its own short
        transaction, from the encoder's thread). Progress is a report: a database that
        does not take it is logged, and the encoding goes on."""
        try:
            with transaction(self._sessions) as session:
                JobRepository(session).record_encoding(
                    job_id, document=document, done=done, total=total, at=utcnow()
                )
        except Exception as exc:  # a report that failed never fails the job
            logger.warning(
                "ingest.encoding.progress_failed job_id=%s error=%s", job_id, type(exc).__name__
            )
            return
        logger.info(
            "ingest.encoding.progress job_id=%s document=%s done=%d total=%d",
            job_id,
            document,
            done,
            total,
        )

    def _write_group(
        self,
        session: Session,
        job: IngestionJob,
        tenant_id: str,
        ready: list[_PreparedItem],
        embeddings: dict[int, list[Embedding]],
        *,
        ahead: _Lookahead,
        unit: _UnitWrite,
    ) -> list[tuple[ItemRow, int, int]]:
        """The group's statements in ``session``, which holds ``job`` locked, one per
        kind rather than one per document: the items, the documents (locked, in id
        order: two workers writing overlapping groups wait for each other instead of
        deadlocking) and the chunk ids of unfinished attempts read in one query each;
        the new documents inserted together. Each document is weighed as the tenant's
        corpus stands once the documents before it are counted in, as if they were
        written one by one, and added to the unit's (whose statistics the caller
        records at once). The store's answers are added to the unit's as its calls are
        made (the caller waits for them before the transaction ends). Once the rows
        are written, while the store writes, ``ahead`` decides the next batch in this
        transaction and reads the one after. Returns the documents written (item,
        chunks, stale chunks deleted), which the caller counts on the job."""
        docs = DocumentRepository(session)
        jobs = JobRepository(session)
        states = jobs.item_states([p.item_id for p in ready])
        # Cancelled meanwhile: nothing of it is written.
        todo = sorted(
            (p for p in ready if _pending(states[p.item_id])), key=lambda p: p.document_id.int
        )
        wanted = {p.document_id for p in todo}
        if unit.locked is None:
            existing = docs.get_many(wanted, for_update=True)
        else:  # locked, and read, as the unit began
            existing = {d: unit.locked[d] for d in wanted if d in unit.locked}
        live = self._skip_superseded(jobs, job, todo, existing)
        if not live:
            return []
        # What typo tolerance matches query words to (hsearch.lexical.typos).
        unit.words |= vocabulary_words(text for p in live for text in (p.item.title, *p.chunks))
        weighed: list[WeightedDocument] = []
        if self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY:
            # Term counts become BM25 with the tenant's statistics, recorded by the
            # caller; the weights themselves are made with the records.
            weighed = self._statistics.weigh_documents(
                session,
                tenant_id=tenant_id,
                documents=[
                    ([e.sparse for e in embeddings[p.item_id]], existing.get(p.document_id))
                    for p in live
                ],
                pending=unit.pending,
                weights=False,
            )
        now = utcnow()
        created = {p.document_id: now for p in live}
        created.update((d.id, d.created_at) for d in existing.values())
        # The store's thread makes the records and sends them while this transaction
        # reads what else the write needs and writes the rows (the chunk ids were
        # committed on the items before): the records' Python runs while this thread
        # waits for the database. It sends without waiting for the answer, so the next
        # group's records are made while the store writes these; the answers are
        # waited for in order on a thread of their own, and the stale chunks deleted
        # there once the upsert has succeeded. No two writes in flight hold the same
        # chunk: a unit's groups hold distinct documents, and the unit ends once every
        # write is answered.
        sent = self._thread("store-write").submit(
            self._send,
            tenant_id,
            [(p, created[p.document_id], embeddings[p.item_id]) for p in live],
            [w.avg_length for w in weighed] if weighed else None,
        )
        answers = self._thread("store-answer")
        upserted = answers.submit(_answer, sent)
        unit.stored.append(upserted)
        unfinished = jobs.unfinished_chunk_ids_of({p.document_id: p.item_id for p in live})
        encoder = self._embedder.info.fingerprint
        stale: set[str] = set()
        added: list[dict[str, Any]] = []
        written: list[tuple[ItemRow, int, int]] = []
        for position, prepared in enumerate(live):
            old, new = self._document_row(
                tenant_id,
                prepared,
                existing.get(prepared.document_id),
                created=created[prepared.document_id],
                encoder=encoder,
                contribution=weighed[position].contribution if weighed else LexicalContribution(),
                # What interrupted attempts wrote, this item's own included.
                unfinished=unfinished[prepared.document_id].union(
                    states[prepared.item_id].chunk_ids or ()
                ),
            )
            stale.update(old)
            if new is not None:
                added.append(new)
            written.append((prepared.item, len(prepared.chunks), len(old)))
        if stale:
            unit.stored.append(
                answers.submit(self._delete_stale, upserted, tenant_id, sorted(stale))
            )
        unit.indexed.extend(p.item_id for p in live)
        docs.insert_all(added)
        session.flush()
        ahead.during_write(session, job)
        return written

    def _skip_superseded(
        self,
        jobs: JobRepository,
        job: IngestionJob,
        todo: list[_PreparedItem],
        existing: dict[uuid.UUID, Document],
    ) -> list[_PreparedItem]:
        """``todo`` but the items whose document holds a newer submission, which are
        skipped (:meth:`_superseded`)."""
        live: list[_PreparedItem] = []
        superseded: list[dict[str, Any]] = []
        for prepared in todo:
            if _newer_indexed(existing.get(prepared.document_id), prepared.item):
                superseded.append(self._superseded(job, prepared.item, prepared.document_id))
            else:
                live.append(prepared)
        jobs.update_items(superseded)
        return live

    def _document_row(
        self,
        tenant_id: str,
        prepared: _PreparedItem,
        current: Document | None,
        *,
        created: datetime,
        encoder: str,
        contribution: LexicalContribution,
        unfinished: set[str],
    ) -> tuple[set[str], dict[str, Any] | None]:
        """One document's row in a group write, indexed with ``encoder`` (its
        fingerprint): the chunk ids that become stale (what the indexed version has,
        plus what interrupted attempts wrote, ``unfinished``), and its new row's columns
        (``None``: ``current`` is updated in place)."""
        item = prepared.item
        stale = set(current.chunk_ids if current else ())
        stale.update(unfinished)
        stale.difference_update(prepared.chunk_ids)
        values = {
            "title": item.title,
            "source": item.source,
            "lang": item.lang,
            "tags": list(item.tags),
            "metadata_": dict(item.metadata),
            "content": item.content,
            "content_hash": item.content_hash,
            "chunk_count": len(prepared.chunks),
            "chunk_ids": list(prepared.chunk_ids),
            "lexical_terms": contribution.stored_terms(),
            "lexical_length": contribution.length,
            "encoder": encoder,
            "version": item.id,
        }
        if current is not None:
            for key, value in values.items():
                setattr(current, key, value)
            return stale, None
        values.update(
            id=prepared.document_id,
            tenant_id=tenant_id,
            external_id=item.external_id,
            created_at=created,
        )
        return stale, values

    def _send(
        self,
        tenant_id: str,
        documents: list[tuple[_PreparedItem, datetime, list[Embedding]]],
        avg_lengths: list[float] | None,
    ) -> Callable[[], None]:
        """Send the records of ``documents`` (each with its creation time and its
        chunks' vectors) to the store; with ``avg_lengths`` (term counts weighed for
        BM25 in the transaction, :meth:`LexicalStatistics.weigh_documents`), their
        sparse vectors weighed with each document's average chunk length first. Returns
        the wait for the store's answer (:meth:`VectorStore.send_upsert`)."""
        records: list[ChunkRecord] = []
        for position, (prepared, created, encoded) in enumerate(documents):
            vectors = encoded
            if avg_lengths is not None:
                weights = weigh_chunks(
                    [e.sparse for e in encoded], avg_length=avg_lengths[position]
                )
                vectors = [
                    Embedding(dense=e.dense, sparse=w)
                    for e, w in zip(encoded, weights, strict=True)
                ]
            records.extend(_records(tenant_id, prepared, created=created, vectors=vectors))
        return self._store.send_upsert(records)

    def _delete_stale(self, upserted: Future[None], tenant_id: str, stale: list[str]) -> None:
        """Delete ``stale`` chunks once ``upserted`` (the group's upsert, run before on
        the same thread) has succeeded: a failed write leaves the indexed version whole."""
        if upserted.exception() is None:
            self._store.delete_chunks(stale, tenant_id=tenant_id)

    def _thread(self, name: str) -> ThreadPoolExecutor:
        """The service's thread ``name``: ``encode`` (the encoder, a group ahead of the
        writes), ``store-write`` (a group's records made and sent to the store, beside
        its rows'), ``store-answer`` (the store's answers waited for in order, and stale
        chunks deleted) or ``read`` (batches read and chunked ahead of their decisions,
        :class:`_Lookahead`)."""
        with self._threads_lock:
            if name not in self._threads:
                self._threads[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
            return self._threads[name]

    @staticmethod
    def _superseded(job: IngestionJob, item: ItemRow, doc_id: uuid.UUID) -> dict[str, Any]:
        """A newer submission of the document is indexed already: this older one is
        skipped (a stale job re-delivered, or jobs run out of order). Returns the item's
        change (:meth:`JobRepository.update_items`)."""
        job.skipped += 1
        logger.info("ingest.document.superseded job_id=%s external_id=%s", job.id, item.external_id)
        return {
            "id": item.id,
            "status": JobItemStatus.SKIPPED,
            "document_id": doc_id,
            "error": "superseded: a newer submission of this document is indexed",
        }

    @staticmethod
    def _fail(job: IngestionJob, item: ItemRow, exc: Exception) -> dict[str, Any]:
        """``item`` failed with ``exc``; returns its change."""
        error = f"{type(exc).__name__}: {exc}"
        job.failed += 1
        logger.warning(
            "ingest.document.failed job_id=%s external_id=%s error=%s",
            job.id,
            item.external_id,
            error,
        )
        return {"id": item.id, "status": JobItemStatus.FAILED, "error": error}


@dataclass(frozen=True, slots=True)
class _Decision:
    """A batch decided: what is to be encoded and written, and the items left for a
    decision of their own (:meth:`IndexingService._decide_in`, ``in_write``)."""

    todo: list[_PreparedItem]
    deferred: list[int]


_Decide = Callable[[list[int], _BatchRead, "tuple[Session, IngestionJob] | None"], _Decision]
"""Decides the items of a batch as ``read`` had them: in a transaction of its own
(``None``) or in a session whose write transaction holds the job locked."""


class _Lookahead:
    """Which batch of a job is read and decided when, and the groups decided and not yet
    queued for encoding (:meth:`IndexingService._index_batches`).

    The store is the bound of the write path, so batches are decided while a group's
    chunks are being stored, in that group's transaction (:meth:`during_write`: on
    SQLite the decision needs the write lock that transaction holds), as long as fewer
    than ``depth`` groups wait decided, and only once a batch's items were read and
    chunked: that happens in a thread of its own, with no lock held, up to ``depth`` + 1
    batches ahead. A decision made in a write counts only
    once its transaction commits (:meth:`settle`); rolled back, its batch is decided
    again. It leaves unchanged documents to a decision of their own, made between two
    writes, since skipping one changes the document's row, and a write holds other rows
    already (two workers would lock the same rows in opposite orders). A batch is decided
    on its own also when no write is under way to hold it (a job's first batch, after
    groups that wrote nothing, or when its read was not done in time).
    """

    def __init__(
        self,
        batches: list[list[int]],
        *,
        read: Callable[[list[int]], Future[_BatchRead]],
        decide: _Decide,
        max_chunks: int,
        depth: int = 1,
    ) -> None:
        self._batches = batches
        self._read = read
        self._decide = decide
        self._max_chunks = max_chunks
        self._depth = depth
        self._next = 0  # the next batch to decide
        self._reads: dict[int, Future[_BatchRead]] = {}
        self._ready: deque[list[_PreparedItem]] = deque()
        self._deferred: list[int] = []
        self._tentative: list[tuple[int, _Decision]] = []

    def next_group(self, *, decide: bool = True) -> list[_PreparedItem] | None:
        """The next group to encode, deciding items on their own (those a write left,
        then the next batches) until one has a group, unless ``decide`` is false;
        ``None`` once every batch is decided and its groups taken (or, not deciding,
        when no decided group waits)."""
        while decide and not self._ready:
            if self._deferred:
                ids, self._deferred = self._deferred, []
                decision = self._decide(ids, self._read(ids).result(), None)
            elif self._next < len(self._batches):
                index = self._next
                self._next += 1
                read = self._reads.pop(index, None) or self._read(self._batches[index])
                decision = self._decide(self._batches[index], read.result(), None)
                # After the decision, not beside it: the batch's write waits for it.
                self._read_ahead()
            else:
                break
            self._adopt(decision)
        return self._ready.popleft() if self._ready else None

    def during_write(self, session: Session, job: IngestionJob) -> None:
        """While a group's chunks are stored (its rows written in ``session``, which
        holds ``job`` locked): while fewer than ``depth`` decided groups wait, decide
        the next batch in that transaction, provided it has been read; then read
        ahead."""
        waiting = len(self._ready) + sum(
            len(_groups(d.todo, max_chunks=self._max_chunks)) for _, d in self._tentative
        )
        while waiting < self._depth and self._next < len(self._batches):
            read = self._reads.get(self._next)
            if read is None or not read.done():
                break
            index = self._next
            self._next += 1
            del self._reads[index]
            decision = self._decide(self._batches[index], read.result(), (session, job))
            self._tentative.append((index, decision))
            waiting += len(_groups(decision.todo, max_chunks=self._max_chunks))
        self._read_ahead()

    def settle(self, *, committed: bool) -> None:
        """The write's transaction committed, or rolled back: the batches decided in it
        are decided (their groups wait to be encoded), or are to be decided again."""
        if not self._tentative:
            return
        tentative, self._tentative = self._tentative, []
        if committed:
            for _, decision in tentative:
                self._adopt(decision)
        else:
            self._next = tentative[0][0]

    def _adopt(self, decision: _Decision) -> None:
        self._ready.extend(_groups(decision.todo, max_chunks=self._max_chunks))
        self._deferred.extend(decision.deferred)

    def _read_ahead(self) -> None:
        """Start reading the batches not decided yet, up to ``depth`` + 1 of them, if not
        started."""
        for index in range(self._next, min(self._next + self._depth + 1, len(self._batches))):
            if index not in self._reads:
                self._reads[index] = self._read(self._batches[index])


class _StoreRefusedError(Exception):
    """The store refused a group's records with an error that is not transient."""

    def __init__(self, error: HsearchError) -> None:
        super().__init__(str(error))
        self.error = error


def _groups(todo: list[_PreparedItem], *, max_chunks: int) -> list[list[_PreparedItem]]:
    """``todo`` in order, cut into groups of at most ``max_chunks`` chunks; a document
    with more chunks than that is a group of its own."""
    groups: list[list[_PreparedItem]] = []
    size = 0
    for prepared in todo:
        if groups and size + len(prepared.chunks) <= max_chunks:
            groups[-1].append(prepared)
            size += len(prepared.chunks)
        else:
            groups.append([prepared])
            size = len(prepared.chunks)
    return groups


def _records(
    tenant_id: str, prepared: _PreparedItem, *, created: datetime, vectors: list[Embedding]
) -> list[ChunkRecord]:
    """The store records of ``prepared``'s chunks, encoded as ``vectors``."""
    item = prepared.item
    return chunk_records(
        tenant_id=tenant_id,
        document_id=prepared.document_id,
        external_id=item.external_id,
        title=item.title,
        source=item.source,
        lang=item.lang,
        tags=item.tags,
        metadata=item.metadata,
        created_at=created,
        chunk_ids=prepared.chunk_ids,
        chunks=prepared.chunks,
        offsets=prepared.offsets,
        vectors=vectors,
    )


def _answer(sent: Future[Callable[[], None]]) -> None:
    """Wait for the store's answer to the write ``sent`` (raising what it raised)."""
    sent.result()()


def _chunk_ids(doc_id: uuid.UUID, chunks: list[Chunk]) -> tuple[str, ...]:
    return tuple(chunk_id(doc_id, i, c.text) for i, c in enumerate(chunks))


def _log_indexed(job_id: uuid.UUID, written: list[tuple[ItemRow, int, int]]) -> None:
    for item, count, deleted in written:
        logger.info(
            "ingest.document.indexed job_id=%s external_id=%s chunks=%d stale_deleted=%d",
            job_id,
            item.external_id,
            count,
            deleted,
        )


def _newer_indexed(existing: Document | None, item: ItemRow) -> bool:
    """Whether ``existing`` holds a submission of the document newer than ``item``."""
    return existing is not None and existing.version > item.id


def _unchanged(existing: Document | None, item: ItemRow, fingerprint: str) -> TypeGuard[Document]:
    """Whether ``existing`` already holds ``item``'s content, encoded by this encoder."""
    return (
        existing is not None
        and existing.content_hash == item.content_hash
        and existing.encoder == fingerprint
    )


def _current(row: ItemRow, state: ItemState) -> ItemRow:
    """``row`` (read earlier) with its state as ``state`` (read now) has it."""
    if row.status is state.status and row.chunk_ids == state.chunk_ids:
        return row
    return replace(row, status=state.status, chunk_ids=state.chunk_ids)


def _pending(item: ItemRow | ItemState) -> bool:
    """Whether ``item`` still waits to be indexed (not done, failed or cancelled)."""
    return item.status is JobItemStatus.PENDING


def _final_status(job: IngestionJob) -> JobStatus:
    if job.failed == 0:
        return JobStatus.SUCCEEDED
    if job.failed == job.total:
        return JobStatus.FAILED
    return JobStatus.PARTIAL


@dataclass(frozen=True, slots=True)
class _EndedJob:
    job_id: uuid.UUID
    status: JobStatus
    indexed: int
    skipped: int
    failed: int
    deleted: int
    searchable_after_s: float | None


def _ended_figures(job: IngestionJob) -> _EndedJob:
    searchable = None
    if job.status in SEARCHABLE_JOB_STATUSES and job.finished_at is not None:
        searchable = (aware(job.finished_at) - aware(job.created_at)).total_seconds()
    return _EndedJob(
        job_id=job.id,
        status=job.status,
        indexed=job.indexed,
        skipped=job.skipped,
        failed=job.failed,
        deleted=job.deleted,
        searchable_after_s=searchable,
    )


def _record_ended(job: _EndedJob) -> None:
    """A job's end, committed, in the log and the metrics: its documents that were not
    indexed (those that were are counted as they are written) and its time to
    searchable. Logged here rather than as the job is marked: a transaction that rolls
    back (a worker killed, a flush that failed) ends it again later, and the log told
    of two ends."""
    logger.info(
        "ingest.job.finished job_id=%s status=%s indexed=%d skipped=%d failed=%d",
        job.job_id,
        job.status,
        job.indexed,
        job.skipped,
        job.failed,
    )
    instruments.record_ingest(outcome="skipped", documents=job.skipped)
    instruments.record_ingest(outcome="failed", documents=job.failed)
    instruments.record_ingest(outcome="deleted", documents=job.deleted)
    if job.searchable_after_s is not None:
        instruments.record_time_to_searchable(job.searchable_after_s)
