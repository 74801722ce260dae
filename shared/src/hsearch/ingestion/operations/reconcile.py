"""Drift between the metadata database and the vector store, found and repaired
(``hsearch reconcile [--repair]``).

The metadata database records, per indexed document, the ids of its chunks
(``documents.chunk_ids``); the store should hold exactly those. Per tenant:

* **orphans**: chunks the store holds that no document records and no write in flight
  will record (an item of an unfinished job records the ids it is about to write before
  it writes them, so those are left alone). They are searchable and belong to nothing:
  repair deletes them by primary key.
* **missing**: chunks a document records that the store lacks (a lost write, a restored
  backup). The document is incomplete or unsearchable: repair submits it again from its
  stored text, as a job of its own, with its content hash cleared so that the indexer
  does not skip it as unchanged.

Run it with ingestion idle for an exact report; a write that finishes during the scan
can show as drift that is gone on the next run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.engine import transaction
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import JobQueue
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["Drift", "Reconciler"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Drift:
    """One tenant's drift."""

    tenant_id: str
    documents: int
    recorded_chunks: int
    stored_chunks: int
    orphans: tuple[str, ...]
    """Chunk ids in the store that no document records (sorted)."""
    missing: dict[str, int] = field(default_factory=dict)
    """Per external id, how many of the document's chunks the store lacks."""
    repaired: bool = False
    repair_job: uuid.UUID | None = None
    """The (first) job that re-indexes the documents with missing chunks."""

    @property
    def clean(self) -> bool:
        return not self.orphans and not self.missing


class Reconciler:
    def __init__(
        self,
        sessions: sessionmaker[Session],
        *,
        store: VectorStore,
        queue: JobQueue,
        settings: IngestSettings,
    ) -> None:
        self._sessions = sessions
        self._store = store
        self._queue = queue
        self._settings = settings

    def tenants(self) -> list[str]:
        """Every tenant, in id order: those registered (a tenant with no document left
        may still have chunks in the store) and those with documents."""
        with self._sessions() as session:
            registered = {t.id for t in TenantRepository(session).list_all_tenants()}
            holding = set(session.scalars(select(Document.tenant_id).distinct()))
        return sorted(registered | holding)

    def require(self, tenant_ids: Sequence[str]) -> None:
        """Raise TenantNotFoundError naming the first of ``tenant_ids`` that is not a
        tenant (a mistyped id would otherwise report a tenant with nothing, no drift)."""
        known = set(self.tenants())
        for tenant_id in tenant_ids:
            if tenant_id not in known:
                raise TenantNotFoundError(f"tenant {tenant_id!r} not found")

    def check(self, tenant_id: str) -> Drift:
        stored = self._store.tenant_chunk_ids(tenant_id=tenant_id)
        with self._sessions() as session:
            rows = session.execute(
                select(Document.external_id, Document.chunk_ids).where(
                    Document.tenant_id == tenant_id
                )
            ).all()
            in_flight = _in_flight_chunk_ids(session, tenant_id)
        recorded: set[str] = set()
        missing: dict[str, int] = {}
        for external_id, chunk_ids in rows:
            ids = set(chunk_ids or ())
            recorded |= ids
            if lacking := len(ids - stored):
                missing[external_id] = lacking
        orphans = tuple(sorted(stored - recorded - in_flight))
        return Drift(
            tenant_id=tenant_id,
            documents=len(rows),
            recorded_chunks=len(recorded),
            stored_chunks=len(stored),
            orphans=orphans,
            missing=missing,
        )

    def repair(self, drift: Drift) -> Drift:
        """Delete the orphans and submit the documents with missing chunks again."""
        if drift.orphans:
            self._store.delete_chunks(list(drift.orphans), tenant_id=drift.tenant_id)
            with transaction(self._sessions) as session:
                # Searches found the orphans: cached results go stale.
                TenantRepository(session).bump_generation(drift.tenant_id)
            logger.warning(
                "reconcile.orphans_deleted tenant=%s chunks=%d", drift.tenant_id, len(drift.orphans)
            )
        job_id = self._resubmit(drift.tenant_id, sorted(drift.missing)) if drift.missing else None
        return replace(drift, repaired=True, repair_job=job_id)

    def _resubmit(self, tenant_id: str, external_ids: Sequence[str]) -> uuid.UUID:
        """Submit the documents again (in as many jobs as the batch limit needs);
        returns the first job's id."""
        size = self._settings.max_documents_per_request
        jobs = [
            self._resubmit_batch(tenant_id, external_ids[i : i + size])
            for i in range(0, len(external_ids), size)
        ]
        return jobs[0]

    def _resubmit_batch(self, tenant_id: str, external_ids: Sequence[str]) -> uuid.UUID:
        with transaction(self._sessions) as session:
            docs = list(
                session.scalars(
                    select(Document).where(
                        Document.tenant_id == tenant_id, Document.external_id.in_(external_ids)
                    )
                )
            )
            inputs = [
                DocumentInput(
                    external_id=d.external_id,
                    text=d.content,
                    title=d.title,
                    source=d.source,
                    lang=d.lang,
                    tags=tuple(d.tags),
                    metadata=dict(d.metadata_),
                )
                for d in docs
            ]
            for d in docs:
                d.content_hash = ""  # not "unchanged": the indexer writes it again
        with unit_of_work(self._sessions, queue=self._queue) as uow:
            job = JobService(uow, settings=self._settings).submit(
                tenant_id=tenant_id, documents=inputs
            )
        logger.warning(
            "reconcile.resubmitted tenant=%s documents=%d job_id=%s",
            tenant_id,
            len(inputs),
            job.id,
        )
        return job.id


def _in_flight_chunk_ids(session: Session, tenant_id: str) -> set[str]:
    rows = session.scalars(
        select(JobItem.chunk_ids)
        .join(IngestionJob, IngestionJob.id == JobItem.job_id)
        .where(
            IngestionJob.tenant_id == tenant_id,
            IngestionJob.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]),
            JobItem.status == JobItemStatus.PENDING,
        )
    )
    return {cid for ids in rows if ids for cid in ids}
