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

Removing a document takes its row lock (the lock a worker indexing it takes), removes
what is derived from it (:mod:`hsearch.ingestion.derived`: it is counted out of the
tenant's statistics, its chunks are deleted by primary key) and deletes its row, in one
transaction; the chunks go inside the transaction, so if the store fails nothing
changes, and if the commit fails after it, the row stays and the next attempt finishes
(deleting absent chunks is a no-op).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any

from hsearch.db.engine import Session
from hsearch.db.models import Document, IngestionJob, JobItem, JobItemStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.errors import InvalidFilterError, InvalidRequestError
from hsearch.ingestion.derived.protocol import Removal
from hsearch.ingestion.derived.registry import DerivedKinds
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

__all__ = ["DocumentDeleter", "parse_delete_filter", "remove_documents"]

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


def remove_documents(
    session: Session,
    documents: Sequence[Document],
    *,
    tenant_id: str,
    derived: DerivedKinds,
    attempts: Collection[str] = (),
) -> None:
    """Remove what every derived kind keeps of ``documents`` (row-locked by the caller,
    ``tenant_id``'s) and delete their rows, in the caller's transaction; ``attempts``:
    chunk ids recorded by submissions of them that will never be indexed."""
    derived.remove(
        session, Removal(tenant_id=tenant_id, documents=documents, attempts=frozenset(attempts))
    )
    DocumentRepository(session).delete_all(documents)


class DocumentDeleter:
    """The worker side of a delete job: select its documents, delete them by batch."""

    def __init__(self, *, derived: DerivedKinds) -> None:
        self._derived = derived

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
                if matches(node, doc.filter_fields()):
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
        removed: list[Document] = []
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
            removed.append(doc)
            item.status = JobItemStatus.DELETED
            job.deleted += 1
        # What is derived from them removed once for the batch (the statistics: one
        # change; the chunks: one delete).
        remove_documents(session, removed, tenant_id=job.tenant_id, derived=self._derived)
        session.flush()
        return bool(removed)
