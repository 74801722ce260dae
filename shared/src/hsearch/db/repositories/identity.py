"""The metadata database's identity (one row of ``database_identity``)."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from hsearch.db.models import DatabaseIdentity

__all__ = ["IdentityRepository"]


class IdentityRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def database_id(self) -> uuid.UUID:
        """The database's id: the row the migration made (the oldest, should a copy
        have added another); made now, and flushed, if the row is gone."""
        found = self._session.scalars(
            select(DatabaseIdentity.id).order_by(DatabaseIdentity.created_at).limit(1)
        ).first()
        if found is not None:
            return found
        row = DatabaseIdentity()
        self._session.add(row)
        self._session.flush()
        return row.id
