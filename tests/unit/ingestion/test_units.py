"""Groups written together: when the encoder is ahead of the store, up to
``groups_per_commit`` groups share a transaction, and each group's rows are read and its
records made while the store writes the group before (``WritePipeline._write_unit``).

The indexers here encode as each group is queued (a synchronous encoder thread), so
that every group queued is encoded by the time a write begins and the units are the
same on every run."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.models import IngestionJob, JobStatus
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.worker.pipeline import WritePipeline
from hsearch.lexical.statistics import LexicalStatistics, WeightedDocument
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.test_indexing import (
    A,
    C,
    GatedStore,
    RefusingStore,
    docs,
    get_job,
    make_service,
    stats,
    submit,
)

TENANT = "t1"
LONG = " ".join(f"Sentence number {i} of the long document." for i in range(30))


class _Now(ThreadPoolExecutor):
    """An executor that runs what it is given at once, in the caller's thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


class EncodedAhead(WritePipeline):
    """Encodes each group as it is queued: the encoder is always ahead of the writes."""

    def _thread(self, name: str) -> ThreadPoolExecutor:
        return _Now() if name == "encode" else super()._thread(name)


class WriteRecordingStore(InMemoryVectorStore):
    """Records, per upsert, the documents written and the job's ``indexed`` count as
    committed at that moment (another session's read)."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__()
        self._sessions = sessions
        self.job_id: Any = None
        self.writes: list[tuple[list[str], int]] = []

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        with self._sessions() as s:
            committed = s.get_one(IngestionJob, self.job_id).indexed
        self.writes.append((sorted({r.external_id for r in records}), committed))
        super().upsert(records)


class KeepingStore(InMemoryVectorStore):
    """Keeps the records it holds, for a test to compare."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: dict[str, ChunkRecord] = {}
        self.job_id: Any = None  # the job a test indexed into it

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        super().upsert(records)
        self.kept.update((r.chunk_id, r) for r in records)

    def delete_chunks(self, chunk_ids: Sequence[str], *, tenant_id: str) -> None:
        super().delete_chunks(chunk_ids, tenant_id=tenant_id)
        for chunk_id in chunk_ids:
            self.kept.pop(chunk_id, None)


BATCH = docs(("s1", "One."), ("s2", "Two."), ("s3", "Three."), ("long", LONG), ("s4", "Four."))
"""Groups of 3 chunks: [s1 s2 s3] [long] [s4] (the long document is a group of its own)."""


@pytest.mark.parametrize(
    ("per_commit", "writes"),
    [
        (1, [(["s1", "s2", "s3"], 0), (["long"], 3), (["s4"], 4)]),
        (2, [(["s1", "s2", "s3"], 0), (["long"], 0), (["s4"], 4)]),
        (4, [(["s1", "s2", "s3"], 0), (["long"], 0), (["s4"], 0)]),
    ],
)
def test_groups_encoded_ahead_share_a_transaction(
    sessions: sessionmaker[Session], per_commit: int, writes: list[tuple[list[str], int]]
) -> None:
    store = WriteRecordingStore(sessions)
    service = make_service(
        sessions,
        store,
        pipeline=EncodedAhead,
        batch_documents=16,
        batch_chunks=3,
        groups_per_commit=per_commit,
    )
    store.job_id = submit(sessions, BATCH)
    assert service.process_job(store.job_id) is JobStatus.SUCCEEDED
    assert store.writes == writes
    assert get_job(sessions, store.job_id).indexed == 5


