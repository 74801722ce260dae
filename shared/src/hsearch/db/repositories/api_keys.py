from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from hsearch.db.models import ApiKey, AuditEvent
from hsearch.types import CredentialRole


class ApiKeyRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, key: ApiKey) -> None:
        self._session.add(key)
        self._session.flush()

    def by_prefix(self, prefix: str) -> ApiKey | None:
        return self._session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))

    def get(self, key_id: uuid.UUID, *, tenant_id: str | None = None) -> ApiKey | None:
        """The key ``key_id``; with ``tenant_id``, only if it is that tenant's."""
        stmt = select(ApiKey).where(ApiKey.id == key_id)
        if tenant_id is not None:
            stmt = stmt.where(ApiKey.tenant_id == tenant_id)
        return self._session.scalar(stmt)

    def list(self, *, tenant_id: str | None, role: CredentialRole) -> Sequence[ApiKey]:
        """A tenant's keys (or the operators', ``tenant_id`` None), oldest first."""
        stmt = select(ApiKey).where(ApiKey.role == role)
        stmt = stmt.where(
            ApiKey.tenant_id.is_(None) if tenant_id is None else ApiKey.tenant_id == tenant_id
        )
        return self._session.scalars(stmt.order_by(ApiKey.created_at, ApiKey.id)).all()

    def touch(self, key_id: uuid.UUID, *, at: datetime) -> None:
        self._session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=at))


class AuditRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, event: AuditEvent) -> None:
        self._session.add(event)
        self._session.flush()

    def list(self, *, tenant_id: str | None = None, limit: int = 100) -> Sequence[AuditEvent]:
        """The latest events, newest first; of one tenant when ``tenant_id`` is given."""
        stmt = select(AuditEvent)
        if tenant_id is not None:
            stmt = stmt.where(AuditEvent.tenant_id == tenant_id)
        return self._session.scalars(stmt.order_by(AuditEvent.id.desc()).limit(limit)).all()
