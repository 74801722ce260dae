from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query, status

from hsearch.ingestion.api.documents import (
    DocumentLinks,
    DocumentView,
    LinkedDocument,
    parse_include,
)
from hsearch.ingestion.api.jobs import MAX_PAGE
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.types import JobStatus
from hsearch_api.deps import (
    DocumentServiceDep,
    IngestTenantDep,
    JobServiceDep,
    NdjsonBodyDep,
    ReadCallerDep,
)
from hsearch_api.schemas.documents import (
    DocumentBatchCreate,
    DocumentCreate,
    DocumentDeleteByFilter,
    DocumentDeleted,
    DocumentLinksRead,
    DocumentPageRead,
    DocumentPatch,
    DocumentRead,
    EncodingRead,
    ItemErrorRead,
    JobAccepted,
    JobPageRead,
    JobRead,
    LinkedDocumentRead,
    WebhookRead,
)
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses
from hsearch_api.schemas.ndjson import NDJSON_OPENAPI, parse_ndjson

router = APIRouter(prefix="/v1", tags=["ingestion"], responses=COMMON_ERRORS)


@router.post("/documents", status_code=status.HTTP_202_ACCEPTED, responses=error_responses(413))
def create_documents(
    body: DocumentBatchCreate, tenant: IngestTenantDep, jobs: JobServiceDep
) -> JobAccepted:
    """Accept a batch of documents for indexing; answers with the job to poll."""
    view = jobs.submit(
        tenant_id=tenant,
        documents=[document_input(d) for d in body.documents],
        webhook_url=body.webhook_url,
    )
    return job_accepted(view)


@router.post(
    "/documents:delete", status_code=status.HTTP_202_ACCEPTED, responses=error_responses(413)
)
def delete_documents(
    body: DocumentDeleteByFilter, tenant: IngestTenantDep, jobs: JobServiceDep
) -> JobAccepted:
    """Delete every document a filter selects, as a job; answers with the job to poll."""
    view = jobs.submit_delete(
        tenant_id=tenant,
        filter=body.filter,
        everything=body.everything,
        webhook_url=body.webhook_url,
    )
    return job_accepted(view)


@router.post(
    "/documents:ndjson",
    status_code=status.HTTP_202_ACCEPTED,
    openapi_extra=NDJSON_OPENAPI,
    responses=error_responses(413, 415),
)
def upload_documents(
    tenant: IngestTenantDep,  # first: the credential is checked before the body is parsed
    body: NdjsonBodyDep,
    jobs: JobServiceDep,
    webhook_url: Annotated[str | None, Query(max_length=2048)] = None,
) -> JobAccepted:
    """Accept documents as NDJSON, one per line, as one job; errors name the line."""
    upload = parse_ndjson(body)
    view = jobs.submit(
        tenant_id=tenant,
        documents=[document_input(d) for d in upload.documents],
        lines=upload.lines,
        webhook_url=webhook_url,
    )
    return job_accepted(view)


