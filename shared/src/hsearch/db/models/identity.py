from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base, utcnow

__all__ = ["DatabaseIdentity"]


class DatabaseIdentity(Base):
    """The metadata database's identity: one row, made by the migration that created
    the table. A data directory records the id of the database its vector data belongs
    to (:mod:`hsearch.datadir`); a copy of the database (a backup restored) keeps it,
    another database has its own."""

    __tablename__ = "database_identity"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
