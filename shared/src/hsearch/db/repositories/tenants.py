from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from hsearch.db.base import utcnow
from hsearch.db.models import (
    ApiKey,
    Document,
    IngestionJob,
    JobItem,
    JobItemStatus,
    JobStatus,
    SynonymSet,
    Tenant,
)

NAME_LENGTH = 256


def disambiguated_name(name: str, tenant_id: str) -> str:
    """``name`` made unique by its tenant's id: ``"Acme (t_1f2e)"``, cut to fit the
    column (ids are unique, so this one is too unless someone chose it by hand)."""
    suffix = f" ({tenant_id})"
    return name[: NAME_LENGTH - len(suffix)] + suffix


class TenantRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, tenant_id: str) -> Tenant | None:
        return self._session.get(Tenant, tenant_id)

    def add(self, tenant: Tenant) -> None:
        self._session.add(tenant)
        self._session.flush()

    def list_all_tenants(self) -> Sequence[Tenant]:
        """Every tenant, by id."""
        return self._session.scalars(select(Tenant).order_by(Tenant.id)).all()

    def get_by_name_any_tenant(self, name: str) -> Tenant | None:
        """The tenant named ``name``, if any (names are unique)."""
        return self._session.scalars(select(Tenant).where(Tenant.name == name)).first()

    def ensure(self, tenant_id: str, *, name: str | None = None) -> Tenant:
        """The tenant ``tenant_id``, created if missing, named ``name`` (default: its
        id); a name another tenant holds gets the id appended (``"acme (t_1f2e)"``, as
        migration 0008 renamed duplicates), since names are unique."""
        tenant = self._session.get(Tenant, tenant_id)
        if tenant is None:
            wanted = name or tenant_id
            if self.get_by_name_any_tenant(wanted) is not None:
                wanted = disambiguated_name(wanted, tenant_id)
            tenant = Tenant(id=tenant_id, name=wanted, data_generation=0)
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

    def text_links(self, tenant_id: str) -> list[str]:
        """The kinds of links found in a document's text when its submission does not
        say (the tenant's setting; none for an unknown tenant)."""
        value = self._session.scalar(select(Tenant.text_links).where(Tenant.id == tenant_id))
        return list(value or ())

    def set_text_links(self, tenant_id: str, kinds: Sequence[str]) -> None:
        """Set the tenant's :meth:`text_links` (stored as ``NULL`` when empty)."""
        self._session.execute(
            update(Tenant).where(Tenant.id == tenant_id).values(text_links=list(kinds) or None)
        )

    def data_version(self, tenant_id: str) -> str:
        """The tenant's data generation, qualified by when the tenant was created: a
        tenant deleted and created again, or a database rebuilt, never reuses one
        (``"<generation>.<created_at µs>"``; ``"0.-"`` for an unknown tenant)."""
        row = self._session.execute(
            select(Tenant.data_generation, Tenant.created_at).where(Tenant.id == tenant_id)
        ).first()
        if row is None:
            return "0.-"
        generation, created = row
        stamp = round(created.replace(tzinfo=UTC).timestamp() * 1e6) if created else "-"
        return f"{int(generation or 0)}.{stamp}"

    def generation(self, tenant_id: str) -> int:
        value = self._session.scalar(select(Tenant.data_generation).where(Tenant.id == tenant_id))
        return int(value or 0)

    def cancel_jobs(self, tenant_id: str) -> int:
        """Cancel the tenant's queued and running jobs (their pending items too), so no
        worker writes for it any more; returns how many."""
        active = select(IngestionJob.id).where(
            IngestionJob.tenant_id == tenant_id,
            IngestionJob.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]),
        )
        self._session.execute(
            update(JobItem)
            .where(JobItem.job_id.in_(active), JobItem.status == JobItemStatus.PENDING)
            .values(status=JobItemStatus.CANCELLED)
        )
        result = self._session.execute(
            update(IngestionJob)
            .where(IngestionJob.id.in_(active.scalar_subquery()))
            .values(
                status=JobStatus.CANCELLED,
                finished_at=utcnow(),
                lease_owner=None,
                lease_expires_at=None,
            )
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def purge(self, tenant_id: str) -> dict[str, int]:
        """Delete every row of the tenant, the tenant's own included (the audit log is
        kept: it records what was done, not the tenant's data); rows deleted by table."""
        jobs = select(IngestionJob.id).where(IngestionJob.tenant_id == tenant_id)
        statements = {
            "job_items": delete(JobItem).where(JobItem.job_id.in_(jobs)),
            "ingestion_jobs": delete(IngestionJob).where(IngestionJob.tenant_id == tenant_id),
            "documents": delete(Document).where(Document.tenant_id == tenant_id),
            "synonym_sets": delete(SynonymSet).where(SynonymSet.tenant_id == tenant_id),
            "api_keys": delete(ApiKey).where(ApiKey.tenant_id == tenant_id),
            "tenants": delete(Tenant).where(Tenant.id == tenant_id),
        }
        return {
            table: int(self._session.execute(stmt).rowcount or 0)  # type: ignore[attr-defined]
            for table, stmt in statements.items()
        }
