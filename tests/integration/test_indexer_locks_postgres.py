"""Two workers writing the same tenant on Postgres never lock rows in opposite orders,
and a decision to skip an unchanged document waits for a worker writing it.

A group's write transaction holds its documents' rows while its chunks are stored (the
tenant's BM25 rows are changed last, before the commit), and decides the job's next
batch meanwhile. Skipping an unchanged document changes that document's row (its
version): taken there, it would close a cycle with a worker writing that document (its
row held, waiting for a row of the write's), and Postgres would abort one of them. Such
items are left to a decision of their own, between two writes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from functools import partial
from itertools import islice
from typing import Any

import pytest
from sqlalchemy import Engine, select, text
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.models import Document, JobItem, JobStatus
from hsearch.errors import ConcurrentWriteError
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord
from tests.unit.ingestion.test_indexing import DecisionHooks, docs, get_job, make_service, submit

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    engine = create_db_engine(pg_url)
    yield engine
    engine.dispose()


class GatedDecision(DecisionHooks):
    """Holds a decision made in a write, of a batch holding ``d1``, until ``go`` is set;
    ``held`` says that one was made."""

    def __init__(self, go: threading.Event, **kwargs: Any) -> None:
        super().__init__("d1", **kwargs)
        self.go, self.held = go, threading.Event()

    def before_deciding(self, read: Any, *, in_write: bool) -> None:
        if in_write:
            self.held.set()
            assert self.go.wait(20)


def waiting_on_a_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        waiting = conn.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
        )
    return bool(waiting)


def wait_for_a_lock_wait(engine: Engine, *, what: str) -> None:
    deadline = time.monotonic() + 20
    while not waiting_on_a_lock(engine):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def indexing(
    outcome: dict[str, Any], name: str, service: IndexingService, job_id: uuid.UUID
) -> threading.Thread:
    """``service`` indexing ``job_id`` in a thread of its own, started; its status, or
    what it raised, lands in ``outcome[name]``."""

    def run() -> None:
        try:
            outcome[name] = service.process_job(job_id)
        except Exception as exc:  # reported by the test's assertion on outcome
            outcome[name] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_decision_in_a_write_takes_no_document_row(engine: Engine, tenant: str) -> None:
    sessions: sessionmaker[Session] = create_session_factory(engine)
    store = InMemoryVectorStore()
    # Documents whose rows come after d1's: a worker writing them and d1 locks d1's first.
    # Looked for among many names: the tenant is new on each run, and d1's id may come
    # after all but one of a hundred.
    x, y = islice(
        (
            name
            for name in (f"a{n}" for n in range(1, 100_000))
            if document_id(tenant, name) > document_id(tenant, "d1")
        ),
        2,
    )
    first = make_service(sessions, store)
    first.process_job(submit(sessions, docs(("d1", "old text"), (x, "0"), (y, "0")), tenant))
    # Job A: [x] [y] [d1, unchanged]; job B, submitted after it, changes all three, in
    # one group.
    job_a = submit(sessions, docs((x, "one"), (y, "two"), ("d1", "old text")), tenant)
    job_b = submit(sessions, docs(("d1", "new text"), (x, "new one"), (y, "new two")), tenant)
    go = threading.Event()
    a = make_service(
        sessions,
        store,
        pipeline=partial(GatedDecision, go),
        batch_documents=1,
        groups_per_commit=1,  # one batch decided ahead, in a write
        owner="A",
    )
    gated = a.pipeline
    assert isinstance(gated, GatedDecision)
    b = make_service(sessions, store, owner="B")
    outcome: dict[str, Any] = {}
    worker_a = indexing(outcome, "A", a, job_a)
    # A holds a group's write open (the row of x or y) and decides [d1] in it; B then
    # locks d1 to write it and waits for A's row.
    assert gated.held.wait(20), "A never decided [d1] in a write"
    worker_b = indexing(outcome, "B", b, job_b)
    wait_for_a_lock_wait(engine, what="B never waited for A's rows")
    go.set()
    worker_a.join(30)
    worker_b.join(30)
    assert outcome == {"A": JobStatus.SUCCEEDED, "B": JobStatus.SUCCEEDED}
    # B's newer versions are indexed; A's older submission of d1 is skipped, decided on
    # its own (and y's too when B wrote y first: which write A decided [d1] in depends
    # on how far ahead it decides).
    view = get_job(sessions, job_a, tenant)
    assert view.skipped >= 1
    assert view.indexed + view.skipped == 3
    assert get_job(sessions, job_b, tenant).indexed == 3
    with sessions() as session:
        indexed = session.scalars(select(Document).where(Document.tenant_id == tenant))
        assert {d.external_id: d.content for d in indexed} == {
            "d1": "new text",
            x: "new one",
            y: "new two",
        }


class HeldStore(InMemoryVectorStore):
    """Holds its upserts until ``go`` is set; ``entered`` says that one began (its
    group's write then holds its documents' rows)."""

    def __init__(self, go: threading.Event) -> None:
        super().__init__()
        self.go, self.entered = go, threading.Event()

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        self.entered.set()
        assert self.go.wait(20)
        super().upsert(records)


def race_a_held_write(
    engine: Engine,
    sessions: sessionmaker[Session],
    held: tuple[str, uuid.UUID],
    racing: tuple[str, uuid.UUID],
    *,
    what: str,
) -> tuple[dict[str, Any], IndexingService]:
    """The job ``held`` (named, as the outcome's key and the worker's owner) indexed by a
    worker whose store holds its first write, the group's rows held meanwhile; then the
    job ``racing`` by another worker, which must come to wait for a lock (``what`` says
    it did not); then the write goes on. Returns each job's outcome by name (its status,
    or what it raised) and the racing worker."""
    go = threading.Event()
    store = HeldStore(go)
    outcome: dict[str, Any] = {}
    (name, job_id), (racer_name, racer_job) = held, racing
    threads = [indexing(outcome, name, make_service(sessions, store, owner=name), job_id)]
    assert store.entered.wait(20), f"the job {name!r} was never being written"
    racer = make_service(sessions, InMemoryVectorStore(), owner=racer_name)
    threads.append(indexing(outcome, racer_name, racer, racer_job))
    wait_for_a_lock_wait(engine, what=what)
    go.set()
    for thread in threads:
        thread.join(30)
    return outcome, racer


def stored_document(sessions: sessionmaker[Session], tenant: str, external_id: str) -> Document:
    """The tenant's one document row of ``external_id``."""
    with sessions() as session:
        return session.scalars(
            select(Document).where(
                Document.tenant_id == tenant, Document.external_id == external_id
            )
        ).one()


