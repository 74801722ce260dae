"""A document's versions are ordered by submission: an older job never replaces a newer
version, whatever order the worker sees the jobs in (a stale job re-delivered late)."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.models import Document, JobStatus
from hsearch.ingestion.ids import document_id
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import TENANT, docs, get_job, make_service, submit


def indexed_text(sessions: sessionmaker[Session], external_id: str) -> str:
    with sessions() as session:
        return session.get_one(Document, document_id(TENANT, external_id)).content


def test_a_stale_job_run_after_a_newer_one_changes_nothing(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    service = make_service(sessions, store)
    old = submit(sessions, docs(("x", "The old text about lakes.")))
    new = submit(sessions, docs(("x", "The new text about rivers.")))
    assert service.process_job(new) is JobStatus.SUCCEEDED
    chunks = store.count(tenant_id=TENANT)
    assert service.process_job(old) is JobStatus.SUCCEEDED  # re-delivered late
    assert indexed_text(sessions, "x") == "The new text about rivers."
    assert store.count(tenant_id=TENANT) == chunks
    view = get_job(sessions, old)
    assert (view.indexed, view.skipped) == (0, 1)


def test_an_unchanged_newer_submission_still_outranks_an_older_change(
    sessions: sessionmaker[Session],
) -> None:
    # v1 "A" indexed; v2 "B" waits; v3 "A" again is skipped as unchanged, but it is the
    # newest: v2 must not replace it when it finally runs.
    service = make_service(sessions, InMemoryVectorStore())
    first = submit(sessions, docs(("x", "Text A.")))
    second = submit(sessions, docs(("x", "Text B.")))
    third = submit(sessions, docs(("x", "Text A.")))
    service.process_job(first)
    service.process_job(third)
    service.process_job(second)
    assert indexed_text(sessions, "x") == "Text A."
    assert (get_job(sessions, second).indexed, get_job(sessions, second).skipped) == (0, 1)


def test_jobs_in_order_replace_each_other(sessions: sessionmaker[Session]) -> None:
    service = make_service(sessions, InMemoryVectorStore())
    for text in ("One.", "Two.", "Three."):
        service.process_job(submit(sessions, docs(("x", text))))
    assert indexed_text(sessions, "x") == "Three."
