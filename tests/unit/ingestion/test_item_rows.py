"""The job items as the indexer reads and changes them: rows, not ORM objects, changed
by id with one statement per set of attributes."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.models import JobItem, JobItemStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.ingestion.queue import InMemoryJobQueue
from tests.unit.ingestion.test_fairness import submit


def item_ids(sessions: sessionmaker[Session], job_id: uuid.UUID) -> list[int]:
    with sessions() as session:
        return list(
            session.scalars(
                select(JobItem.id).where(JobItem.job_id == job_id).order_by(JobItem.ordinal)
            )
        )


def test_item_rows_hold_what_the_objects_hold(sessions: sessionmaker[Session]) -> None:
    job_id = submit(sessions, InMemoryJobQueue(), "t1", 3)
    ids = item_ids(sessions, job_id)
    with sessions() as session:
        rows = JobRepository(session).item_rows(list(reversed(ids)))
        objects = {i.id: i for i in session.scalars(select(JobItem).where(JobItem.id.in_(ids)))}
    assert [row.id for row in rows] == ids  # submission order, whatever order asked
    for row in rows:
        item = objects[row.id]
        assert (row.external_id, row.title, row.source, row.lang) == (
            item.external_id,
            item.title,
            item.source,
            item.lang,
        )
        assert (row.tags, row.metadata, row.content, row.content_hash) == (
            item.tags,
            item.metadata_,
            item.content,
            item.content_hash,
        )
        assert (row.status, row.chunk_ids) == (JobItemStatus.PENDING, None)


def test_update_items_changes_each_item_by_id_whatever_attributes_it_changes(
    sessions: sessionmaker[Session],
) -> None:
    job_id = submit(sessions, InMemoryJobQueue(), "t1", 4)
    first, second, third, fourth = item_ids(sessions, job_id)
    doc = uuid.uuid4()
    with sessions() as session, session.begin():
        JobRepository(session).update_items(
            [
                {"id": first, "document_id": doc, "chunk_ids": ["a", "b"]},
                {"id": second, "status": JobItemStatus.FAILED, "error": "ValueError: bad"},
                {"id": third, "status": JobItemStatus.INDEXED},
                {"chunk_ids": ["c"], "id": fourth, "document_id": doc},  # same keys, reordered
            ]
        )
    with sessions() as session:
        items = {i.id: i for i in session.scalars(select(JobItem).where(JobItem.job_id == job_id))}
    assert (items[first].status, items[first].document_id, items[first].chunk_ids) == (
        JobItemStatus.PENDING,
        doc,
        ["a", "b"],
    )
    assert (items[second].status, items[second].error, items[second].chunk_ids) == (
        JobItemStatus.FAILED,
        "ValueError: bad",
        None,
    )
    assert (items[third].status, items[third].document_id) == (JobItemStatus.INDEXED, None)
    assert (items[fourth].document_id, items[fourth].chunk_ids) == (doc, ["c"])
