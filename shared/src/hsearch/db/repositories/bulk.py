"""Core statements for the indexer's per-group writes: many rows of one table changed
by primary key, or inserted, in one ``executemany`` each.

The ORM's bulk paths (``session.execute(update(Entity), rows)``, ``insert(Entity)``) do
the same SQL but map every row's attributes to columns and check it against the
mapper in Python, row by row; for the indexer's few columns per row that was most of
the time of its writes (docs/history/ingest-throughput.md, `4be7c00`, "Statements
below the ORM"). These build a statement once per table and set of columns (cached, so
SQLAlchemy compiles it once) and pass the rows as they are, their keys renamed from
attribute to column names.
Objects loaded in the session are not refreshed, as with the ORM's bulk paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Insert, Table, Update, bindparam, insert, update
from sqlalchemy.orm import DeclarativeBase, Session

from hsearch.db.values import in_values

_KEY = "pk_"
"""The bound name of the primary key in :func:`update_by_key` (a column's own name is
reserved for the value it is set to)."""


def update_by_key(
    session: Session, entity: type[DeclarativeBase], changes: Sequence[Mapping[str, Any]]
) -> None:
    """Change rows of ``entity`` by primary key: each of ``changes`` holds the key
    (under its attribute name) and the attributes that change. One ``executemany`` per
    set of attributes."""
    key, columns = _primary_key(entity), _columns(entity)
    by_attributes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for change in changes:
        attributes = tuple(sorted(a for a in change if a != key))
        by_attributes.setdefault(attributes, []).append(
            {_KEY if a == key else columns[a]: v for a, v in change.items()}
        )
    for rows in by_attributes.values():
        values = {c: v for c, v in rows[0].items() if c != _KEY}
        if len(rows) > 1 and all(all(row[c] == v for c, v in values.items()) for row in rows[1:]):
            # The same change for every row (a group's items marked indexed): one
            # statement, its keys one parameter, instead of a parameter set per row.
            session.execute(_update_all(entity), {_KEY: [r[_KEY] for r in rows], **values})
        else:
            session.execute(_update(entity), rows)


def insert_rows(
    session: Session, entity: type[DeclarativeBase], rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert rows of ``entity`` given as their attributes, in one ``executemany`` (per
    set of attributes); the columns' Python defaults fill what a row leaves out."""
    columns = _columns(entity)
    by_attributes: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        by_attributes.setdefault(tuple(sorted(row)), []).append(
            {columns[a]: v for a, v in row.items()}
        )
    for same in by_attributes.values():
        session.execute(_insert(entity), same)


def _table(entity: type[DeclarativeBase]) -> Table:
    table = entity.__table__
    if not isinstance(table, Table):  # a mapped class always has one; for the type checker
        raise TypeError(f"{entity.__name__} is not mapped to a table")
    return table


@lru_cache(maxsize=32)
def _columns(entity: type[DeclarativeBase]) -> dict[str, str]:
    """Attribute name to column name, for ``entity``'s column attributes."""
    mapper = entity.__mapper__
    return {attr.key: attr.columns[0].key for attr in mapper.column_attrs}


@lru_cache(maxsize=32)
def _primary_key(entity: type[DeclarativeBase]) -> str:
    (column,) = _table(entity).primary_key.columns
    return next(a for a, c in _columns(entity).items() if c == column.key)


@lru_cache(maxsize=32)
def _update(entity: type[DeclarativeBase]) -> Update:
    """The row's key bound by name; the columns set are those the rows name (Core's
    ``executemany`` form: SQLAlchemy compiles one statement per set of names)."""
    table = _table(entity)
    (key,) = table.primary_key.columns
    return update(table).where(key == bindparam(_KEY, type_=key.type))


@lru_cache(maxsize=32)
def _update_all(entity: type[DeclarativeBase]) -> Update:
    """The rows' keys bound as one list (an ``IN``, :func:`~hsearch.db.values.in_values`);
    the columns set are those named."""
    table = _table(entity)
    (key,) = table.primary_key.columns
    return update(table).where(in_values(key, _KEY))


@lru_cache(maxsize=32)
def _insert(entity: type[DeclarativeBase]) -> Insert:
    return insert(_table(entity))
