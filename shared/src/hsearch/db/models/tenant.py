from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base, utcnow


class Tenant(Base):
    """A tenant: the isolation unit (Milvus partition key, metadata scope)."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(256))
    # Bumped whenever the tenant's searchable data changes; cache keys include it.
    data_generation: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
