from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from hsearch.db.models import Tenant


class TenantRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, tenant_id: str) -> Tenant | None:
        return self._session.get(Tenant, tenant_id)

    def add(self, tenant: Tenant) -> None:
        self._session.add(tenant)
        self._session.flush()

    def list(self) -> Sequence[Tenant]:
        return self._session.scalars(select(Tenant).order_by(Tenant.id)).all()

    def ensure(self, tenant_id: str, *, name: str | None = None) -> Tenant:
        tenant = self._session.get(Tenant, tenant_id)
        if tenant is None:
            tenant = Tenant(id=tenant_id, name=name or tenant_id, data_generation=0)
            self._session.add(tenant)
            self._session.flush()
        return tenant

    def bump_generation(self, tenant_id: str) -> None:
        """Mark the tenant's searchable data as changed (cached results go stale)."""
        self._session.execute(
            update(Tenant)
            .where(Tenant.id == tenant_id)
            .values(data_generation=Tenant.data_generation + 1)
        )

    def generation(self, tenant_id: str) -> int:
        value = self._session.scalar(select(Tenant.data_generation).where(Tenant.id == tenant_id))
        return int(value or 0)
