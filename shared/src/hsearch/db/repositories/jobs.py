from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hsearch.db.models import IngestionJob, JobItem, JobItemStatus, JobStatus


class JobRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, job: IngestionJob) -> None:
        self._session.add(job)
        self._session.flush()

    def active_count(self) -> int:
        """Jobs of any tenant that are queued or running."""
        active = (JobStatus.QUEUED, JobStatus.RUNNING)
        stmt = select(func.count()).select_from(IngestionJob).where(IngestionJob.status.in_(active))
        return int(self._session.scalar(stmt) or 0)

    def get(self, job_id: uuid.UUID, *, tenant_id: str | None = None) -> IngestionJob | None:
        stmt = select(IngestionJob).where(IngestionJob.id == job_id)
        if tenant_id is not None:
            stmt = stmt.where(IngestionJob.tenant_id == tenant_id)
        return self._session.scalar(stmt)

    def lock(self, job_id: uuid.UUID) -> IngestionJob | None:
        """The job row, locked for this transaction (no-op lock on SQLite)."""
        return self._session.scalar(
            select(IngestionJob).where(IngestionJob.id == job_id).with_for_update()
        )

    def pending_item_ids(self, job_id: uuid.UUID) -> list[int]:
        return list(
            self._session.scalars(
                select(JobItem.id)
                .where(JobItem.job_id == job_id, JobItem.status == JobItemStatus.PENDING)
                .order_by(JobItem.ordinal)
            )
        )

    def written_ids(self, *, started_before: datetime) -> list[uuid.UUID]:
        """Jobs started before ``started_before``, still running with no pending
        item: every chunk written, the job not yet reported finished (it waits for a
        flush)."""
        pending = (
            select(JobItem.id)
            .where(JobItem.job_id == IngestionJob.id, JobItem.status == JobItemStatus.PENDING)
            .exists()
        )
        return list(
            self._session.scalars(
                select(IngestionJob.id).where(
                    IngestionJob.status == JobStatus.RUNNING,
                    IngestionJob.started_at < started_before,
                    ~pending,
                )
            )
        )

    def items(self, item_ids: Sequence[int]) -> list[JobItem]:
        return list(
            self._session.scalars(
                select(JobItem).where(JobItem.id.in_(item_ids)).order_by(JobItem.ordinal)
            )
        )

    def failed_items(self, job_id: uuid.UUID, *, limit: int = 100) -> list[JobItem]:
        return list(
            self._session.scalars(
                select(JobItem)
                .where(JobItem.job_id == job_id, JobItem.status == JobItemStatus.FAILED)
                .order_by(JobItem.ordinal)
                .limit(limit)
            )
        )

    def unfinished_chunk_ids(self, document_id: uuid.UUID, *, exclude: int) -> set[str]:
        """Chunk ids written for ``document_id`` by attempts that never finished."""
        rows = self._session.scalars(
            select(JobItem.chunk_ids).where(
                JobItem.document_id == document_id,
                JobItem.status.in_([JobItemStatus.PENDING, JobItemStatus.FAILED]),
                JobItem.id != exclude,
            )
        )
        return {cid for ids in rows if ids for cid in ids}
