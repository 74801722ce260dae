"""The indexing service end to end on embedded parts: SQLite metadata (migrated),
the fake encoder and the in-memory store. Fast, and exact about counters, chunks
and BM25 statistics under re-runs, changes, failures and crashes."""

from __future__ import annotations

import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.models import (
    Document,
    IngestionJob,
    JobItem,
    JobStatus,
    LexicalCorpusStats,
    LexicalTermStats,
)
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import (
    EncoderError,
    InvalidRequestError,
    MetadataUnavailableError,
    VectorStoreError,
)
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.pipeline import WritePipeline
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.timing import Clock, Timers

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
    *,
    timers: Timers | None = None,
    chunker: Chunker | None = None,
    kind: Callable[..., IndexingService] = IndexingService,
    **options: Any,
) -> IndexingService:
    """An indexer flushing after every job, or, given ``timers``, at most once per
    10 s of a clock that stands still (the timers fire when a test says so), chunking
    with ``chunker`` (default: chunks of 36 tokens); ``kind`` makes it (a subclass, or
    one with its own first arguments bound); ``options`` go to it as they are
    (``owner``, ``batch_documents``, ``statistics``, ...)."""
    arguments: dict[str, Any] = {
        "session_factory": sessions,
        "embedder": embedder or FakeEmbedder(),
        "store": store,
        "statistics": LexicalStatistics(sessions),
        "chunker": chunker
        or Chunker((embedder or FakeEmbedder()).tokenizer, max_tokens=36, overlap_tokens=0),
        "flush_min_interval_s": 0 if timers is None else 10,
        "clock": Clock(),
        "start_timer": timers or Timers(),
    }
    return kind(**(arguments | options))


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


class MarkingChunker(Chunker):
    """Sets ``seen`` when it chunks a text holding ``marker``."""

    def __init__(self, embedder: FakeEmbedder, seen: threading.Event, marker: str) -> None:
        super().__init__(embedder.tokenizer, max_tokens=36, overlap_tokens=0)
        self.seen, self.marker = seen, marker

    def chunk(self, text: str, *, title: str = "", lang: str = "") -> list[Any]:
        if self.marker in text:
            self.seen.set()
        return super().chunk(text, title=title, lang=lang)


