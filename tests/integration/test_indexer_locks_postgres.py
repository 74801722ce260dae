"""Two workers writing the same tenant on Postgres never lock rows in opposite orders.

A group's write transaction holds its documents' rows and the tenant's BM25 corpus row
while its chunks are stored, and decides the job's next batch meanwhile. Skipping an
unchanged document changes that document's row (its version): taken there, it closed a
cycle with a worker writing that document (its row held, waiting for the corpus row),
and Postgres aborted one of them. Such items are left to a decision of their own,
between two writes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.models import JobStatus
from hsearch.ingestion.indexer import IndexingService
from hsearch.vectorstore.in_memory import InMemoryVectorStore
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


def test_a_decision_in_a_write_takes_no_document_row(engine: Engine, tenant: str) -> None:
    sessions: sessionmaker[Session] = create_session_factory(engine)
    store = InMemoryVectorStore()
    first = make_service(sessions, store)
    first.process_job(submit(sessions, docs(("d1", "old text")), tenant))
    # Job A: [a1] [a2] [d1, unchanged]; job B, submitted after it, changes d1.
    job_a = submit(sessions, docs(("a1", "one"), ("a2", "two"), ("d1", "old text")), tenant)
    job_b = submit(sessions, docs(("d1", "new text")), tenant)
    go = threading.Event()
    a = make_service(sessions, store, kind=partial(GatedDecision, go), batch_documents=1, owner="A")
    assert isinstance(a, GatedDecision)
    b = make_service(sessions, store, owner="B")
    outcome: dict[str, Any] = {}

    def run(name: str, service: IndexingService, job_id: uuid.UUID) -> None:
        try:
            outcome[name] = service.process_job(job_id)
        except Exception as exc:  # reported below
            outcome[name] = exc

    worker_a = threading.Thread(target=run, args=("A", a, job_a))
    worker_a.start()
    # A holds a group's write open (its documents' rows, the corpus row) and decides
    # [d1] in it; B then locks d1 to write it and waits for the corpus row.
    assert a.held.wait(20), "A never decided [d1] in a write"
    worker_b = threading.Thread(target=run, args=("B", b, job_b))
    worker_b.start()
    deadline = time.monotonic() + 20
    while not waiting_on_a_lock(engine):
        assert time.monotonic() < deadline, "B never waited for A's rows"
        time.sleep(0.05)
    go.set()
    worker_a.join(30)
    worker_b.join(30)
    assert outcome == {"A": JobStatus.SUCCEEDED, "B": JobStatus.SUCCEEDED}
    # B's newer d1 is indexed; A's older submission of it is skipped, decided on its own.
    view = get_job(sessions, job_a, tenant)
    assert (view.indexed, view.skipped) == (2, 1)
    assert get_job(sessions, job_b, tenant).indexed == 1
