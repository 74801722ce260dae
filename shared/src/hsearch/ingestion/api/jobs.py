"""The API side of ingestion: jobs as clients see them.

An ingest job is written with one item per submitted document (the payload waits on
the item until it is indexed, see docs/adr/0004-jobs-hold-the-payload-until-indexed.md);
a delete job with its filter only (its items are written when it starts,
:mod:`hsearch.ingestion.deletion`). Either is queued on the unit of work, which sends it
to the workers after the commit. The worker side is :mod:`hsearch.ingestion.worker.indexer`.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from hsearch.config import IngestSettings, QuotaSettings, WebhookSettings
from hsearch.db.base import utcnow
from hsearch.db.models import IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import (
    FieldError,
    InvalidRequestError,
    JobFinishedError,
    JobNotFoundError,
    PayloadTooLargeError,
)
from hsearch.graph.links import link_problems, merged
from hsearch.ingestion.api.quotas import check_submission
from hsearch.ingestion.deletion import parse_delete_filter
from hsearch.ingestion.dispatch import UnitOfWork
from hsearch.ingestion.ids import content_hash
from hsearch.ingestion.models import (
    DocumentInput,
    EncodingProgress,
    ItemError,
    JobPage,
    JobView,
    WebhookView,
)
from hsearch.ingestion.storable import unstorable
from hsearch.ingestion.webhooks import check_webhook_url
from hsearch.lexical.languages import lang_problem
from hsearch.logging import current_request_id
from hsearch.types import JobKind

MAX_PAGE = 500
"""The most rows one page of a list (jobs, documents) holds."""


def check_page_limit(limit: int) -> None:
    """Raise InvalidRequestError naming ``limit`` unless it is between 1 and MAX_PAGE."""
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidRequestError(f"limit: must be between 1 and {MAX_PAGE}")


class JobService:
    """A tenant's jobs, inside one unit of work (the caller's transaction): submit a
    batch (:meth:`submit`) or a delete by filter (:meth:`submit_delete`), cancel one,
    list them and read one. Every call is scoped to the tenant: another tenant's job
    is not found.

    The service writes and flushes; the boundary that opened the unit of work commits
    it and sends the queued jobs.
    """

    def __init__(
        self,
        uow: UnitOfWork,
        *,
        settings: IngestSettings,
        webhooks: WebhookSettings | None = None,
        quotas: QuotaSettings | None = None,
    ) -> None:
        """``webhooks``: how jobs' webhooks are sent (None: no job may have one);
        ``quotas``: the tenants' quotas (None: none)."""
        self._uow = uow
        self._settings = settings
        self._webhooks = webhooks or WebhookSettings()
        self._quotas = quotas or QuotaSettings()

    # Commands: submit, submit_delete, cancel.

    def submit(
        self,
        *,
        tenant_id: str,
        documents: Sequence[DocumentInput],
        webhook_url: str | None = None,
        lines: Sequence[int] | None = None,
    ) -> JobView:
        """Write a job and its items (one per document) and queue it for the workers;
        ``webhook_url`` is called once the job has ended (:mod:`hsearch.ingestion.webhooks`).

        Raises :class:`PayloadTooLargeError` (413), naming the field and the limit, for
        a batch over ``ingest.max_documents_per_request`` or a text longer than
        ``ingest.max_document_chars``, and :class:`InvalidRequestError` (422), naming
        the field, for an empty batch, a text of white space only, an external id
        repeated within the batch or a webhook URL that cannot be called. Nothing is
        written then. Every document's problems are listed in the error's ``errors``;
        the status is 413 when any is over a size limit. A batch that would pass one
        of the tenant's quotas is refused whole with :class:`QuotaExceededError` (429,
        :mod:`hsearch.ingestion.api.quotas`).

        ``lines`` are the NDJSON lines the documents came from (an upload,
        ``POST /v1/documents:ndjson``): errors then name the line and the field
        (``line 7: text``) instead of the position (``documents[6].text``).
        """
        self._validate(documents, lines)
        if webhook_url is not None:
            check_webhook_url(webhook_url, settings=self._webhooks)
        session = self._uow.session
        TenantRepository(session).ensure(tenant_id)
        check_submission(
            session,
            tenant_id=tenant_id,
            external_ids=[d.external_id for d in documents],
            quotas=self._quotas,
            now=utcnow(),
        )
        job = IngestionJob(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            status=JobStatus.QUEUED,
            total=len(documents),
            indexed=0,
            skipped=0,
            failed=0,
            deleted=0,
            attempts=0,
            turn=0,
            webhook_url=webhook_url,
            webhook_attempts=0,
            request_id=current_request_id(),
        )
        job.items = [
            JobItem(
                ordinal=i,
                external_id=doc.external_id,
                title=doc.title,
                source=doc.source,
                lang=doc.lang,
                tags=list(doc.tags),
                metadata_=dict(doc.metadata),
                content=doc.text,
                links=[link.as_json() for link in merged(doc.links)] or None,
                text_links=None if doc.text_links is None else sorted(doc.text_links),
                content_hash=content_hash(
                    title=doc.title,
                    text=doc.text,
                    source=doc.source,
                    lang=doc.lang,
                    tags=list(doc.tags),
                    metadata=doc.metadata,
                    links=[link.as_json() for link in merged(doc.links)],
                    text_links=None if doc.text_links is None else list(doc.text_links),
                ),
                status=JobItemStatus.PENDING,
            )
            for i, doc in enumerate(documents)
        ]
        JobRepository(session).add(job)
        self._uow.jobs.enqueue(job.id, turn=job.turn)
        return _view(job)

    def submit_delete(
        self,
        *,
        tenant_id: str,
        filter: Mapping[str, Any] | None,
        everything: bool = False,
        webhook_url: str | None = None,
    ) -> JobView:
        """Write a delete job for the tenant's documents ``filter`` selects (every
        document with ``everything`` and no filter) and queue it; the documents are
        selected when a worker starts the job (:mod:`hsearch.ingestion.deletion`), so
        the view's ``total`` is ``None`` until then. Raises InvalidFilterError /
        InvalidRequestError (422) naming the field."""
        parse_delete_filter(filter, everything=everything)
        problems = list(unstorable(filter, "filter"))
        if problems:  # the job row keeps it
            raise InvalidRequestError.of(problems)
        if webhook_url is not None:
            check_webhook_url(webhook_url, settings=self._webhooks)
        TenantRepository(self._uow.session).ensure(tenant_id)
        job = IngestionJob(
            id=uuid.uuid4(),
            tenant_id=tenant_id,
            kind=JobKind.DELETE,
            filter=dict(filter or {}),
            status=JobStatus.QUEUED,
            total=0,
            indexed=0,
            skipped=0,
            failed=0,
            deleted=0,
            attempts=0,
            turn=0,
            webhook_url=webhook_url,
            webhook_attempts=0,
            request_id=current_request_id(),
        )
        JobRepository(self._uow.session).add(job)
        self._uow.jobs.enqueue(job.id, turn=job.turn)
        return _view(job)

    def cancel(self, job_id: uuid.UUID, *, tenant_id: str) -> JobView:
        """Cancel a queued or running job: the documents it has indexed stay, the rest
        are marked cancelled and never indexed (a worker checks each document before it
        writes it). Raises JobNotFoundError (404) or JobFinishedError (409)."""
        job = JobRepository(self._uow.session).lock(job_id, tenant_id=tenant_id)
        if job is None:  # another tenant's is not found
            raise JobNotFoundError(f"job {job_id} not found")
        if job.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
            raise JobFinishedError(f"job {job_id} has finished ({job.status}): nothing to cancel")
        for item in job.items:
            if item.status is JobItemStatus.PENDING:
                item.status = JobItemStatus.CANCELLED
        job.status = JobStatus.CANCELLED
        job.finished_at = utcnow()
        job.lease_owner = None
        job.lease_expires_at = None
        self._uow.session.flush()
        return _view(job)

    # Queries: get, list.

    def list(
        self,
        *,
        tenant_id: str,
        status: JobStatus | None = None,
        limit: int = 50,
        cursor: str | None = None,
    ) -> JobPage:
        """The tenant's jobs, newest first, ``limit`` per page (1 to 500); ``cursor`` is
        the ``next_cursor`` of the page before (opaque). Raises InvalidRequestError
        naming ``limit`` or ``cursor``."""
        check_page_limit(limit)
        jobs = JobRepository(self._uow.session).page(
            tenant_id=tenant_id,
            status=status,
            before=_decode_cursor(cursor) if cursor else None,
            limit=limit + 1,
        )
        more = len(jobs) > limit
        jobs = jobs[:limit]
        last = jobs[-1] if jobs and more else None
        return JobPage(
            jobs=tuple(_view(j) for j in jobs),
            next_cursor=_encode_cursor(last.created_at, last.id) if last else None,
        )

    def get(self, job_id: uuid.UUID, *, tenant_id: str) -> JobView:
        """The job's status, counters and first per-document errors; a job of another
        tenant is not found."""
        repo = JobRepository(self._uow.session)
        job = repo.get(job_id, tenant_id=tenant_id)
        if job is None:
            raise JobNotFoundError(f"job {job_id} not found")
        errors = tuple(
            ItemError(ordinal=i.ordinal, external_id=i.external_id, error=i.error or "")
            for i in repo.failed_items(job_id)
        )
        return _view(job, errors=errors)

    def _validate(self, documents: Sequence[DocumentInput], lines: Sequence[int] | None) -> None:
        # The limits are settings, so the request schema cannot state them: checked here,
        # with the same words as a schema error (the field first). Every document's
        # problems are reported at once, so a client fixes a batch in one round.
        if not documents:
            raise InvalidRequestError("documents: at least one document is required")
        if lines is not None and len(lines) != len(documents):
            msg = f"lines: {len(lines)} line numbers for {len(documents)} documents"
            raise ValueError(msg)
        limit = self._settings.max_documents_per_request
        if len(documents) > limit:
            msg = (
                f"documents: at most {limit} documents per request "
                f"(ingest.max_documents_per_request), got {len(documents)}"
            )
            raise PayloadTooLargeError(msg)

        def error(i: int, name: str, message: str) -> FieldError:
            if lines is None:
                return FieldError(field=f"documents[{i}].{name}", message=message)
            return FieldError(field=name, message=message, line=lines[i])

        def position(i: int) -> str:
            return f"documents[{i}]" if lines is None else f"line {lines[i]}"

        max_chars = self._settings.max_document_chars
        too_large: list[FieldError] = []
        invalid: list[FieldError] = []
        seen: dict[str, int] = {}
        for i, doc in enumerate(documents):
            if len(doc.text) > max_chars:
                msg = (
                    f"at most {max_chars} characters (ingest.max_document_chars), "
                    f"got {len(doc.text)}"
                )
                too_large.append(error(i, "text", msg))
            elif not doc.text.strip():
                msg = (
                    f"only white space (external_id {doc.external_id!r}): there is nothing to index"
                )
                invalid.append(error(i, "text", msg))
            invalid.extend(error(i, p.field, p.message) for p in _field_problems(doc))
            if doc.external_id in seen:
                msg = (
                    f"{doc.external_id!r} repeats {position(seen[doc.external_id])} "
                    "in the same batch"
                )
                invalid.append(error(i, "external_id", msg))
            else:
                seen[doc.external_id] = i
        # Over a size limit, the request cannot be taken as it is whatever else is wrong.
        if too_large:
            raise PayloadTooLargeError.of(too_large + invalid)
        if invalid:
            raise InvalidRequestError.of(invalid)


