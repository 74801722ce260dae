from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from hsearch.ingestion.models import DocumentInput, JobView
from hsearch_api.deps import JobServiceDep, TenantDep
from hsearch_api.schemas.documents import (
    DocumentBatchCreate,
    DocumentCreate,
    ItemErrorRead,
    JobAccepted,
    JobRead,
)

router = APIRouter(prefix="/v1", tags=["ingestion"])


@router.post("/documents", status_code=status.HTTP_202_ACCEPTED)
def create_documents(
    body: DocumentBatchCreate, tenant: TenantDep, jobs: JobServiceDep
) -> JobAccepted:
    """Accept a batch of documents for indexing; answers with the job to poll."""
    view = jobs.submit(tenant_id=tenant, documents=[document_input(d) for d in body.documents])
    return JobAccepted(
        job_id=view.id, status=view.status, total=view.total, status_url=f"/v1/jobs/{view.id}"
    )


@router.get("/jobs/{job_id}")
def read_job(job_id: uuid.UUID, tenant: TenantDep, jobs: JobServiceDep) -> JobRead:
    """Status, counters and per-document errors of an ingestion job."""
    return job_read(jobs.get(job_id, tenant_id=tenant))


def document_input(d: DocumentCreate) -> DocumentInput:
    return DocumentInput(
        external_id=d.external_id,
        text=d.text,
        title=d.title,
        source=d.source,
        lang=d.lang,
        tags=tuple(d.tags),
        metadata=d.metadata,
    )


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
