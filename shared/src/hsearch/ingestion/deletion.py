"""Deleting documents: one by its external id (:class:`DocumentService`), or every
document a filter selects, as a job the workers run.

A delete job selects its documents when it starts: the worker evaluates the filter on
each of the tenant's documents (the filter language of search, with the semantics the
store has, :func:`hsearch.vectorstore.filters.matches`) and writes one job item per
match, in the transaction that takes the job's lease. From there it is a job like an
ingest job: batches under the lease, progress per batch, resumable after a crash
(items already deleted are done, the rest are redone), cancellable, with a webhook.
Documents indexed after the job started are not deleted by it. Until it starts its total
is not known, and the API says so (``total: null``) rather than 0; counting at
submission would mean evaluating the filter on every document of the tenant in the
request (the filter language is evaluated in Python, not in SQL), and the count could
still change before the job starts.

Removing a document takes its row lock (the lock a worker indexing it takes), counts it
out of the tenant's statistics, deletes its row and its chunks by primary key; the
chunks go inside the transaction, so if the store fails nothing changes, and if the
commit fails after it, the row stays and the next attempt finishes (deleting absent
chunks is a no-op).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from sqlalchemy.orm import Session

from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.errors import InvalidFilterError, InvalidRequestError
from hsearch.lexical.statistics import LexicalContribution, LexicalStatistics, WeightedDocument
from hsearch.vectorstore.filters import (
    And,
    Comparison,
    Contains,
    Exists,
    FilterNode,
    Membership,
    Not,
    Or,
    matches,
    parse_filter,
)
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["DocumentDeleter", "document_fields", "parse_delete_filter", "remove_document"]

logger = logging.getLogger(__name__)

_CHUNK_ONLY = frozenset({"ordinal"})
"""Filter fields a chunk has and a document has not."""

_PAGE = 1000


def parse_delete_filter(raw: Mapping[str, Any] | None, *, everything: bool) -> FilterNode | None:
    """The filter of a delete job, validated; ``None`` (with ``everything``) deletes
    every document. Raises InvalidFilterError / InvalidRequestError naming the field."""
    node = parse_filter(raw)
    if node is None and not everything:
        msg = (
            'filter: empty, it would select every document; send "all": true (and no '
            "filter) to delete them all"
        )
        raise InvalidRequestError(msg)
    if node is not None and everything:
        raise InvalidRequestError("all: true deletes every document: send it without a filter")
    for name in _field_names(node):
        if name in _CHUNK_ONLY:
            msg = f"filter: {name} is a chunk's field; a delete selects whole documents"
            raise InvalidFilterError(msg)
    return node


def _field_names(node: FilterNode | None) -> Iterator[str]:
    match node:
        case None:
            return
        case And(children) | Or(children):
            for child in children:
                yield from _field_names(child)
        case Not(child):
            yield from _field_names(child)
        case Comparison() | Membership() | Contains() | Exists():
            yield node.ref.spec.name


def document_fields(doc: Document) -> dict[str, object]:
    """A document's filterable fields, as its chunks carry them in the store."""
    return {
        "document_id": str(doc.id),
        "external_id": doc.external_id,
        "source": doc.source,
        "lang": doc.lang,
        "tags": list(doc.tags),
        "created_at": int(doc.created_at.timestamp()),
        "metadata": dict(doc.metadata_),
    }


def remove_document(session: Session, doc: Document, *, statistics: LexicalStatistics) -> list[str]:
    """Count ``doc`` (row-locked by the caller) out of its tenant's statistics and delete
    its row; returns its chunk ids, which the caller deletes from the store before the
    transaction commits."""
    removed = WeightedDocument(
        weights=(),
        contribution=LexicalContribution(),
        replaced=LexicalContribution.of_document(doc),
    )
    statistics.record(session, tenant_id=doc.tenant_id, document=removed)
    chunk_ids = list(doc.chunk_ids)
    session.delete(doc)
    return chunk_ids


class DocumentDeleter:
    """The worker side of a delete job: select its documents, delete them by batch."""

    def __init__(self, *, store: VectorStore, statistics: LexicalStatistics) -> None:
        self._store = store
        self._statistics = statistics

    def plan(self, session: Session, job: IngestionJob) -> int:
        """Write one pending item per document of the job's tenant its filter selects
        (in the caller's transaction); returns how many. The filter was validated at
        submission; a filter this server can no longer parse fails the job."""
        node = parse_filter(job.filter)
        docs = DocumentRepository(session)
        selected = 0
        after = None
        while page := docs.tenant_page(job.tenant_id, after=after, limit=_PAGE):
            for doc in page:
                if matches(node, document_fields(doc)):
                    job.items.append(
                        JobItem(
                            ordinal=selected,
                            external_id=doc.external_id,
                            content="",
                            content_hash="",
                            document_id=doc.id,
                            status=JobItemStatus.PENDING,
                        )
                    )
                    selected += 1
            after = page[-1].id
        job.total = selected
        session.flush()
        logger.info("ingest.delete.planned job_id=%s documents=%d", job.id, selected)
        return selected

    def delete(self, session: Session, job: IngestionJob, items: list[JobItem]) -> bool:
        """Delete the documents of ``items`` (pending ones) in the caller's transaction;
        returns whether any was deleted. A document already gone counts as skipped."""
        docs = DocumentRepository(session)
        chunk_ids: list[str] = []
        deleted = False
        # Row locks in document-id order, as the indexer takes them.
        for item in sorted(items, key=lambda i: str(i.document_id)):
            if item.status is not JobItemStatus.PENDING or item.document_id is None:
                continue
            doc = docs.get_for_update(item.document_id)
            if doc is None:
                item.status = JobItemStatus.SKIPPED
                item.error = "already deleted"
                job.skipped += 1
                continue
            chunk_ids.extend(remove_document(session, doc, statistics=self._statistics))
            item.status = JobItemStatus.DELETED
            job.deleted += 1
            deleted = True
        if chunk_ids:
            self._store.delete_chunks(chunk_ids, tenant_id=job.tenant_id)
        session.flush()
        return deleted
