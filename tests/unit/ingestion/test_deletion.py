"""Delete by filter, as a job, on embedded parts (SQLite, the fake encoder, the
in-memory store): exactly the selected documents go, with their chunks and their
share of the statistics; other tenants are untouched; a crash mid-job resumes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.models import Tenant
from hsearch.errors import InvalidFilterError, InvalidRequestError, VectorStoreError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.types import JobKind, JobStatus
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import make_service, stats

TENANT = "t1"

CORPUS = [
    DocumentInput(external_id="n1", text="Floods in the valley.", source="news", tags=("a",)),
    DocumentInput(external_id="n2", text="Storms at sea tonight.", source="news"),
    DocumentInput(
        external_id="w1", text="Rivers flow to the sea.", source="wiki", metadata={"year": 2001}
    ),
    DocumentInput(
        external_id="w2", text="Mountains rise high.", source="wiki", metadata={"year": 1999}
    ),
]


T = TypeVar("T")


def jobs(sessions: sessionmaker[Session], fn: Callable[[JobService], T]) -> T:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        return fn(JobService(uow, settings=IngestSettings()))


def ingest(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    documents: Sequence[DocumentInput],
    tenant: str = TENANT,
) -> None:
    job = jobs(sessions, lambda j: j.submit(tenant_id=tenant, documents=documents))
    assert make_service(sessions, store).process_job(job.id) is JobStatus.SUCCEEDED


def delete(
    sessions: sessionmaker[Session],
    store: InMemoryVectorStore,
    filter: dict[str, Any] | None,
    *,
    everything: bool = False,
    tenant: str = TENANT,
) -> JobView:
    job = jobs(
        sessions,
        lambda j: j.submit_delete(tenant_id=tenant, filter=filter, everything=everything),
    )
    make_service(sessions, store).process_job(job.id)
    return view(sessions, job.id, tenant)


def view(sessions: sessionmaker[Session], job_id: uuid.UUID, tenant: str = TENANT) -> JobView:
    return jobs(sessions, lambda j: j.get(job_id, tenant_id=tenant))


def external_ids(store: InMemoryVectorStore, tenant: str = TENANT) -> set[str]:
    return {r.external_id for r in store._rows.values() if r.tenant_id == tenant}


def generation(sessions: sessionmaker[Session], tenant: str = TENANT) -> int:
    with sessions() as s:
        return s.get_one(Tenant, tenant).data_generation


def test_a_delete_job_removes_exactly_the_selected_documents(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    ingest(sessions, store, CORPUS)
    ingest(sessions, store, CORPUS, tenant="other")
    before = generation(sessions)

    job = delete(sessions, store, {"source": {"eq": "news"}})
    assert (job.kind, job.status, job.total, job.deleted, job.processed) == (
        JobKind.DELETE,
        JobStatus.SUCCEEDED,
        2,
        2,
        2,
    )
    assert external_ids(store) == {"w1", "w2"}
    assert external_ids(store, "other") == {"n1", "n2", "w1", "w2"}, "another tenant's stay"
    assert generation(sessions) > before, "caches keyed on the generation see the change"
    # The statistics are those of a tenant that only ever had the two that stay.
    ingest(sessions, InMemoryVectorStore(), CORPUS[2:], tenant="fresh")
    assert stats(sessions) == stats(sessions, "fresh")

    # Metadata paths and ranges select as in search.
    job = delete(sessions, store, {"metadata.year": {"lt": 2000}})
    assert (job.total, job.deleted) == (1, 1)
    assert external_ids(store) == {"w1"}

    # A filter selecting nothing is a job that deleted nothing.
    job = delete(sessions, store, {"source": {"eq": "blog"}})
    assert (job.status, job.total, job.deleted) == (JobStatus.SUCCEEDED, 0, 0)


def test_all_deletes_every_document_of_the_tenant_only(sessions: sessionmaker[Session]) -> None:
    store = InMemoryVectorStore()
    ingest(sessions, store, CORPUS)
    ingest(sessions, store, CORPUS[:1], tenant="other")
    job = delete(sessions, store, None, everything=True)
    assert (job.status, job.deleted) == (JobStatus.SUCCEEDED, 4)
    assert external_ids(store) == set()
    assert external_ids(store, "other") == {"n1"}


@pytest.mark.parametrize(
    ("filter", "everything", "error", "words"),
    [
        (
            None,
            False,
            InvalidRequestError,
            'filter: empty, it would select every document; send "all"',
        ),
        ({}, False, InvalidRequestError, "filter: empty"),
        ({"source": {"eq": "news"}}, True, InvalidRequestError, "all: true deletes every document"),
        ({"ordinal": {"eq": 0}}, False, InvalidFilterError, "filter: ordinal is a chunk's field"),
        ({"nope": {"eq": 1}}, False, InvalidFilterError, "nope"),
    ],
)
def test_a_bad_delete_request_is_refused_naming_the_field_and_writes_nothing(
    sessions: sessionmaker[Session],
    filter: dict[str, Any] | None,
    everything: bool,
    error: type[Exception],
    words: str,
) -> None:
    with pytest.raises(error, match=words):
        jobs(
            sessions,
            lambda j: j.submit_delete(tenant_id=TENANT, filter=filter, everything=everything),
        )
    page = jobs(sessions, lambda j: j.list(tenant_id=TENANT))
    assert page.jobs == ()


class FailingDeletes(InMemoryVectorStore):
    """Fails (transiently) the ``fail_call``-th chunk delete."""

    def __init__(self, fail_call: int) -> None:
        super().__init__()
        self.fail_call = fail_call
        self.calls = 0

    def delete_chunks(self, chunk_ids: Sequence[str], *, tenant_id: str) -> None:
        self.calls += 1
        if self.calls == self.fail_call:
            raise VectorStoreError("connection lost")
        super().delete_chunks(chunk_ids, tenant_id=tenant_id)


def test_a_delete_job_interrupted_mid_way_resumes_and_counts_exactly(
    sessions: sessionmaker[Session],
) -> None:
    store = FailingDeletes(fail_call=2)
    ingest(sessions, store, CORPUS)  # new documents: nothing stale to delete
    store.calls = 0
    job = jobs(
        sessions, lambda j: j.submit_delete(tenant_id=TENANT, filter={"source": {"eq": "wiki"}})
    )
    # One document per batch: the first batch lands, the second fails.
    service = make_service(sessions, store, batch_documents=1)
    with pytest.raises(VectorStoreError):
        service.process_job(job.id)
    halfway = view(sessions, job.id)
    assert (halfway.status, halfway.total, halfway.deleted) == (JobStatus.RUNNING, 2, 1)
    assert len(external_ids(store) & {"w1", "w2"}) == 1

    assert service.process_job(job.id) is JobStatus.SUCCEEDED  # the retry, not re-planned
    done = view(sessions, job.id)
    assert (done.total, done.deleted, done.skipped, done.failed) == (2, 2, 0, 0)
    assert external_ids(store) == {"n1", "n2"}
    ingest(sessions, InMemoryVectorStore(), CORPUS[:2], tenant="fresh")
    assert stats(sessions) == stats(sessions, "fresh")