def _field_problems(doc: DocumentInput) -> Iterator[FieldError]:
    """What no store can keep in a document's fields, and a ``lang`` the analyzer does
    not read (``hsearch.lexical.languages``), each naming its field."""
    for name in ("external_id", "title", "text", "source", "lang", "tags", "metadata"):
        yield from unstorable(getattr(doc, name), name)
    lang = lang_problem(doc.lang)
    if lang is not None:
        yield FieldError(field="lang", message=lang)
    yield from link_problems(doc.links, source=doc.external_id)


def _view(job: IngestionJob, *, errors: tuple[ItemError, ...] = ()) -> JobView:
    return JobView(
        id=job.id,
        tenant_id=job.tenant_id,
        kind=job.kind,
        status=job.status,
        total=job.known_total,
        indexed=job.indexed,
        skipped=job.skipped,
        failed=job.failed,
        deleted=job.deleted,
        error=job.error,
        attempts=job.attempts,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        errors=errors,
        request_id=job.request_id,
        encoding=_encoding(job),
        webhook=(
            None
            if job.webhook_url is None
            else WebhookView(
                url=job.webhook_url,
                attempts=job.webhook_attempts,
                delivered_at=job.webhook_delivered_at,
                next_attempt_at=job.webhook_next_at,
                error=job.webhook_error,
            )
        ),
    )


def _encode_cursor(created_at: datetime, job_id: uuid.UUID) -> str:
    raw = f"{created_at.isoformat()}|{job_id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, uuid.UUID]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, job_id = raw.split("|", 1)
        return datetime.fromisoformat(created), uuid.UUID(job_id)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        msg = "cursor: not a cursor this server gave (use next_cursor of the page before)"
        raise InvalidRequestError(msg) from exc


def _encoding(job: IngestionJob) -> EncodingProgress | None:
    """The document being encoded, while the job runs (a job that ended, or that waits
    for its next turn, is encoding nothing)."""
    if (
        job.status is not JobStatus.RUNNING
        or job.between_turns
        or job.encoding_document is None
        or job.encoding_done is None
        or job.encoding_total is None
        or job.encoding_at is None
    ):
        return None
    return EncodingProgress(
        external_id=job.encoding_document,
        done=job.encoding_done,
        total=job.encoding_total,
        updated_at=job.encoding_at,
    )
