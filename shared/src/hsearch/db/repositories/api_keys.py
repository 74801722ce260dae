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

    def by_prefix_any_tenant(self, prefix: str) -> ApiKey | None:
        """The key whose prefix is ``prefix``, whichever tenant's (or an operator's):
        authentication, which learns the tenant from the key."""
        return self._session.scalar(select(ApiKey).where(ApiKey.prefix == prefix))

    def get(self, key_id: uuid.UUID, *, tenant_id: str) -> ApiKey | None:
        """The tenant's key ``key_id`` (another tenant's is not found)."""
        return self._session.scalar(
            select(ApiKey).where(ApiKey.id == key_id, ApiKey.tenant_id == tenant_id)
        )

    def get_any_tenant(self, key_id: uuid.UUID) -> ApiKey | None:
        """The key ``key_id``, whichever tenant's (or an operator's): a token's parent,
        an operator's session, an operator revoking any key."""
        return self._session.scalar(select(ApiKey).where(ApiKey.id == key_id))

    def list(self, *, tenant_id: str, role: CredentialRole) -> Sequence[ApiKey]:
        """The tenant's keys of ``role``, oldest first."""
        stmt = select(ApiKey).where(ApiKey.role == role, ApiKey.tenant_id == tenant_id)
        return self._session.scalars(stmt.order_by(ApiKey.created_at, ApiKey.id)).all()

    def touch(self, key_id: uuid.UUID, *, at: datetime) -> None:
        self._session.execute(update(ApiKey).where(ApiKey.id == key_id).values(last_used_at=at))


class AuditRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, event: AuditEvent) -> None:
        self._session.add(event)
        self._session.flush()

    def list(self, *, tenant_id: str, limit: int = 100) -> Sequence[AuditEvent]:
        """The tenant's latest events, newest first."""
        stmt = select(AuditEvent).where(AuditEvent.tenant_id == tenant_id)
        return self._session.scalars(stmt.order_by(AuditEvent.id.desc()).limit(limit)).all()

    def list_all_tenants(self, *, limit: int = 100) -> Sequence[AuditEvent]:
        """The latest events of every tenant and of none (operators' own), newest first."""
        stmt = select(AuditEvent)
        return self._session.scalars(stmt.order_by(AuditEvent.id.desc()).limit(limit)).all()
