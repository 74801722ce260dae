"""Declarative base and portable column types (Postgres in production, SQLite embedded)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, Dialect, MetaData
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

# Stable constraint names so Alembic migrations are reproducible on both dialects.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

JSONType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A moment, always read back aware in UTC. Postgres keeps the offset
    (``timestamptz``); SQLite keeps none and would hand back naive datetimes, which the
    API would then send without an offset (not an RFC 3339 date-time). Written in UTC;
    a naive value is taken to be UTC already."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def coerce_compared_value(self, op: Any, value: Any) -> Any:
        # ``column - timedelta`` is date arithmetic: the operand is an interval, as for
        # a plain DateTime column, not a moment to convert.
        return self.impl_instance.coerce_compared_value(op, value)

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: dict[Any, Any] = {  # noqa: RUF012 - SQLAlchemy reads it as a class attribute
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
        list[str]: JSONType,
    }
