from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from hsearch.db.engine import transaction
from hsearch.errors import BackendError
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.service import get_job, mark_enqueue_failed, submit_documents
from hsearch_api.deps import JobQueueDep, ServicesDep, SessionDep, TenantDep
from hsearch_api.schemas.documents import DocumentBatchCreate, ItemErrorRead, JobAccepted, JobRead

router = APIRouter(prefix="/v1", tags=["ingestion"])


@router.post("/documents", status_code=status.HTTP_202_ACCEPTED)
def create_documents(
    body: DocumentBatchCreate, tenant: TenantDep, services: ServicesDep, queue: JobQueueDep
) -> JobAccepted:
    """Accept a batch of documents for indexing; answers with the job to poll."""
    docs = [
        DocumentInput(
            external_id=d.external_id,
            text=d.text,
            title=d.title,
            source=d.source,
            lang=d.lang,
            tags=tuple(d.tags),
            metadata=d.metadata,
        )
        for d in body.documents
    ]
    # The job must be committed before a worker can see it: enqueue after commit.
    with transaction(services.sessions) as session:
        job = submit_documents(session, tenant_id=tenant, documents=docs)
        job_id, total, job_status = job.id, job.total, job.status
    try:
        queue.enqueue_job(job_id)
    except BackendError as exc:
        with transaction(services.sessions) as session:
            mark_enqueue_failed(session, job_id=job_id, error=exc.message)
        raise
    return JobAccepted(
        job_id=job_id, status=job_status, total=total, status_url=f"/v1/jobs/{job_id}"
    )


@router.get("/jobs/{job_id}")
def read_job(job_id: uuid.UUID, tenant: TenantDep, session: SessionDep) -> JobRead:
    """Status, counters and per-document errors of an ingestion job."""
    return job_read(get_job(session, job_id=job_id, tenant_id=tenant))


def job_read(view: JobView) -> JobRead:
    return JobRead(
        id=view.id,
        status=view.status,
        total=view.total,
        indexed=view.indexed,
        skipped=view.skipped,
        failed=view.failed,
        processed=view.processed,
        error=view.error,
        attempts=view.attempts,
        created_at=view.created_at,
        started_at=view.started_at,
        finished_at=view.finished_at,
        errors=[
            ItemErrorRead(ordinal=e.ordinal, external_id=e.external_id, error=e.error)
            for e in view.errors
        ],
    )
