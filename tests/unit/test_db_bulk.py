"""The indexer's per-group writes below the ORM (hsearch.db.repositories.bulk): rows
changed by primary key and inserted by attribute name, as the ORM's bulk paths would,
with one statement for a change every row shares."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, select
from sqlalchemy.orm import Session

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus, Tenant
from hsearch.db.repositories.bulk import insert_rows, update_by_key


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    url = f"sqlite:///{tmp_path / 'bulk.db'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    with create_session_factory(engine)() as session:
        session.add(Tenant(id="t", name="t"))
        session.flush()
        yield session
    engine.dispose()


def _statements(session: Session) -> list[tuple[str, bool]]:
    seen: list[tuple[str, bool]] = []

    def record(_conn: Any, _cursor: Any, statement: str, _params: Any, _ctx: Any, many: bool):  # type: ignore[no-untyped-def]
        seen.append((statement, many))

    event.listen(session.get_bind(), "before_cursor_execute", record)
    return seen


def _items(session: Session, count: int) -> list[int]:
    job = IngestionJob(tenant_id="t", total=count)
    session.add(job)
    session.flush()
    items = [
        JobItem(job=job, ordinal=i, external_id=f"d{i}", content="x", content_hash="h")
        for i in range(count)
    ]
    session.add_all(items)
    session.flush()
    return [item.id for item in items]


def _states(session: Session, ids: list[int]) -> list[tuple[Any, ...]]:
    rows = session.execute(
        select(JobItem.status, JobItem.chunk_ids, JobItem.error)
        .where(JobItem.id.in_(ids))
        .order_by(JobItem.id)
    )
    return [tuple(r) for r in rows]


def test_rows_change_by_key_each_with_its_own_values(session: Session) -> None:
    ids = _items(session, 3)
    seen = _statements(session)
    update_by_key(
        session,
        JobItem,
        [
            {"id": ids[0], "chunk_ids": ["a"], "status": JobItemStatus.PENDING},
            {"id": ids[2], "chunk_ids": ["b", "c"], "status": JobItemStatus.PENDING},
            {"id": ids[1], "status": JobItemStatus.FAILED, "error": "no text"},
        ],
    )
    assert _states(session, ids) == [
        (JobItemStatus.PENDING, ["a"], None),
        (JobItemStatus.FAILED, None, "no text"),
        (JobItemStatus.PENDING, ["b", "c"], None),
    ]
    updates = [many for sql, many in seen if sql.startswith("UPDATE")]
    assert updates == [True, False]  # one executemany per set of attributes


def test_a_change_every_row_shares_is_one_statement(session: Session) -> None:
    ids = _items(session, 5)
    seen = _statements(session)
    update_by_key(session, JobItem, [{"id": i, "status": JobItemStatus.INDEXED} for i in ids[:4]])
    assert [s for s, _, _ in _states(session, ids)] == [JobItemStatus.INDEXED] * 4 + [
        JobItemStatus.PENDING
    ]
    updates = [(sql, many) for sql, many in seen if sql.startswith("UPDATE")]
    assert len(updates) == 1
    assert not updates[0][1]
    assert " IN (" in updates[0][0]


def test_equal_lists_are_one_change_and_unequal_ones_are_not(session: Session) -> None:
    ids = _items(session, 3)
    seen = _statements(session)
    update_by_key(session, JobItem, [{"id": i, "chunk_ids": ["same"]} for i in ids[:2]])
    update_by_key(
        session, JobItem, [{"id": ids[1], "chunk_ids": ["x"]}, {"id": ids[2], "chunk_ids": ["y"]}]
    )
    assert [c for _, c, _ in _states(session, ids)] == [["same"], ["x"], ["y"]]
    assert [many for sql, many in seen if sql.startswith("UPDATE")] == [False, True]


def test_nothing_to_change_runs_nothing(session: Session) -> None:
    seen = _statements(session)
    update_by_key(session, JobItem, [])
    insert_rows(session, Document, [])
    assert seen == []


def test_rows_are_inserted_by_attribute_name_with_the_columns_defaults(session: Session) -> None:
    doc_ids = [uuid.uuid4(), uuid.uuid4()]
    insert_rows(
        session,
        Document,
        [
            {
                "id": doc_ids[0],
                "tenant_id": "t",
                "external_id": "a",
                "content": "text a",
                "content_hash": "ha",
                "metadata_": {"k": 1},  # the attribute of the column "metadata"
            },
            {
                "id": doc_ids[1],
                "tenant_id": "t",
                "external_id": "b",
                "content": "text b",
                "content_hash": "hb",
                "metadata_": {},
                "tags": ["x"],
            },
        ],
    )
    a, b = (session.get(Document, d) for d in doc_ids)
    assert a is not None
    assert b is not None
    assert (a.metadata_, a.tags, a.chunk_count, a.version) == ({"k": 1}, [], 0, 0)
    assert (b.metadata_, b.tags) == ({}, ["x"])
    assert a.created_at is not None
