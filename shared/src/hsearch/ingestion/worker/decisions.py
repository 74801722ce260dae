"""The indexer's decisions, as values: what an item of a job becomes (skipped as
unchanged or superseded, failed, or chunked to be written), how a batch's decided items
are cut into groups, and a finished job's status. No I/O: the write pipeline
(:mod:`hsearch.ingestion.worker.pipeline`) reads what these functions decide on and
writes what they return, and the job runner (:mod:`hsearch.ingestion.worker.indexer`)
ends jobs with :func:`final_status`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from hsearch.db.models import Document, IngestionJob, JobItemStatus, JobStatus
from hsearch.db.repositories.jobs import ItemRow, ItemState
from hsearch.errors import InvalidRequestError
from hsearch.ingestion.chunking import Chunk
from hsearch.ingestion.derived.protocol import DerivedDocument
from hsearch.ingestion.ids import chunk_id

__all__ = [
    "BatchRead",
    "Chunked",
    "Decision",
    "ItemDecisions",
    "PreparedItem",
    "chunk_ids_of",
    "current",
    "decide_items",
    "document_row",
    "failed",
    "final_status",
    "groups",
    "newer_indexed",
    "pending",
    "superseded",
    "unchanged",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PreparedItem:
    """An item decided to be written: its document's id, chunks and their ids."""

    item: ItemRow  # as read before the decision: what it is used for never changes
    document_id: uuid.UUID
    chunks: tuple[str, ...]
    offsets: tuple[tuple[int, int], ...]
    chunk_ids: tuple[str, ...]

    @property
    def item_id(self) -> int:
        return self.item.id


Chunked = dict[int, list[Chunk] | ValueError | InvalidRequestError]
"""Per item id, its chunks or why it has none."""


@dataclass(frozen=True, slots=True)
class BatchRead:
    """A batch's items, read before its decision locks the job, and the chunks of those
    that would be written as their documents stood then
    (``WritePipeline._chunk_unlocked``)."""

    items: list[ItemRow]
    chunks: Chunked
    document_ids: dict[int, uuid.UUID] = field(default_factory=dict)
    """Per item id, its document's id, for the items read pending."""
    chunk_ids: dict[int, tuple[str, ...]] = field(default_factory=dict)
    """Per item id, the ids of the chunks in :attr:`chunks`."""


@dataclass(frozen=True, slots=True)
class Decision:
    """A batch decided: what is to be encoded and written, and the items left for a
    decision of their own (:func:`decide_items`, ``in_write``)."""

    todo: list[PreparedItem]
    deferred: list[int]


@dataclass(frozen=True, slots=True)
class ItemDecisions:
    """What :func:`decide_items` decided: the items' changes (for
    :meth:`~hsearch.db.repositories.jobs.JobRepository.update_items`) and the batch's
    :class:`Decision`."""

    changes: list[dict[str, Any]]
    decision: Decision


def decide_items(
    job: IngestionJob,
    items: Sequence[ItemRow],
    *,
    ids: Mapping[int, uuid.UUID],
    documents: Mapping[uuid.UUID, Document],
    fingerprint: str,
    read: BatchRead,
    chunk: Callable[[ItemRow], list[Chunk]],
    in_write: bool,
) -> ItemDecisions:
    """Decide each pending item of a batch (``items``, with their document ids ``ids``)
    against its document as ``documents`` holds it: superseded by a newer submission,
    unchanged (skipped, the document's version taken over; left undecided ``in_write``),
    failed (no text to index), or to be written with its chunks (those ``read`` cut
    ahead, else ``chunk``'s). ``job``'s counters count the items skipped and failed."""
    todo: list[PreparedItem] = []
    deferred: list[int] = []
    changes: list[dict[str, Any]] = []
    for item in items:
        doc_id = ids[item.id]
        existing = documents.get(doc_id)
        if newer_indexed(existing, item):
            changes.append(superseded(job, item, doc_id))
            continue
        if unchanged(existing, item, fingerprint):
            if in_write:
                deferred.append(item.id)
                continue
            changes.append({"id": item.id, "status": JobItemStatus.SKIPPED, "document_id": doc_id})
            job.skipped += 1
            # The indexed version is this submission's now: an older one
            # pending elsewhere must not replace it.
            existing.version = max(existing.version, item.id)
            logger.info(
                "ingest.document.skipped job_id=%s external_id=%s", job.id, item.external_id
            )
            continue
        try:
            chunks = read.chunks[item.id] if item.id in read.chunks else chunk(item)
            if isinstance(chunks, Exception):
                raise chunks
        except (ValueError, InvalidRequestError) as exc:
            changes.append(failed(job, item, exc))
            continue
        cids = (
            read.chunk_ids[item.id] if item.id in read.chunk_ids else chunk_ids_of(doc_id, chunks)
        )
        # Committed with the decision, before Milvus sees them: a crash can never
        # leave chunks nobody knows of (the next attempt deletes what it does
        # not rewrite). What a dead attempt of this item wrote, if it chunked
        # otherwise (other settings before a restart), is kept: the write
        # deletes it.
        earlier = set(item.chunk_ids or ()).difference(cids)
        changes.append(
            {"id": item.id, "document_id": doc_id, "chunk_ids": [*cids, *sorted(earlier)]}
        )
        todo.append(
            PreparedItem(
                item=item,
                document_id=doc_id,
                chunks=tuple(c.text for c in chunks),
                offsets=tuple((c.start, c.end) for c in chunks),
                chunk_ids=cids,
            )
        )
    return ItemDecisions(changes=changes, decision=Decision(todo=todo, deferred=deferred))


