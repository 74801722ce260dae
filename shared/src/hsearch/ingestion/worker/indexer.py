"""The worker side of ingestion: running a job's turns (the job runner).

The API side (accepting a batch, reading a job) is :mod:`hsearch.ingestion.api.jobs`; the
two meet only through the job rows and the job id the queue carries. This module takes a
job's lease and turn, hands the turn's batches to the write pipeline
(:mod:`hsearch.ingestion.worker.pipeline`: read, decided by
:mod:`hsearch.ingestion.worker.decisions`, encoded and written) or deletes them, and ends
the turn: back to the queue, finished, or waiting for a flush.

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
from collections.abc import Callable
from dataclasses import dataclass

from hsearch.db.base import utcnow
from hsearch.db.engine import (
    CONSTRAINT_VIOLATED,
    DATABASE_UNAVAILABLE,
    SessionFactory,
    duplicate_row,
    transaction,
    unavailable,
)
from hsearch.db.models import IngestionJob, JobItemStatus, JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.protocol import Embedder
from hsearch.errors import BackendError, ConcurrentWriteError, HsearchError, JobNotFoundError
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.deletion import DocumentDeleter
from hsearch.ingestion.derived.registry import DerivedKinds, standard_kinds
from hsearch.ingestion.queue import JobQueue
from hsearch.ingestion.worker.decisions import final_status
from hsearch.ingestion.worker.flushing import FlushSchedule, TimerFactory, start_thread_timer
from hsearch.ingestion.worker.leases import LeaseKeeper, aware, worker_identity
from hsearch.ingestion.worker.pipeline import WritePipeline, locked_job
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.metrics import instruments
from hsearch.types import FINISHED_JOB_STATUSES, SEARCHABLE_JOB_STATUSES, JobKind
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["IndexingService"]

logger = logging.getLogger(__name__)

_DOCUMENT_KEYS = ("pk_documents", "uq_documents_tenant_id")
"""The documents table's unique constraints: a document id, a tenant's external id."""

PipelineFactory = Callable[..., WritePipeline]
"""Makes the write pipeline from :class:`WritePipeline`'s keyword arguments."""


class IndexingService:
    """Worker side: turns a job's pending items into indexed chunks."""

    def __init__(
        self,
        *,
        session_factory: SessionFactory,
        embedder: Embedder,
        store: VectorStore,
        statistics: LexicalStatistics | None = None,
        derived: DerivedKinds | None = None,
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
        pipeline: PipelineFactory = WritePipeline,
    ) -> None:
        """``derived``: what is derived from a document and written with it (default:
        :func:`~hsearch.ingestion.derived.registry.standard_kinds` on ``store`` and
        ``statistics``, themselves by default the tenants' statistics in the metadata
        database); ``chunker`` cuts documents (default: the encoder's tokenizer,
        default sizes);
        a job's pending items are taken ``batch_documents`` at a time; up to
        ``groups_per_commit`` groups of ``batch_chunks`` that are encoded already are
        written in one transaction (:class:`WritePipeline`, made by ``pipeline``);
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
        if derived is None:
            derived = standard_kinds(
                store=store,
                statistics=statistics or LexicalStatistics(session_factory),
                encoder=embedder.info,
            )
        self._pipeline = pipeline(
            session_factory=session_factory,
            embedder=embedder,
            derived=derived,
            chunker=chunker or Chunker(embedder.tokenizer),
            batch_chunks=batch_chunks,
            groups_per_commit=groups_per_commit,
        )
        self._batch = batch_documents
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
        self._deleter = DocumentDeleter(derived=derived)
        self._on_finished = on_finished
        # Jobs ended in a transaction, counted in the metrics once it has committed
        # (:meth:`_ended`), per thread: the flush timer's thread ends jobs too.
        self._ends = threading.local()

    @property
    def pipeline(self) -> WritePipeline:
        """The write pipeline this service's jobs are indexed through."""
        return self._pipeline

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
        except CONSTRAINT_VIOLATED as exc:
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
            changed = self._pipeline.index_batches(job_id, tenant_id, batches)

        turn_ended, next_turn = False, 0
        finished: JobStatus | None = None
        self._forget_ends()
        with transaction(self._sessions) as session:
            job = locked_job(session, job_id)
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
            return locked_job(session, job_id).status

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
        self._pipeline.close()

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
        job.status = final_status(job)
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
            job.status = final_status(job)
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
            job = locked_job(session, job_id)
            items = JobRepository(session).items(item_ids)
            changed = self._deleter.delete(session, job, items)
        logger.info(
            "ingest.delete.batch job_id=%s tenant=%s items=%d", job_id, tenant_id, len(item_ids)
        )
        return changed


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