def test_an_unchanged_document_is_decided_on_as_a_worker_writing_it_left_it(
    engine: Engine, tenant: str
) -> None:
    """Skipping an unchanged document bumps its version. Decided on an unlocked read, a
    worker writing an older submission of it meanwhile went unseen: its text replaced the
    indexed one, and the newer submission, the same text as was indexed, was skipped,
    its version on the row over the older text."""
    sessions: sessionmaker[Session] = create_session_factory(engine)
    make_service(sessions, InMemoryVectorStore()).process_job(
        submit(sessions, docs(("d1", "kept text")), tenant)
    )
    older = submit(sessions, docs(("d1", "older text")), tenant)
    newer = submit(sessions, docs(("d1", "kept text")), tenant)  # as indexed: unchanged
    outcome, _ = race_a_held_write(
        engine,
        sessions,
        ("older", older),
        ("newer", newer),
        what="the decision never waited for the written row",
    )
    assert outcome == {"older": JobStatus.SUCCEEDED, "newer": JobStatus.SUCCEEDED}
    # The newer submission is what the document holds, at its own version.
    document = stored_document(sessions, tenant, "d1")
    with sessions() as session:
        item_id = session.scalar(select(JobItem.id).where(JobItem.job_id == newer))
    assert document.content == "kept text"
    assert document.version == item_id
    view = get_job(sessions, newer, tenant)
    assert (view.indexed, view.skipped) == (1, 0)


def test_a_new_document_two_workers_insert_is_retried_not_failed(
    engine: Engine, tenant: str
) -> None:
    """Two jobs write the same new document. The second worker's insert of its row waits
    for the first's transaction and then fails on the key the first inserted: that is a
    transient error (the job is retried, as the task does), and the retry writes the
    newer submission over the first."""
    sessions: sessionmaker[Session] = create_session_factory(engine)
    first = submit(sessions, docs(("n1", "first text")), tenant)
    second = submit(sessions, docs(("n1", "second text")), tenant)
    outcome, racer = race_a_held_write(
        engine,
        sessions,
        ("first", first),
        ("second", second),
        what="the second insert never waited for the first",
    )
    assert outcome["first"] is JobStatus.SUCCEEDED
    assert isinstance(outcome["second"], ConcurrentWriteError), outcome["second"]
    assert get_job(sessions, second, tenant).status is JobStatus.RUNNING  # left to a retry
    assert racer.process_job(second) is JobStatus.SUCCEEDED
    assert stored_document(sessions, tenant, "n1").content == "second text"