def document_row(
    item: ItemRow, document: DerivedDocument, *, encoder: str
) -> dict[str, Any] | None:
    """The row of ``document`` (``item``'s version, indexed with ``encoder``, its
    fingerprint) with the columns the derived kinds keep there: its new row's columns,
    or ``None`` when the row it replaces is updated in place."""
    values = {
        "title": item.title,
        "source": item.source,
        "lang": item.lang,
        "tags": list(item.tags),
        "metadata_": dict(item.metadata),
        "content": item.content,
        "content_hash": item.content_hash,
        "chunk_count": len(document.chunks),
        "chunk_ids": list(document.chunk_ids),
        **document.columns,
        "encoder": encoder,
        "version": item.id,
    }
    if document.replaced is not None:
        for key, value in values.items():
            setattr(document.replaced, key, value)
        return None
    values.update(
        id=document.document_id,
        tenant_id=document.tenant_id,
        external_id=item.external_id,
        created_at=document.created_at,
    )
    return values


def groups(todo: list[PreparedItem], *, max_chunks: int) -> list[list[PreparedItem]]:
    """``todo`` in order, cut into groups of at most ``max_chunks`` chunks; a document
    with more chunks than that is a group of its own."""
    out: list[list[PreparedItem]] = []
    size = 0
    for prepared in todo:
        if out and size + len(prepared.chunks) <= max_chunks:
            out[-1].append(prepared)
            size += len(prepared.chunks)
        else:
            out.append([prepared])
            size = len(prepared.chunks)
    return out


def superseded(job: IngestionJob, item: ItemRow, doc_id: uuid.UUID) -> dict[str, Any]:
    """A newer submission of the document is indexed already: this older one is
    skipped (a stale job re-delivered, or jobs run out of order). Returns the item's
    change (:meth:`~hsearch.db.repositories.jobs.JobRepository.update_items`)."""
    job.skipped += 1
    logger.info("ingest.document.superseded job_id=%s external_id=%s", job.id, item.external_id)
    return {
        "id": item.id,
        "status": JobItemStatus.SKIPPED,
        "document_id": doc_id,
        "error": "superseded: a newer submission of this document is indexed",
    }


def failed(job: IngestionJob, item: ItemRow, exc: Exception) -> dict[str, Any]:
    """``item`` failed with ``exc``; returns its change."""
    error = f"{type(exc).__name__}: {exc}"
    job.failed += 1
    logger.warning(
        "ingest.document.failed job_id=%s external_id=%s error=%s",
        job.id,
        item.external_id,
        error,
    )
    return {"id": item.id, "status": JobItemStatus.FAILED, "error": error}


def chunk_ids_of(doc_id: uuid.UUID, chunks: list[Chunk]) -> tuple[str, ...]:
    """The deterministic ids of a document's chunks."""
    return tuple(chunk_id(doc_id, i, c.text) for i, c in enumerate(chunks))


def newer_indexed(existing: Document | None, item: ItemRow) -> bool:
    """Whether ``existing`` holds a submission of the document newer than ``item``."""
    return existing is not None and existing.version > item.id


def unchanged(existing: Document | None, item: ItemRow, fingerprint: str) -> TypeGuard[Document]:
    """Whether ``existing`` already holds ``item``'s content, encoded by this encoder."""
    return (
        existing is not None
        and existing.content_hash == item.content_hash
        and existing.encoder == fingerprint
    )


def current(row: ItemRow, state: ItemState) -> ItemRow:
    """``row`` (read earlier) with its state as ``state`` (read now) has it."""
    if row.status is state.status and row.chunk_ids == state.chunk_ids:
        return row
    return replace(row, status=state.status, chunk_ids=state.chunk_ids)


def pending(item: ItemRow | ItemState) -> bool:
    """Whether ``item`` still waits to be indexed (not done, failed or cancelled)."""
    return item.status is JobItemStatus.PENDING


def final_status(job: IngestionJob) -> JobStatus:
    """A job's status once no item of it is pending."""
    if job.failed == 0:
        return JobStatus.SUCCEEDED
    if job.failed == job.total:
        return JobStatus.FAILED
    return JobStatus.PARTIAL