class SignallingStatistics(LexicalStatistics):
    """Sets ``second`` when a second group of documents is weighed."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__(sessions)
        self.second = threading.Event()
        self.weighed = 0

    def weigh_documents(self, session: Session, **kwargs: Any) -> list[WeightedDocument]:
        self.weighed += 1
        if self.weighed == 2:
            self.second.set()
        return super().weigh_documents(session, **kwargs)


def test_a_group_is_weighed_while_the_group_before_is_stored(
    sessions: sessionmaker[Session],
) -> None:
    statistics = SignallingStatistics(sessions)
    store = GatedStore(statistics.second)
    service = make_service(
        sessions, store, pipeline=EncodedAhead, batch_chunks=3, statistics=statistics
    )
    job_id = submit(sessions, BATCH)
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    assert store.waited == [True], "the second group waited for the first one's store write"
    assert store.count(tenant_id=TENANT) == 10


def group_by_group_and_in_units(
    sessions: sessionmaker[Session],
    batch: list[DocumentInput],
    *,
    batch_chunks: int,
    before: Sequence[DocumentInput] = (),
) -> dict[str, KeepingStore]:
    """``batch`` indexed as one job for tenant t1 with a transaction per group and for
    t2 with units of up to 4 groups (each after a job of ``before``, when given), into a
    store per tenant; each store's ``job_id`` is the batch's job."""
    stores: dict[str, KeepingStore] = {}
    for tenant, per_commit in (("t1", 1), ("t2", 4)):
        store = stores[tenant] = KeepingStore()
        service = make_service(
            sessions,
            store,
            pipeline=EncodedAhead,
            batch_chunks=batch_chunks,
            groups_per_commit=per_commit,
        )
        if before:
            assert service.process_job(submit(sessions, list(before), tenant)) is (
                JobStatus.SUCCEEDED
            )
        store.job_id = submit(sessions, batch, tenant)
        assert service.process_job(store.job_id) is JobStatus.SUCCEEDED
    return stores


def test_a_unit_weighs_and_stores_exactly_what_group_by_group_does(
    sessions: sessionmaker[Session],
) -> None:
    # Each group is weighed with the statistics as the groups before it left them, in
    # the same transaction: the same vectors and statistics as one transaction each.
    batch = docs(A, ("b", "Mountains rise above the clouds. " * 9), C, ("long", LONG))
    stores = group_by_group_and_in_units(sessions, batch, batch_chunks=2)

    def written(tenant: str) -> list[tuple[str, int, tuple[int, ...], tuple[float, ...]]]:
        return sorted(
            (r.external_id, r.ordinal, r.sparse.indices, r.sparse.values)
            for r in stores[tenant].kept.values()
        )

    assert len(written("t1")) > 8  # several groups of two chunks
    assert written("t1") == written("t2")
    assert stats(sessions, "t1") == stats(sessions, "t2")


def test_a_document_the_store_refuses_in_a_unit_fails_alone(
    sessions: sessionmaker[Session],
) -> None:
    # Groups of two chunks, one unit: the store refuses "b"; the unit rolls back and its
    # groups are written one by one, b's document by document.
    batch = docs(("a", "One. " * 30), ("b", "Two."), ("c", "Three."), ("d", "Four. " * 30))
    store = RefusingStore("b")
    service = make_service(sessions, store, pipeline=EncodedAhead, batch_chunks=2)
    job_id = submit(sessions, batch)
    assert service.process_job(job_id) is JobStatus.PARTIAL
    view = get_job(sessions, job_id)
    assert (view.indexed, view.failed) == (3, 1)
    assert [e.external_id for e in view.errors] == ["b"]
    clean = InMemoryVectorStore()
    others = [d for d in batch if d.external_id != "b"]
    run_clean = make_service(sessions, clean, pipeline=EncodedAhead, batch_chunks=2)
    assert run_clean.process_job(submit(sessions, others, "t2")) is JobStatus.SUCCEEDED
    assert stats(sessions) == stats(sessions, "t2")
    assert store.count(tenant_id=TENANT) == clean.count(tenant_id="t2")


def test_documents_locked_as_a_unit_began_are_updated_as_group_by_group(
    sessions: sessionmaker[Session],
) -> None:
    # "a" and "c" are indexed before; the job changes them in later groups of one unit
    # (their rows read and locked as the unit began, not again by their groups), beside
    # new documents: the store and the statistics hold what one transaction per group
    # leaves, the old versions' chunks deleted.
    before = docs(("a", "Alpha first. " * 20), ("c", "Gamma first. " * 20))
    batch = docs(
        ("n1", "Nu one. " * 20),
        ("a", "Alpha second. " * 20),
        ("n2", "Nu two. " * 20),
        ("c", "Gamma second. " * 20),
    )
    stores = group_by_group_and_in_units(sessions, batch, batch_chunks=1, before=before)
    for tenant in stores:
        assert get_job(sessions, stores[tenant].job_id, tenant).indexed == 4

    def held(tenant: str) -> list[tuple[str, str, tuple[float, ...]]]:
        return sorted(
            (r.external_id, r.text, r.sparse.values) for r in stores[tenant].kept.values()
        )

    assert {external_id for external_id, *_ in held("t2")} == {"a", "c", "n1", "n2"}
    assert not any("first" in text for _, text, _ in held("t2"))
    assert held("t1") == held("t2")
    assert stats(sessions, "t1") == stats(sessions, "t2")


class DecisionsAndWrites(EncodedAhead):
    """Records, in order, the batches decided in a transaction of their own and the
    store's writes (``events``, shared with its store)."""

    events: list[str]

    def _decide(self, *args: Any, **kwargs: Any) -> Any:
        self.events.append("decided alone")
        return super()._decide(*args, **kwargs)


class EventStore(InMemoryVectorStore):
    def __init__(self, events: list[str]) -> None:
        super().__init__()
        self.events = events

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.events.append("write")
        super().upsert(records)


def test_a_jobs_first_write_does_not_wait_for_its_second_batch(
    sessions: sessionmaker[Session],
) -> None:
    """The first batch is decided on its own (no write is under way to hold it); the
    second is decided in the first write, not on its own before it, where the store
    would wait for it."""
    events: list[str] = []
    store = EventStore(events)
    service = make_service(sessions, store, pipeline=DecisionsAndWrites, batch_documents=2)
    assert isinstance(service.pipeline, DecisionsAndWrites)
    service.pipeline.events = events
    job_id = submit(sessions, docs(*((f"d{i}", f"Document number {i}.") for i in range(6))))
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    assert events[:2] == ["decided alone", "write"]
    assert events.count("write") == 3
    assert get_job(sessions, job_id).indexed == 6