class GatedEmbedder(FakeEmbedder):
    """Holds its first call until ``gate`` is set (5 s at most); ``waited`` says whether
    it was set in time."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.waited: list[bool] = []

    def embed_documents(self, texts: Sequence[str], **kwargs: Any) -> list[Embedding]:
        if not self.waited:
            self.waited.append(self.gate.wait(30))
        return super().embed_documents(texts, **kwargs)


def test_the_next_group_is_decided_while_one_encodes(sessions: sessionmaker[Session]) -> None:
    # The encoder never waits for a decision: the second batch is read and chunked
    # while the first is being encoded, and queued behind it.
    decided = threading.Event()
    embedder = GatedEmbedder(decided)
    store = InMemoryVectorStore()
    chunker = MarkingChunker(embedder, decided, "second")
    service = make_service(sessions, store, embedder, chunker=chunker, batch_documents=2)
    batch = docs(("a", "first of all"), ("b", "first again"), ("c", "the second batch"))
    job_id = run(sessions, service, batch)
    assert embedder.waited == [True], "the first group's encoding waited on nothing"
    assert get_job(sessions, job_id).indexed == 3
    assert store.count(tenant_id=TENANT) == 3


class GatedStore(InMemoryVectorStore):
    """Holds its first upsert until ``gate`` is set (30 s at most: the bound only a
    failing run reaches, long enough for a loaded machine's threads); ``waited`` says
    whether it was set in time."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.waited: list[bool] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        if not self.waited:
            self.waited.append(self.gate.wait(30))
        super().upsert(records)


def test_the_batch_after_next_is_read_while_a_group_is_stored(
    sessions: sessionmaker[Session],
) -> None:
    # Batches [a b] [c d] [e]: the second is decided while the first encodes; the third
    # is read and chunked while the first group's chunks are being stored, so the
    # store is not left idle while it is read.
    read = threading.Event()
    store = GatedStore(read)
    embedder = FakeEmbedder()
    chunker = MarkingChunker(embedder, read, "third")
    service = make_service(sessions, store, embedder, chunker=chunker, batch_documents=2)
    batch = docs(("a", "one"), ("b", "two"), ("c", "three"), ("d", "four"), ("e", "the third"))
    job_id = run(sessions, service, batch)
    assert store.waited == [True], "the first group's store write waited on nothing"
    assert get_job(sessions, job_id).indexed == 5
    assert store.count(tenant_id=TENANT) == 5


class DecisionHooks(WritePipeline):
    """A write pipeline that calls :meth:`before_deciding` and :meth:`after_deciding` around
    each decision of a batch holding ``external_id`` (``in_write``: made in a group's
    write transaction)."""

    def __init__(self, external_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.external_id = external_id

    def before_deciding(self, read: Any, *, in_write: bool) -> None:
        """Called before such a decision, with the batch as it was read."""

    def after_deciding(self, read: Any, *, in_write: bool) -> None:
        """Called after such a decision (not yet committed)."""

    def _decide_in(
        self,
        session: Session,
        job: Any,
        tenant_id: str,
        ids: Any,
        read: Any,
        *,
        in_write: bool,
    ) -> Any:
        ours = any(i.external_id == self.external_id for i in read.items)
        if ours:
            self.before_deciding(read, in_write=in_write)
        out = super()._decide_in(session, job, tenant_id, ids, read, in_write=in_write)
        if ours:
            self.after_deciding(read, in_write=in_write)
        return out


class RacedPipeline(DecisionHooks):
    """Runs ``meanwhile`` once, before writing the group that holds ``before``: what
    another worker commits between two of this job's groups. ``read_early`` records
    whether the batch holding ``external_id`` had chunks read for it before it was
    decided."""

    def __init__(self, external_id: str, before: str, **kwargs: Any) -> None:
        super().__init__(external_id, **kwargs)
        self.before = before
        self.meanwhile: list[Any] = []
        self.read_early: list[bool] = []
        self.read = threading.Event()  # the batch holding external_id was read

    def _chunk_unlocked(self, tenant_id: str, item_ids: list[int], fingerprint: str) -> Any:
        read = super()._chunk_unlocked(tenant_id, item_ids, fingerprint)
        if any(i.external_id == self.external_id for i in read.items):
            self.read.set()
        return read

    def _process_unit(self, job_id: uuid.UUID, tenant_id: str, unit: Any, **k: Any) -> Any:
        before = any(p.item.external_id == self.before for group, _ in unit for p in group)
        if self.meanwhile and before:
            assert self.read.wait(5), "the batch was never read ahead"
            self.meanwhile.pop()()
        return super()._process_unit(job_id, tenant_id, unit, **k)

    def before_deciding(self, read: Any, *, in_write: bool) -> None:
        self.read_early.append(read.chunks != {})


def test_a_batch_read_ahead_is_decided_as_its_documents_stand_at_its_decision(
    sessions: sessionmaker[Session],
) -> None:
    # Batches [a b] [c d] [x y] [e]: [e] is read (and "e" chunked: it is new) early, and
    # decided while the second group is stored. An older job submitting the same "e" is
    # indexed by another worker before that; the decision finds "e" unchanged then and
    # it is skipped.
    store = InMemoryVectorStore()
    older = submit(sessions, docs(("e", "the text of e")))
    batch = [("a", "one"), ("b", "two"), ("c", "three"), ("d", "four"), ("x", "5"), ("y", "6")]
    job_id = submit(sessions, docs(*batch, ("e", "the text of e")))
    service = make_service(
        sessions,
        store,
        pipeline=partial(RacedPipeline, "e", "c"),
        batch_documents=2,
        groups_per_commit=1,  # one batch decided ahead at a time
        owner="this",
    )
    raced = service.pipeline
    assert isinstance(raced, RacedPipeline)
    other = make_service(sessions, store, owner="other")
    raced.meanwhile.append(lambda: other.process_job(older))
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    assert raced.meanwhile == []
    # Read (and "e" chunked) before the other job ran; decided in the second group's
    # write, which leaves the now unchanged "e" to a decision of its own.
    assert raced.read_early == [True, False], "the batch was not read before the other job"
    view = get_job(sessions, job_id)
    assert (view.indexed, view.skipped) == (6, 1)
    assert get_job(sessions, older).indexed == 1
    assert store.count(tenant_id=TENANT) == 7


class DecisionSignallingPipeline(DecisionHooks):
    """Sets ``decided`` when it decides a batch holding ``external_id``."""

    def __init__(self, external_id: str, decided: threading.Event, **kwargs: Any) -> None:
        super().__init__(external_id, **kwargs)
        self.decided = decided

    def after_deciding(self, read: Any, *, in_write: bool) -> None:
        self.decided.set()


def test_a_batch_is_decided_while_a_group_is_stored(sessions: sessionmaker[Session]) -> None:
    # Batches [a b] [c d] [e]: the first two are decided before any write; the third
    # while the first group's chunks are being stored, so the store is not left idle
    # while it is decided.
    decided = threading.Event()
    store = GatedStore(decided)
    service = make_service(
        sessions,
        store,
        pipeline=partial(DecisionSignallingPipeline, "e", decided),
        batch_documents=2,
    )
    batch = docs(("a", "one"), ("b", "two"), ("c", "three"), ("d", "four"), ("e", "five"))
    job_id = run(sessions, service, batch)
    assert store.waited == [True], "the first group's store write waited on nothing"
    assert get_job(sessions, job_id).indexed == 5
    assert store.count(tenant_id=TENANT) == 5


def test_a_decision_rolled_back_with_its_group_is_made_again(
    sessions: sessionmaker[Session],
) -> None:
    # One document per batch: [a] [b] [c] [d]. "d" is indexed already, unchanged. The
    # store refuses "b": the transaction of b's group, in which [d] was decided (d
    # skipped), rolls back; [d] is decided again, and d counted skipped once.
    first = InMemoryVectorStore()
    run(sessions, make_service(sessions, first), docs(("d", "the text of d")))
    store = RefusingStore("b")
    service = make_service(sessions, store, batch_documents=1)
    batch = docs(("a", "one"), ("b", "two"), ("c", "three"), ("d", "the text of d"))
    job_id = run(sessions, service, batch)
    view = get_job(sessions, job_id)
    assert (view.status, view.indexed, view.failed, view.skipped) == (
        JobStatus.PARTIAL,
        2,
        1,
        1,
    )
    assert [e.external_id for e in view.errors] == ["b"]
    with sessions() as s:
        pending = s.scalars(
            select(JobItem).where(JobItem.job_id == job_id, JobItem.status == "pending")
        ).all()
    assert pending == []
    # Every chunk the store holds was recorded on its item before it was written.
    with sessions() as s:
        recorded = {
            cid
            for ids in s.scalars(select(JobItem.chunk_ids).where(JobItem.job_id == job_id))
            for cid in (ids or ())
        }
    written = store.tenant_chunk_ids(tenant_id=TENANT)  # a's and c's
    assert len(written) == 2
    assert written <= recorded


class AbortedOnceStatistics(LexicalStatistics):
    """Its first recording fails as Postgres fails a transaction it chose to abort."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__(sessions)
        self.aborted = False

    def record_all(self, session: Session, **kwargs: Any) -> None:
        if not self.aborted:
            self.aborted = True
            orig = Exception("deadlock detected")
            raise OperationalError("INSERT INTO lexical_corpus_stats ...", {}, orig)
        super().record_all(session, **kwargs)


def test_a_transaction_the_database_aborts_is_retried_not_failed(
    sessions: sessionmaker[Session],
) -> None:
    # A deadlock (or any error of a database that is unreachable) is transient: raised
    # as a BackendError, which the task retries, the job left to resume; not an
    # unexpected error, after which the task fails every pending document.
    store = InMemoryVectorStore()
    service = make_service(
        sessions, store, statistics=AbortedOnceStatistics(sessions), batch_documents=2
    )
    job_id = submit(sessions, docs(A, B, C))
    with pytest.raises(MetadataUnavailableError, match="OperationalError"):
        service.process_job(job_id)
    assert get_job(sessions, job_id).status is JobStatus.RUNNING
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    view = get_job(sessions, job_id)
    assert (view.indexed, view.failed) == (3, 0)


class ProbingChunker(Chunker):
    """When it chunks a text holding "third", waits (5 s at most) until another
    connection can take the database's write lock, and records whether it could."""

    def __init__(self, path: str) -> None:
        super().__init__(FakeEmbedder().tokenizer, max_tokens=36, overlap_tokens=0)
        self.path = path
        self.free: list[bool] = []

    def chunk(self, text: str, *, title: str = "", lang: str = "") -> list[Any]:
        if "third" in text:
            self.free.append(self._lock_taken_within(5.0))
        return super().chunk(text, title=title, lang=lang)

    def _lock_taken_within(self, seconds: float) -> bool:
        probe = sqlite3.connect(self.path, timeout=seconds, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")  # waits up to the timeout for the lock
            probe.execute("ROLLBACK")
            return True
        except sqlite3.OperationalError:  # "database is locked"
            return False
        finally:
            probe.close()


def test_no_lock_is_held_while_documents_are_chunked(sessions: sessionmaker[Session]) -> None:
    # Chunking long documents takes a while: no transaction of the worker may wait for
    # it while holding locks (on SQLite, the whole database's write lock), or every
    # other writer (the API taking a batch, other workers) waits as long.
    bind = sessions.kw["bind"]
    chunker = ProbingChunker(str(bind.url.database))
    service = make_service(sessions, InMemoryVectorStore(), chunker=chunker, batch_documents=2)
    pairs = [(c, c) for c in "abcdef"]
    job_id = run(sessions, service, docs(*pairs, ("g", "the third")))
    assert get_job(sessions, job_id).indexed == 7
    assert chunker.free == [True], "the write lock was held while a document was chunked"


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


def test_a_given_up_job_fails_its_pending_items_and_a_finished_job_stays(
    sessions: sessionmaker[Session],
) -> None:
    service = make_service(sessions, InMemoryVectorStore())
    given_up = submit(sessions, docs(A, B))
    service.fail_job(given_up, error="VectorStoreError: down")
    job = get_job(sessions, given_up)
    assert (job.status, job.indexed, job.failed) == (JobStatus.FAILED, 0, 2)
    assert job.error == "VectorStoreError: down"

    done = run(sessions, service, docs(C))
    service.fail_job(done, error="too late")
    job = get_job(sessions, done)
    assert (job.status, job.indexed, job.failed, job.error) == (JobStatus.SUCCEEDED, 1, 0, None)


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
    service.fail_job(abandoned, error="worker lost")  # retries exhausted: given up

    run(sessions, service, docs(("a", "A new, short version.")))
    assert store.chunk_ids(tenant_id=TENANT, document_id=doc).isdisjoint(orphans)
    assert store.count(tenant_id=TENANT) == 1


def test_a_retry_that_chunks_differently_removes_the_dead_attempts_chunks(
    sessions: sessionmaker[Session],
) -> None:
    # The worker restarted with other chunk settings: the retry's chunk ids differ from
    # those the dead attempt wrote, which must not stay behind as orphans.
    store = CrashingStore()
    job_id = submit(sessions, docs(A))
    with pytest.raises(VectorStoreError):
        make_service(sessions, store).process_job(job_id)
    doc = document_id(TENANT, "a")
    dead = store.chunk_ids(tenant_id=TENANT, document_id=str(doc))
    assert dead, "the dead attempt left chunks behind"

    finer = Chunker(FakeEmbedder().tokenizer, max_tokens=12, overlap_tokens=0)
    service = make_service(sessions, store, chunker=finer)
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    with sessions() as s:
        recorded = set(s.get_one(Document, doc).chunk_ids)
    assert recorded.isdisjoint(dead), "the finer chunks have other ids"
    assert store.chunk_ids(tenant_id=TENANT, document_id=str(doc)) == recorded


class FlushCountingStore(InMemoryVectorStore):
    """Records, for each flush, how many chunk writes preceded it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.flushes: list[int] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        super().upsert(records)
        self.writes += len(records)

    def flush(self) -> None:
        self.flushes.append(self.writes)


def statuses(sessions: sessionmaker[Session], job_ids: Sequence[uuid.UUID]) -> list[JobStatus]:
    return [get_job(sessions, j).status for j in job_ids]


def test_a_job_is_reported_finished_once_its_chunks_are_flushed(
    sessions: sessionmaker[Session],
) -> None:
    store = FlushCountingStore()
    job_id = run(sessions, make_service(sessions, store), docs(A, B))
    assert get_job(sessions, job_id).status is JobStatus.SUCCEEDED
    assert store.flushes == [store.writes], "one flush, after the job's last write"


def test_back_to_back_jobs_share_a_flush(sessions: sessionmaker[Session]) -> None:
    store = FlushCountingStore()
    timers = Timers()
    service = make_service(sessions, store, timers=timers)
    jobs = [submit(sessions, docs((f"d{i}", f"Document number {i}."))) for i in range(5)]
    assert [service.process_job(j) for j in jobs] == [JobStatus.SUCCEEDED] + [JobStatus.RUNNING] * 4
    assert len(store.flushes) == 1, "the first job flushed; the others wait for the timer"
    assert statuses(sessions, jobs) == [JobStatus.SUCCEEDED] + [JobStatus.RUNNING] * 4
    assert [get_job(sessions, j).indexed for j in jobs] == [1] * 5, "written, not yet finished"
    assert timers.live() == [10.0]
    timers.fire()
    assert store.flushes == [1, 5], "one more flush, after every write"
    assert statuses(sessions, jobs) == [JobStatus.SUCCEEDED] * 5


def test_a_job_that_wrote_nothing_finishes_without_waiting(sessions: sessionmaker[Session]) -> None:
    store = FlushCountingStore()
    service = make_service(sessions, store, timers=Timers())
    run(sessions, service, docs(A))
    again = submit(sessions, docs(A))  # unchanged: skipped, nothing written
    assert service.process_job(again) is JobStatus.SUCCEEDED
    assert len(store.flushes) == 1


def ends(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [m for r in caplog.records if (m := r.getMessage()).startswith("ingest.job.finished")]


def test_a_job_end_rolled_back_is_logged_only_once_it_commits(
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The flush marks the job finished, then its transaction fails: the job ends with
    the next flush, and its end is logged once, when it has committed."""
    store = FlushCountingStore()
    timers = Timers()
    service = make_service(sessions, store, timers=timers)
    run(sessions, service, docs(A))
    waiting = run(sessions, service, docs(B))
    bump = TenantRepository.bump_generation
    failures = [RuntimeError("the database went away")]

    def failing_bump(self: TenantRepository, tenant_id: str) -> None:
        if failures:
            raise failures.pop()
        bump(self, tenant_id)

    monkeypatch.setattr(TenantRepository, "bump_generation", failing_bump)
    caplog.set_level(logging.INFO, logger="hsearch.ingestion.worker.indexer")
    caplog.clear()  # the first job's end
    timers.fire()  # marks the job finished, then rolls back
    assert get_job(sessions, waiting).status is JobStatus.RUNNING
    assert ends(caplog) == []
    timers.fire()  # tried again
    assert get_job(sessions, waiting).status is JobStatus.SUCCEEDED
    assert ends(caplog) == [
        f"ingest.job.finished job_id={waiting} status=succeeded indexed=1 skipped=0 failed=0"
    ]


def test_closing_runs_the_waiting_flush(sessions: sessionmaker[Session]) -> None:
    store = FlushCountingStore()
    service = make_service(sessions, store, timers=Timers())
    run(sessions, service, docs(A))
    waiting = run(sessions, service, docs(B))
    assert get_job(sessions, waiting).status is JobStatus.RUNNING
    service.close()
    assert get_job(sessions, waiting).status is JobStatus.SUCCEEDED
    assert len(store.flushes) == 2


def test_jobs_a_stopped_worker_left_waiting_finish_with_the_next_flush(
    sessions: sessionmaker[Session],
) -> None:
    store = FlushCountingStore()
    stopped = make_service(sessions, store, timers=Timers())  # its timer never fires
    run(sessions, stopped, docs(A))
    orphan = run(sessions, stopped, docs(B))
    other = make_service(sessions, store)  # another worker process
    job_id = run(sessions, other, docs(C))
    assert statuses(sessions, [orphan, job_id]) == [JobStatus.SUCCEEDED] * 2
    assert len(store.flushes) == 2


class ProgressRecordingStore(InMemoryVectorStore):
    """Records, at each write, the documents it carries and the job's progress as
    committed at that moment (read in a session of its own)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__()
        self._sessions = sessions
        self.job_id: uuid.UUID | None = None
        self.writes: list[tuple[list[str], int]] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        assert self.job_id is not None
        with self._sessions() as s:
            job = s.get_one(IngestionJob, self.job_id)
            committed = job.indexed
        written = sorted(r.external_id for r in records if r.ordinal == 0)
        self.writes.append((written, committed))
        super().upsert(records)


def test_progress_is_committed_per_group_of_chunks(sessions: sessionmaker[Session]) -> None:
    # Three one-chunk documents fill a group of three chunks; the long one is a group
    # of its own; the last one starts a new group.
    long_text = " ".join(f"Sentence number {i} of the long document." for i in range(30))
    batch = docs(
        ("s1", "One."), ("s2", "Two."), ("s3", "Three."), ("long", long_text), ("s4", "Four.")
    )
    store = ProgressRecordingStore(sessions)
    service = make_service(sessions, store, batch_documents=16, batch_chunks=3, groups_per_commit=1)
    store.job_id = submit(sessions, batch)
    assert service.process_job(store.job_id) is JobStatus.SUCCEEDED
    # One write per group; what the earlier groups indexed is committed before the next
    # (groups in one transaction: tests/unit/ingestion/test_units.py).
    assert store.writes == [(["s1", "s2", "s3"], 0), (["long"], 3), (["s4"], 4)]
    assert get_job(sessions, store.job_id).indexed == 5


class RefusingStore(InMemoryVectorStore):
    """Refuses (not transiently) any write that carries a document of ``refused``."""

    def __init__(self, refused: str) -> None:
        super().__init__()
        self.refused = refused

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        if any(r.external_id == self.refused for r in records):
            raise InvalidRequestError("metadata: a value is too long for the store")
        super().upsert(records)


def test_a_document_the_store_refuses_fails_alone_and_counts_nothing(
    sessions: sessionmaker[Session],
) -> None:
    store = RefusingStore("b")
    job_id = run(sessions, make_service(sessions, store), docs(A, B, C))
    view = get_job(sessions, job_id)
    assert (view.status, view.indexed, view.failed) == (JobStatus.PARTIAL, 2, 1)
    assert view.errors[0].external_id == "b"
    assert "too long" in view.errors[0].error
    # Its group was rolled back and written again without it: the statistics and the
    # store hold exactly the other two, as an ingest of those two alone does.
    clean = InMemoryVectorStore()
    run(sessions, make_service(sessions, clean), docs(A, C), tenant="t2")
    assert stats(sessions) == stats(sessions, "t2")
    assert store.count(tenant_id=TENANT) == clean.count(tenant_id="t2")
