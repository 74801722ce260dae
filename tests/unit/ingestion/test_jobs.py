"""The job service on SQLite: what a submitted batch writes, what it queues, the limits
it enforces (from settings) and how a job reads back."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.models import IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.errors import InvalidRequestError, JobNotFoundError, PayloadTooLargeError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue

TENANT = "t1"


def docs(*texts: str) -> list[DocumentInput]:
    return [DocumentInput(external_id=f"d{i}", text=t) for i, t in enumerate(texts)]


def submit(
    sessions: sessionmaker[Session],
    documents: list[DocumentInput],
    *,
    settings: IngestSettings | None = None,
    queue: InMemoryJobQueue | None = None,
) -> JobView:
    with unit_of_work(sessions, queue=queue or InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=settings or IngestSettings())
        return jobs.submit(tenant_id=TENANT, documents=documents)


def job_count(sessions: sessionmaker[Session]) -> int:
    with sessions() as s:
        return len(s.scalars(select(IngestionJob.id)).all())


def test_submit_writes_a_queued_job_with_one_item_per_document(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    view = submit(sessions, docs("first", "second"), queue=queue)
    assert (view.tenant_id, view.status, view.total, view.processed) == (
        TENANT,
        JobStatus.QUEUED,
        2,
        0,
    )
    assert view.created_at is not None
    assert queue.sent == [view.id]
    with sessions() as s:
        items = s.scalars(select(JobItem).where(JobItem.job_id == view.id)).all()
    assert [(i.ordinal, i.external_id, i.content, i.status) for i in items] == [
        (0, "d0", "first", JobItemStatus.PENDING),
        (1, "d1", "second", JobItemStatus.PENDING),
    ]


def test_submit_queues_on_the_unit_of_work_and_sends_nothing_itself(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    with unit_of_work(sessions, queue=queue) as uow:
        view = JobService(uow, settings=IngestSettings()).submit(
            tenant_id=TENANT, documents=docs("x")
        )
        assert uow.jobs.job_ids == (view.id,)
        assert queue.sent == []
    assert queue.sent == [view.id]


def test_submit_rejects_duplicates_and_empty_batches(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(InvalidRequestError, match="documents"):
        submit(sessions, [])
    a = DocumentInput(external_id="a", text="Rivers flow to the sea.")
    with pytest.raises(InvalidRequestError, match=r"documents\[1\]"):
        submit(sessions, [a, a])


def test_the_batch_limit_comes_from_settings(sessions: sessionmaker[Session]) -> None:
    settings = IngestSettings(max_documents_per_request=2)
    queue = InMemoryJobQueue()
    with pytest.raises(PayloadTooLargeError, match=r"^documents: at most 2 documents per request"):
        submit(sessions, docs("a", "b", "c"), settings=settings, queue=queue)
    assert (job_count(sessions), queue.sent) == (0, [])
    assert submit(sessions, docs("a", "b"), settings=settings).total == 2


def test_the_document_size_limit_comes_from_settings(sessions: sessionmaker[Session]) -> None:
    settings = IngestSettings(max_document_chars=10)
    with pytest.raises(PayloadTooLargeError, match=r"^documents\[1\]\.text: at most 10 characters"):
        submit(sessions, docs("short", "x" * 11), settings=settings)
    assert job_count(sessions) == 0
    # Characters, not bytes: ten CJK characters are thirty UTF-8 bytes and fit.
    assert submit(sessions, docs("short", "東" * 10), settings=settings).total == 2


def test_text_of_white_space_only_is_refused_naming_the_document(
    sessions: sessionmaker[Session],
) -> None:
    queue = InMemoryJobQueue()
    blank = DocumentInput(external_id="blank", text=" \n\u3000\t")
    ok = DocumentInput(external_id="ok", text="Rivers flow to the sea.")
    with pytest.raises(InvalidRequestError, match=r"^documents\[1\]\.text: only white space"):
        submit(sessions, [ok, blank], queue=queue)
    assert (job_count(sessions), queue.sent) == (0, [])


def test_get_reads_the_job_of_its_own_tenant_only(sessions: sessionmaker[Session]) -> None:
    view = submit(sessions, docs("x"))
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=IngestSettings())
        read = jobs.get(view.id, tenant_id=TENANT)
        assert (read.id, read.status, read.total, read.errors) == (view.id, view.status, 1, ())
        with pytest.raises(JobNotFoundError):
            jobs.get(view.id, tenant_id="someone-else")
        with pytest.raises(JobNotFoundError):
            jobs.get(uuid.uuid4(), tenant_id=TENANT)
        with pytest.raises(JobNotFoundError):
            jobs.cancel(view.id, tenant_id="someone-else")
        assert jobs.get(view.id, tenant_id=TENANT).status is JobStatus.QUEUED
