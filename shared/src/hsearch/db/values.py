"""``column IN (a list)`` with the list bound as one parameter.

SQLAlchemy's ``in_(bindparam(..., expanding=True))`` binds each value of the list as a
parameter of its own: at every execution it renders the statement again for the list's
length, runs the column type's bind processing per value and fills a parameter per
value. The indexer's reads of a group (its items, their documents, the chunk ids of
unfinished attempts) take a list of about 60 ids each, several times per group; bound
as one parameter, such a read of 62 ids took half the time on SQLite (a group's item
states 0.085 ms instead of 0.17, its unfinished chunk ids 0.09 instead of 0.18;
docs/history/ingest-throughput.md, `e19051c`: statistics once per unit, store writes
sent ahead, lists as one parameter).

:func:`in_values` binds the list as one value the database unpacks: a JSON array read
with ``json_each`` on SQLite, an array compared with ``= ANY`` on Postgres. The
statement's text no longer depends on the list, so it is compiled once. Each value is
processed as the column's type binds it (a UUID as SQLite stores it, say).

No library offers this for both dialects; it is a type and a construct of a few lines.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import orjson
from sqlalchemy import Boolean, String, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import BindParameter, ColumnElement
from sqlalchemy.sql.type_api import TypeEngine
from sqlalchemy.sql.visitors import InternalTraversal
from sqlalchemy.types import TypeDecorator

__all__ = ["InValues", "ValueList", "in_values"]


class ValueList(TypeDecorator[Collection[Any]]):
    """A list of values of ``item`` type bound as one parameter: a JSON array (text) on
    SQLite, each value as ``item`` binds it there; an array of ``item`` on Postgres."""

    impl = String
    cache_ok = True

    def __init__(self, item: TypeEngine[Any]) -> None:
        super().__init__()
        self.item = item

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(ARRAY(self.item))
        return dialect.type_descriptor(String())

    def process_bind_param(self, value: Collection[Any] | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return list(value)
        process = self.item.dialect_impl(dialect).bind_processor(dialect)
        values = [process(v) for v in value] if process else list(value)
        return orjson.dumps(values).decode()


class InValues(ColumnElement[bool]):
    """``column IN (values)``, the values bound as one parameter (:class:`ValueList`)."""

    inherit_cache = True
    type = Boolean()
    # A comparison: rendered as it is in a WHERE clause, not compared with 1.
    _is_implicitly_boolean = True
    _traverse_internals = [  # noqa: RUF012 (SQLAlchemy's attribute, a list by its API)
        ("column", InternalTraversal.dp_clauseelement),
        ("values", InternalTraversal.dp_clauseelement),
    ]

    def __init__(self, column: ColumnElement[Any], name: str) -> None:
        self.column = column
        self.values: BindParameter[Any] = bindparam(name, type_=ValueList(column.type))


def in_values(column: ColumnElement[Any] | QueryableAttribute[Any], name: str) -> InValues:
    """``column IN`` the collection bound as ``name`` when the statement runs."""
    return InValues(column.expression if isinstance(column, QueryableAttribute) else column, name)


@compiles(InValues)
def _json_each(element: InValues, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    values = compiler.process(element.values, **kw)
    # Compiled SQL of a column and of a bound parameter: no value is in the text.
    return f"({column} IN (SELECT value FROM json_each({values})))"  # noqa: S608


@compiles(InValues, "postgresql")
def _any(element: InValues, compiler: SQLCompiler, **kw: Any) -> str:
    column = compiler.process(element.column, **kw)
    values = compiler.process(element.values, **kw)  # psycopg's dialect casts it to the array
    return f"({column} = ANY({values}))"
