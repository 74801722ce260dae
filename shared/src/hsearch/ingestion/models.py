"""Domain inputs and outputs of the ingest path."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from hsearch.db.models import JobStatus
from hsearch.graph.links import Link, TextLinks
from hsearch.types import SEARCHABLE_JOB_STATUSES, JobKind


@dataclass(frozen=True, slots=True)
class DocumentInput:
    external_id: str
    text: str
    title: str = ""
    source: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    links: tuple[Link, ...] = ()
    text_links: frozenset[TextLinks] | None = None
    """Which links to find in the text; ``None``: the tenant's setting."""


@dataclass(frozen=True, slots=True)
class ItemError:
    ordinal: int
    external_id: str
    error: str


@dataclass(frozen=True, slots=True)
class WebhookView:
    """Where a job's webhook delivery stands."""

    url: str
    attempts: int
    delivered_at: datetime | None
    next_attempt_at: datetime | None
    """When the next attempt is due; None once delivered or given up (or not yet tried:
    then ``attempts`` is 0)."""
    error: str | None
    """The last attempt's error (``given up after N attempts: ...`` at the end)."""


@dataclass(frozen=True, slots=True)
class EncodingProgress:
    """The document a worker is encoding for a job, a group of chunks at a time."""

    external_id: str
    done: int
    """Chunks encoded so far."""
    total: int
    """Chunks of the document."""
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class JobView:
    id: uuid.UUID
    tenant_id: str
    kind: JobKind
    status: JobStatus
    total: int | None
    """Documents the job holds; ``None`` for a delete job not started yet (its filter
    is evaluated when it starts)."""
    indexed: int
    skipped: int
    failed: int
    deleted: int
    error: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    errors: tuple[ItemError, ...] = ()
    webhook: WebhookView | None = None
    request_id: str | None = None
    """The id of the request that submitted the job (its log lines carry it)."""
    encoding: EncodingProgress | None = None
    """While a worker runs the job: the large document it encodes, and how far."""

    @property
    def processed(self) -> int:
        return self.indexed + self.skipped + self.failed + self.deleted

    @property
    def searchable_at(self) -> datetime | None:
        """When the job's documents became searchable: a job reports ``succeeded`` or
        ``partial`` only once a store flush that began after its last write has run."""
        if self.status in SEARCHABLE_JOB_STATUSES:
            return self.finished_at
        return None


@dataclass(frozen=True, slots=True)
class JobPage:
    jobs: tuple[JobView, ...]
    next_cursor: str | None
    """Where the next page starts; ``None`` on the last page."""
