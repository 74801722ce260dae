"""What a tenant's quotas are checked against: its documents, its recent submissions."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import func, select, union
from sqlalchemy.orm import Session
from sqlalchemy.sql import Subquery

from hsearch.db.engine import hold_write_lock
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus, JobStatus, Tenant
from hsearch.types import JobKind

_ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)


class QuotaRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def lock_tenant(self, tenant_id: str) -> None:
        """Lock the tenant's row for this transaction (on SQLite: the database's write
        lock), so two submissions of one tenant are checked one after the other."""
        hold_write_lock(self._session)
        self._session.execute(select(Tenant.id).where(Tenant.id == tenant_id).with_for_update())

    def _held(self, tenant_id: str) -> Subquery:
        indexed = select(Document.external_id).where(Document.tenant_id == tenant_id)
        pending = (
            select(JobItem.external_id)
            .join(IngestionJob, IngestionJob.id == JobItem.job_id)
            .where(
                IngestionJob.tenant_id == tenant_id,
                IngestionJob.kind == JobKind.INGEST,
                IngestionJob.status.in_(_ACTIVE),
                JobItem.status == JobItemStatus.PENDING,
            )
        )
        return union(indexed, pending).subquery()

    def documents_held(self, tenant_id: str) -> int:
        """Distinct external ids the tenant has indexed or pending in an unfinished job."""
        held = self._held(tenant_id)
        return int(self._session.scalar(select(func.count()).select_from(held)) or 0)

    def already_held(self, tenant_id: str, external_ids: Collection[str]) -> int:
        """How many of ``external_ids`` the tenant holds already (a new version of one
        replaces it: no new document)."""
        if not external_ids:
            return 0
        held = self._held(tenant_id)
        stmt = (
            select(func.count()).select_from(held).where(held.c.external_id.in_(list(external_ids)))
        )
        return int(self._session.scalar(stmt) or 0)

    def submitted_since(self, tenant_id: str, since: datetime) -> list[tuple[datetime, int]]:
        """The tenant's ingest jobs created after ``since``: (created_at, documents),
        oldest first."""
        stmt = (
            select(IngestionJob.created_at, IngestionJob.total)
            .where(
                IngestionJob.tenant_id == tenant_id,
                IngestionJob.kind == JobKind.INGEST,
                IngestionJob.created_at > since,
            )
            .order_by(IngestionJob.created_at)
        )
        return [(created, int(total)) for created, total in self._session.execute(stmt)]
