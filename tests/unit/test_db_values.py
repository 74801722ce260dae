"""``in_values``: a list bound as one parameter selects what an expanding ``IN`` does, on
SQLite here and on Postgres in tests/integration/test_db_values_postgres.py; and
``duplicate_row`` tells a unique violation of a table from other integrity errors."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import not_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import duplicate_row, transaction
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus
from hsearch.db.repositories.bulk import insert_rows, update_by_key
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.db.values import in_values


def check_in_values(sessions: sessionmaker[Session], tenant: str) -> None:
    """Integer and UUID columns, negated, empty lists, an update by a list of keys, and
    the indexer's reads that use them."""
    docs = [uuid.uuid4() for _ in range(5)]
    with transaction(sessions) as session:
        TenantRepository(session).ensure(tenant)
        job = IngestionJob(tenant_id=tenant)
        session.add(job)
        session.flush()
        items = [
            JobItem(
                job_id=job.id,
                ordinal=i,
                external_id=f"e{i}",
                content="x",
                content_hash="h",
                document_id=doc,
                chunk_ids=[f"c{i}"],
            )
            for i, doc in enumerate(docs)
        ]
        session.add_all(items)
        for i, doc in enumerate(docs[:3]):
            session.add(
                Document(
                    id=doc, tenant_id=tenant, external_id=f"e{i}", content="x", content_hash="h"
                )
            )
        session.flush()
        ids = [item.id for item in items]
        job_id = job.id

    with sessions() as session:

        def item_ids(where: object) -> set[int]:
            stmt = select(JobItem.id).where(JobItem.job_id == job_id, where)  # type: ignore[arg-type]
            return set(session.scalars(stmt))

        by_id = select(JobItem.id).where(in_values(JobItem.id, "ids"))
        assert set(session.scalars(by_id, {"ids": ids[1:3]})) == set(ids[1:3])
        assert set(session.scalars(by_id, {"ids": []})) == set()
        by_document = select(JobItem.id).where(in_values(JobItem.document_id, "docs"))
        assert set(session.scalars(by_document, {"docs": [docs[0], docs[4]]})) == {ids[0], ids[4]}
        others = select(JobItem.id).where(
            JobItem.job_id == job_id, not_(in_values(JobItem.id, "ids"))
        )
        assert set(session.scalars(others, {"ids": ids[:2]})) == set(ids[2:])
        assert set(session.scalars(others, {"ids": []})) == set(ids)
        assert item_ids(JobItem.id.in_(ids[1:3])) == set(ids[1:3])  # as the expanding IN does

        repo = DocumentRepository(session)
        assert set(repo.get_many(docs)) == set(docs[:3])
        assert set(repo.get_many([docs[1], docs[4]])) == {docs[1]}
        jobs = JobRepository(session)
        assert [row.id for row in jobs.item_rows(list(reversed(ids)))] == ids  # in ordinal order
        assert set(jobs.item_states(ids[3:])) == set(ids[3:])
        writers = {docs[0]: ids[0], docs[1]: -1}  # docs[1]'s item is not the writer
        assert jobs.unfinished_chunk_ids_of(writers) == {docs[0]: set(), docs[1]: {"c1"}}

    with transaction(sessions) as session:
        update_by_key(
            session, JobItem, [{"id": i, "status": JobItemStatus.INDEXED} for i in ids[:2]]
        )
    with sessions() as session:
        states = JobRepository(session).item_states(ids)
        assert [states[i].status for i in ids] == [JobItemStatus.INDEXED] * 2 + [
            JobItemStatus.PENDING
        ] * 3


def test_a_list_bound_as_one_parameter_selects_what_in_does(
    sessions: sessionmaker[Session],
) -> None:
    check_in_values(sessions, "t")


def test_a_duplicate_row_is_told_from_other_integrity_errors(
    sessions: sessionmaker[Session],
) -> None:
    with transaction(sessions) as session:
        TenantRepository(session).ensure("t")
    doc = uuid.uuid4()

    def document(external_id: str, doc_id: uuid.UUID = doc, **columns: Any) -> dict[str, Any]:
        return {"id": doc_id, "tenant_id": "t", "external_id": external_id, **columns}

    def integrity_error(*rows: dict[str, Any]) -> IntegrityError:
        session = sessions()
        try:
            with pytest.raises(IntegrityError) as caught:
                insert_rows(
                    session, Document, [{"content": "x", "content_hash": "h", **r} for r in rows]
                )
        finally:
            session.close()
        return caught.value

    keys = ("pk_documents", "uq_documents_tenant_id")
    same_id = integrity_error(document("a"), document("b"))
    assert duplicate_row(same_id, table="documents", constraints=keys)
    same_external_id = integrity_error(document("a"), document("a", uuid.uuid4()))
    assert duplicate_row(same_external_id, table="documents", constraints=keys)
    no_content = integrity_error(document("c", content=None))
    assert not duplicate_row(no_content, table="documents", constraints=keys)
    assert not duplicate_row(no_content, table="job_items", constraints=keys)
