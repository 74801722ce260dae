from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Enum, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column, relationship

from hsearch.db.base import Base, JSONType, utcnow
from hsearch.types import JobKind, JobStatus

__all__ = ["IngestionJob", "JobItem", "JobItemStatus", "JobStatus"]


class JobItemStatus(StrEnum):
    PENDING = "pending"
    INDEXED = "indexed"
    SKIPPED = "skipped"  # same content already indexed
    FAILED = "failed"
    CANCELLED = "cancelled"  # its job was cancelled before it was indexed
    DELETED = "deleted"  # a delete job removed the document


def _enum(cls: type[StrEnum], name: str) -> Enum:
    # Stored as plain strings (no native ENUM type) so adding a status is not a DDL change.
    return Enum(
        cls, name=name, native_enum=False, length=16, values_callable=lambda e: [m.value for m in e]
    )


class IngestionJob(Base):
    __tablename__ = "ingestion_jobs"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    status: Mapped[JobStatus] = mapped_column(
        _enum(JobStatus, "job_status"), default=JobStatus.QUEUED
    )
    kind: Mapped[JobKind] = mapped_column(_enum(JobKind, "job_kind"), default=JobKind.INGEST)
    # A delete job's filter as submitted (hsearch.ingestion.deletion): its items, one per
    # matching document, are written when the job starts. ``{}`` selects every document.
    filter: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=None)
    total: Mapped[int] = mapped_column(Integer, default=0)
    indexed: Mapped[int] = mapped_column(Integer, default=0)
    skipped: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    deleted: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    # Times a worker started the job afresh: its first turn, and each re-run of a turn
    # that was interrupted (a killed worker, a failed attempt, a shutdown). A turn that
    # follows one ended as planned (``between_turns``) is not an attempt.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    between_turns: Mapped[bool] = mapped_column(default=False, server_default="0")
    # Turns started so far. Every message sent for the job carries the value it had
    # when sent, and starts a turn only if the job still has it (the turn then counts):
    # of two messages sent for the same turn (a sweeper's re-send of a job that waited
    # long in the queue, a re-delivery), one runs and the other is dropped
    # (hsearch.ingestion.worker.leases).
    turn: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(default=None)
    finished_at: Mapped[datetime | None] = mapped_column(default=None)
    # When the job was last sent to the workers (None: committed, never sent).
    sent_at: Mapped[datetime | None] = mapped_column(default=None)
    # A running job is leased by the worker running it (hsearch.ingestion.worker.leases): the
    # worker renews the lease while it works, and the sweeper re-sends the job once the
    # lease has expired (the worker died).
    lease_owner: Mapped[str | None] = mapped_column(String(128), default=None)
    lease_expires_at: Mapped[datetime | None] = mapped_column(default=None)
    # Called once the job has ended (hsearch.ingestion.webhooks): delivered, or retried
    # with backoff from ``webhook_next_at`` until it is or the attempts run out.
    webhook_url: Mapped[str | None] = mapped_column(String(2048), default=None)
    webhook_attempts: Mapped[int] = mapped_column(Integer, default=0)
    webhook_next_at: Mapped[datetime | None] = mapped_column(default=None)
    webhook_delivered_at: Mapped[datetime | None] = mapped_column(default=None)
    webhook_error: Mapped[str | None] = mapped_column(Text, default=None)
    # The id of the API request that submitted the job (X-Request-Id, or one the API
    # made): its log lines, the worker's and this row share it (docs/metrics.md, Logs).
    request_id: Mapped[str | None] = mapped_column(String(128), default=None)
    # The document a worker is encoding, as it goes (a document of more chunks than a
    # group, ``ingest.batch_chunks``, is encoded a group at a time): its external id,
    # chunks encoded, chunks in all, and when last reported. What a job whose one
    # document takes minutes shows meanwhile (hsearch.ingestion.worker.indexer).
    encoding_document: Mapped[str | None] = mapped_column(String(512), default=None)
    encoding_done: Mapped[int | None] = mapped_column(Integer, default=None)
    encoding_total: Mapped[int | None] = mapped_column(Integer, default=None)
    encoding_at: Mapped[datetime | None] = mapped_column(default=None)

    items: Mapped[list[JobItem]] = relationship(
        back_populates="job", order_by="JobItem.ordinal", cascade="all, delete-orphan"
    )

    @property
    def known_total(self) -> int | None:
        """``total`` as the API reports it: ``None`` for a delete job that has not
        started, whose documents are selected (and counted) when it starts."""
        if self.kind is JobKind.DELETE and self.started_at is None:
            return None
        return self.total


class JobItem(Base):
    """One submitted document: the payload waits here until it is indexed."""

    __tablename__ = "job_items"
    __table_args__ = (UniqueConstraint("job_id", "ordinal"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    job_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("ingestion_jobs.id", ondelete="CASCADE"), index=True
    )
    ordinal: Mapped[int] = mapped_column(Integer)
    external_id: Mapped[str] = mapped_column(String(512))
    title: Mapped[str] = mapped_column(String(1024), default="")
    source: Mapped[str] = mapped_column(String(512), default="")
    lang: Mapped[str] = mapped_column(String(16), default="")
    tags: Mapped[list[str]] = mapped_column(default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    # The links submitted with the document ({"target", "type", "weight"} each; None:
    # none) and the kinds of links to find in its text (None: the tenant's setting).
    links: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONType, default=None)
    text_links: Mapped[list[str] | None] = mapped_column(JSONType, default=None)
    status: Mapped[JobItemStatus] = mapped_column(
        _enum(JobItemStatus, "job_item_status"), default=JobItemStatus.PENDING
    )
    error: Mapped[str | None] = mapped_column(Text, default=None)
    document_id: Mapped[uuid.UUID | None] = mapped_column(default=None, index=True)
    # Written (and committed) before the chunks go to Milvus: if the attempt dies
    # before the item is marked indexed, the next write of the document knows to
    # delete them. Every id the item's attempts may have written: a retry that chunks
    # differently adds its own, and its write deletes those of the dead attempt.
    chunk_ids: Mapped[list[str] | None] = mapped_column(JSONType, default=None)

    job: Mapped[IngestionJob] = relationship(back_populates="items")