@router.get("/documents")
def list_documents(
    caller: ReadCallerDep,
    documents: DocumentServiceDep,
    source: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> DocumentPageRead:
    """The tenant's indexed documents in external id order, optionally of one source."""
    page = documents.list(
        tenant_id=caller.tenant_id,
        source=source,
        limit=limit,
        cursor=cursor,
        restriction=caller.restriction,
    )
    return DocumentPageRead(
        documents=[document_read(d) for d in page.documents], next_cursor=page.next_cursor
    )


@router.get("/documents/{external_id:path}/links", responses=error_responses(404))
def read_document_links(
    external_id: str,
    caller: ReadCallerDep,
    documents: DocumentServiceDep,
    types: Annotated[
        list[str] | None,
        Query(alias="type", description="Only links of these types (repeat the parameter)."),
    ] = None,
) -> DocumentLinksRead:
    """An indexed document's links: out (resolved or not) and back, by type."""
    links = documents.links(
        tenant_id=caller.tenant_id,
        external_id=external_id,
        types=types,
        restriction=caller.restriction,
    )
    return document_links_read(links)


@router.get("/documents/{external_id:path}", responses=error_responses(404))
def read_document(
    external_id: str,
    caller: ReadCallerDep,
    documents: DocumentServiceDep,
    include: Annotated[
        list[str],
        Query(
            default_factory=list,
            description="What to add to the fields: `text` (the full text as submitted). "
            "Repeat the parameter or separate values with commas; another value is a 422.",
        ),
    ],
) -> DocumentRead:
    """One document: indexed (with its chunk count) or pending in a job."""
    view = documents.get(
        tenant_id=caller.tenant_id,
        external_id=external_id,
        restriction=caller.restriction,
        include=parse_include(include),
    )
    return document_read(view)


@router.patch("/documents/{external_id:path}", responses=error_responses(404, 409, 413))
def update_document(
    external_id: str, body: DocumentPatch, tenant: IngestTenantDep, documents: DocumentServiceDep
) -> DocumentRead:
    """Change an indexed document's source, tags or metadata without re-encoding it."""
    view = documents.update(
        tenant_id=tenant,
        external_id=external_id,
        source=body.source,
        tags=body.tags,
        metadata=body.metadata,
        links=None if body.links is None else [x.link() for x in body.links],
    )
    return document_read(view)


@router.delete("/documents/{external_id:path}", responses=error_responses(404))
def delete_document(
    external_id: str, tenant: IngestTenantDep, documents: DocumentServiceDep
) -> DocumentDeleted:
    """Delete a document: its chunks, its metadata and its statistics, and the versions
    of it still pending in jobs (submitted before the delete: they are skipped)."""
    deletion = documents.delete(tenant_id=tenant, external_id=external_id)
    return DocumentDeleted(
        external_id=external_id,
        deleted_chunks=deletion.deleted_chunks,
        superseded_jobs=list(deletion.superseded_jobs),
    )


@router.get("/jobs")
def list_jobs(
    tenant: IngestTenantDep,
    jobs: JobServiceDep,
    status: JobStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    cursor: str | None = None,
) -> JobPageRead:
    """The tenant's ingestion jobs, newest first, optionally of one status."""
    page = jobs.list(tenant_id=tenant, status=status, limit=limit, cursor=cursor)
    return JobPageRead(jobs=[job_read(j) for j in page.jobs], next_cursor=page.next_cursor)


@router.post("/jobs/{job_id}/cancel", responses=error_responses(404, 409))
def cancel_job(job_id: uuid.UUID, tenant: IngestTenantDep, jobs: JobServiceDep) -> JobRead:
    """Cancel a queued or running job: indexed documents stay, the rest are cancelled."""
    return job_read(jobs.cancel(job_id, tenant_id=tenant))


@router.get("/jobs/{job_id}", responses=error_responses(404))
def read_job(job_id: uuid.UUID, tenant: IngestTenantDep, jobs: JobServiceDep) -> JobRead:
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
        links=tuple(x.link() for x in d.links),
        text_links=None if d.text_links is None else frozenset(d.text_links),
    )


def document_links_read(links: DocumentLinks) -> DocumentLinksRead:
    return DocumentLinksRead(
        external_id=links.external_id,
        out=[linked_read(x) for x in links.out],
        back=[linked_read(x) for x in links.back],
    )


def linked_read(x: LinkedDocument) -> LinkedDocumentRead:
    return LinkedDocumentRead(
        external_id=x.external_id,
        title=x.title,
        type=x.type,
        weight=x.weight,
        direction=x.direction,
        origin=x.origin,
    )


def job_accepted(view: JobView) -> JobAccepted:
    return JobAccepted(
        job_id=view.id, status=view.status, total=view.total, status_url=f"/v1/jobs/{view.id}"
    )


def job_read(view: JobView) -> JobRead:
    return JobRead(
        id=view.id,
        kind=view.kind,
        status=view.status,
        total=view.total,
        indexed=view.indexed,
        skipped=view.skipped,
        failed=view.failed,
        deleted=view.deleted,
        processed=view.processed,
        error=view.error,
        attempts=view.attempts,
        created_at=view.created_at,
        started_at=view.started_at,
        finished_at=view.finished_at,
        searchable_at=view.searchable_at,
        request_id=view.request_id,
        encoding=None
        if view.encoding is None
        else EncodingRead(
            document=view.encoding.external_id,
            done=view.encoding.done,
            total=view.encoding.total,
            updated_at=view.encoding.updated_at,
        ),
        errors=[
            ItemErrorRead(ordinal=e.ordinal, external_id=e.external_id, error=e.error)
            for e in view.errors
        ],
        webhook=None
        if view.webhook is None
        else WebhookRead(
            url=view.webhook.url,
            attempts=view.webhook.attempts,
            delivered_at=view.webhook.delivered_at,
            next_attempt_at=view.webhook.next_attempt_at,
            error=view.webhook.error,
        ),
    )


def document_read(view: DocumentView) -> DocumentRead:
    return DocumentRead(
        external_id=view.external_id,
        status=view.status,
        title=view.title,
        source=view.source,
        lang=view.lang,
        tags=list(view.tags),
        metadata=view.metadata,
        chunk_count=view.chunk_count,
        pending_jobs=list(view.pending_jobs),
        created_at=view.created_at,
        updated_at=view.updated_at,
        text=view.text,
    )
