"""A tenant's documents as clients see them: read one, list them, update the fields that
need no re-encoding, delete one.

A document row exists once a version of it is indexed (:mod:`hsearch.ingestion.worker.indexer`
writes it in the transaction that marks its job item done). A document can also be
*pending*: submitted in a job a worker has not finished. Deleting removes its chunks from
the vector store and its row and statistics from the metadata database together (what is
derived from it: :mod:`hsearch.ingestion.derived`), under the document's row lock (the
lock a worker indexing the same document takes), and marks
the tenant's data changed (``data_generation``, what caches key on). Versions of it still
pending in jobs were submitted before the delete, so they are superseded by it: never
indexed, skipped with the reason, as an older submission is skipped once a newer one
is indexed.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.models import Document, JobItemStatus, JobStatus
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.links import LinkRepository, LinkRow
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import DocumentNotFoundError, DocumentPendingError, InvalidRequestError
from hsearch.graph.links import Link, LinkOrigin, link_problems, merged
from hsearch.ingestion.api.jobs import check_page_limit
from hsearch.ingestion.deletion import remove_documents
from hsearch.ingestion.derived.links import link_row
from hsearch.ingestion.derived.registry import DerivedKinds, standard_kinds
from hsearch.ingestion.ids import content_hash, document_id
from hsearch.ingestion.merge import merge_patch
from hsearch.ingestion.storable import unstorable
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.types import JobKind
from hsearch.vectorstore.filters import FilterNode, matches
from hsearch.vectorstore.protocol import VectorStore

__all__ = [
    "DELETED_AFTER_SUBMISSION",
    "DocumentDeletion",
    "DocumentInclude",
    "DocumentLinks",
    "DocumentPage",
    "DocumentService",
    "DocumentView",
    "LinkedDocument",
    "parse_include",
]

DELETED_AFTER_SUBMISSION = "superseded: the document was deleted after this submission"
"""The error of a pending submission skipped because its document was deleted."""

SCAN_LIMIT = 2000
"""The most documents one restricted list request reads past the cursor: a narrow
token filter over a large tenant then answers a short page (with a cursor) instead of
scanning the whole tenant in one request."""


class DocumentInclude(StrEnum):
    """What a document read may add to its fields (``?include=``)."""

    TEXT = "text"
    """The full text as it was submitted (the indexed version's)."""


def parse_include(values: Sequence[str]) -> frozenset[DocumentInclude]:
    """``?include=`` values (repeated, or comma-separated: ``text``); raises
    InvalidRequestError (422) naming ``include`` and listing what is allowed."""
    allowed = ", ".join(i.value for i in DocumentInclude)
    wanted: set[DocumentInclude] = set()
    for value in (v.strip() for given in values for v in given.split(",")):
        if not value:  # "text," or an empty parameter: nothing more asked for
            continue
        if value not in {i.value for i in DocumentInclude}:
            shown = value if len(value) <= 64 else value[:63] + "…"
            raise InvalidRequestError(f"include: unknown value {shown!r}; allowed: {allowed}")
        wanted.add(DocumentInclude(value))
    return frozenset(wanted)


@dataclass(frozen=True, slots=True)
class DocumentView:
    external_id: str
    status: str
    """``indexed``, or ``pending`` when a job holding a version of it is not finished
    (an indexed document may have a newer version pending too: ``pending_jobs``)."""
    title: str
    source: str
    lang: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    chunk_count: int
    pending_jobs: tuple[uuid.UUID, ...]
    created_at: datetime | None
    updated_at: datetime | None
    text: str | None = None
    """The indexed version's full text, when asked for (``None``: not asked, or only
    pending)."""


@dataclass(frozen=True, slots=True)
class LinkedDocument:
    """A document at the other end of a link."""

    external_id: str
    title: str | None
    """``None``: no document of that external id is indexed (the link is unresolved)."""
    type: str
    weight: float
    direction: str
    """``out``: the document links to it; ``in``: it links to the document."""
    origin: str
    """``given`` (submitted, or set by ``PATCH``) or ``text`` (found in the text)."""


@dataclass(frozen=True, slots=True)
class DocumentLinks:
    external_id: str
    out: tuple[LinkedDocument, ...]
    """Its links, resolved or not, by type then target."""
    back: tuple[LinkedDocument, ...]
    """The indexed documents linking to it, by type then source."""


@dataclass(frozen=True, slots=True)
class DocumentDeletion:
    deleted_chunks: int
    """Chunks of the indexed version removed from the store (0: none was indexed)."""
    superseded_jobs: tuple[uuid.UUID, ...]
    """Unfinished jobs whose pending submission of the document will not be indexed."""


@dataclass(frozen=True, slots=True)
class DocumentPage:
    documents: tuple[DocumentView, ...]
    next_cursor: str | None
    """The external id to pass as ``cursor`` for the next page; ``None`` on the last."""


class DocumentService:
    def __init__(
        self,
        sessions: SessionFactory,
        *,
        store: VectorStore,
        statistics: LexicalStatistics,
        derived: DerivedKinds | None = None,
    ) -> None:
        """``derived``: what is derived from a document, removed with it (default:
        :func:`~hsearch.ingestion.derived.registry.standard_kinds` on ``store`` and
        ``statistics``)."""
        self._sessions = sessions
        self._store = store
        self._derived = derived or standard_kinds(store=store, statistics=statistics)

    def get(
        self,
        *,
        tenant_id: str,
        external_id: str,
        restriction: FilterNode | None = None,
        include: Collection[DocumentInclude] = (),
    ) -> DocumentView:
        """The document, indexed or pending; raises DocumentNotFoundError (404).

        With ``restriction`` (a scoped search token's filter) only an indexed document
        whose fields pass it is found, without its pending jobs (what a job holds has
        not passed the filter); any other answers 404, as a missing one does. With
        :attr:`DocumentInclude.TEXT` in ``include``, the view holds the indexed
        version's text: the row keeps it whole, as submitted (its chunks' offsets
        point into it, and a reindex re-chunks it)."""
        text = DocumentInclude.TEXT in include
        with self._sessions() as session:
            doc = DocumentRepository(session).get(document_id(tenant_id, external_id))
            if doc is not None and doc.tenant_id != tenant_id:  # ids are per tenant
                doc = None
            if restriction is not None:
                if doc is None or not matches(restriction, doc.filter_fields()):
                    raise DocumentNotFoundError(f"document {external_id!r} not found")
                return _view(doc, external_id=external_id, pending=(), text=text)
            held = JobRepository(session).pending_jobs(tenant_id, [external_id])
            pending = held.get(external_id, ())
            if doc is None and not pending:
                raise DocumentNotFoundError(f"document {external_id!r} not found")
            return _view(doc, external_id=external_id, pending=pending, text=text)

    def links(
        self,
        *,
        tenant_id: str,
        external_id: str,
        types: Collection[str] | None = None,
        restriction: FilterNode | None = None,
    ) -> DocumentLinks:
        """The indexed document's links out (resolved or not) and back (from indexed
        documents), of ``types`` only when given; raises DocumentNotFoundError (404)
        when the document is not indexed. With ``restriction`` (a token's filter) the
        document must pass it, and so must every document listed: an unresolved link
        is not listed then (what it would name is unknown)."""
        doc_id = document_id(tenant_id, external_id)
        with self._sessions() as session:
            doc = DocumentRepository(session).get(doc_id)
            if doc is None or doc.tenant_id != tenant_id:
                raise DocumentNotFoundError(f"document {external_id!r} not found")
            if restriction is not None and not matches(restriction, doc.filter_fields()):
                raise DocumentNotFoundError(f"document {external_id!r} not found")
            repo = LinkRepository(session)
            out = repo.out_links(tenant_id, doc_id, types=types)
            back = repo.back_links(tenant_id, doc_id, types=types)
            if restriction is not None:
                visible = _passing(
                    session, tenant_id, {r.external_id for r in (*out, *back)}, restriction
                )
                out = [r for r in out if r.external_id in visible]
                back = [r for r in back if r.external_id in visible]
        return DocumentLinks(
            external_id=external_id,
            out=tuple(_linked(r, "out") for r in out),
            back=tuple(_linked(r, "in") for r in back),
        )

    def list(
        self,
        *,
        tenant_id: str,
        source: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        restriction: FilterNode | None = None,
    ) -> DocumentPage:
        """The tenant's indexed documents in external id order, ``limit`` per page (1 to
        500), optionally of one ``source``; ``cursor`` is the page before's
        ``next_cursor``. With ``restriction`` (a token's filter), only the documents
        passing it, without pending jobs; such a page may hold fewer than ``limit``
        (at most :data:`SCAN_LIMIT` documents are read per request), and only a
        ``next_cursor`` of ``None`` means the end."""
        check_page_limit(limit)
        if restriction is not None:
            return self._list_restricted(
                tenant_id=tenant_id,
                source=source,
                limit=limit,
                cursor=cursor,
                restriction=restriction,
            )
        with self._sessions() as session:
            docs = DocumentRepository(session).by_external_id(
                tenant_id, source=source, after=cursor, limit=limit + 1
            )
            more = len(docs) > limit
            docs = docs[:limit]
            pending = JobRepository(session).pending_jobs(tenant_id, [d.external_id for d in docs])
            views = tuple(
                _view(d, external_id=d.external_id, pending=pending.get(d.external_id, ()))
                for d in docs
            )
        return DocumentPage(views, next_cursor=docs[-1].external_id if more and docs else None)

    def _list_restricted(
        self,
        *,
        tenant_id: str,
        source: str | None,
        limit: int,
        cursor: str | None,
        restriction: FilterNode,
    ) -> DocumentPage:
        found: list[DocumentView] = []
        scanned = 0
        after = cursor
        with self._sessions() as session:
            documents = DocumentRepository(session)
            while len(found) < limit and scanned < SCAN_LIMIT:
                batch = documents.by_external_id(
                    tenant_id, source=source, after=after, limit=min(500, SCAN_LIMIT - scanned)
                )
                if not batch:
                    return DocumentPage(tuple(found), next_cursor=None)
                for doc in batch:
                    scanned += 1
                    after = doc.external_id
                    if matches(restriction, doc.filter_fields()):
                        found.append(_view(doc, external_id=doc.external_id, pending=()))
                        if len(found) == limit:
                            break
        return DocumentPage(tuple(found), next_cursor=after)

    def update(
        self,
        *,
        tenant_id: str,
        external_id: str,
        source: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        links: Sequence[Link] | None = None,
    ) -> DocumentView:
        """Change the indexed document's ``source``, ``tags`` or ``metadata`` (the fields
        given) on its row and its chunks, without re-encoding it: filters and facets see
        the new values at once. Raises DocumentNotFoundError (404).

        ``source`` and ``tags`` replace the stored values; ``metadata`` is a JSON Merge
        Patch (RFC 7396, :func:`~hsearch.ingestion.merge.merge_patch`) applied to the
        stored metadata under the row lock, so two patches of different keys both hold.
        ``links`` replace the links the document was given (those found in its text
        stay): the graph sees them at once, and a later submission of the document
        replaces them again."""
        problems = [
            problem
            for name, value in (("source", source), ("tags", tags), ("metadata", metadata))
            for problem in unstorable(value, name)
        ]
        if links is not None:
            problems.extend(link_problems(links, source=external_id))
        if problems:
            raise InvalidRequestError.of(problems)
        changes: dict[str, Any] = {}
        if source is not None:
            changes["source"] = source
        if tags is not None:
            changes["tags"] = list(tags)
        with transaction(self._sessions) as session:
            doc = DocumentRepository(session).get_for_update(document_id(tenant_id, external_id))
            if doc is None:
                pending = (
                    JobRepository(session)
                    .pending_jobs(tenant_id, [external_id], kinds=(JobKind.INGEST,))
                    .get(external_id, ())
                )
                if pending:
                    raise DocumentPendingError(
                        f"document {external_id!r} is not indexed yet (pending in job "
                        f"{', '.join(map(str, pending))}): only an indexed document can be "
                        "changed; submit it again with the new fields, or wait for the job"
                    )
                raise DocumentNotFoundError(f"document {external_id!r} not found")
            if metadata is not None:
                # The merged whole goes to the chunks and the row: a partial update of the
                # store replaces the JSON field, it does not merge it.
                changes["metadata"] = merge_patch(doc.metadata_, metadata)
            if changes:
                self._store.update_fields(
                    tenant_id=tenant_id, chunk_ids=list(doc.chunk_ids), fields=changes
                )
                doc.source = changes.get("source", doc.source)
                doc.tags = changes.get("tags", doc.tags)
                doc.metadata_ = changes.get("metadata", doc.metadata_)
                # The hash covers these fields: the same submission later is "unchanged".
                doc.content_hash = content_hash(
                    title=doc.title,
                    text=doc.content,
                    source=doc.source,
                    lang=doc.lang,
                    tags=list(doc.tags),
                    metadata=doc.metadata_,
                )
                TenantRepository(session).bump_generation(tenant_id)
            if links is not None:
                LinkRepository(session).replace(
                    tenant_id,
                    [doc.id],
                    [link_row(tenant_id, doc.id, link, LinkOrigin.GIVEN) for link in merged(links)],
                    origins=(LinkOrigin.GIVEN.value,),
                )
                # Links are not in the row: the same submission as before must be
                # indexed again (it puts its own links back), not found "unchanged".
                doc.content_hash = ""
                TenantRepository(session).bump_generation(tenant_id)
            session.flush()
            held = JobRepository(session).pending_jobs(tenant_id, [external_id])
            return _view(doc, external_id=external_id, pending=held.get(external_id, ()))

    def delete(self, *, tenant_id: str, external_id: str) -> DocumentDeletion:
        """Delete the document: the indexed version's chunks, row and share of the
        tenant's statistics, and the versions pending in unfinished jobs (skipped, with
        :data:`DELETED_AFTER_SUBMISSION`: the delete came after them). Raises
        DocumentNotFoundError (404) when there is neither.

        The jobs are locked first, in id order, then the document, the order a worker
        writing the document takes them: a submission is either indexed before (and its
        version deleted here) or skipped. Chunks go inside the transaction: if the store
        fails nothing changes; if the commit fails after it, the row stays and a second
        delete finishes the job (deleting absent chunks is a no-op).
        """
        doc_id = document_id(tenant_id, external_id)
        with transaction(self._sessions) as session:
            superseded, written = self._supersede_pending(session, tenant_id, external_id, doc_id)
            doc = DocumentRepository(session).get_for_update(doc_id)
            if doc is None and not superseded:
                raise DocumentNotFoundError(f"document {external_id!r} not found")
            deleted_chunks = 0
            if doc is not None:
                deleted_chunks = len(doc.chunk_ids)
                # With what a dead attempt of a skipped submission may have stored: no
                # later write of the document would know of it. Only under the
                # document's row lock: with no row there is nothing to lock on Postgres,
                # and a newer submission being written meanwhile stores chunks of the
                # same ids (those of the same text). Such leftovers of a document never
                # indexed are orphans for reconcile.
                remove_documents(
                    session, [doc], tenant_id=tenant_id, derived=self._derived, attempts=written
                )
            TenantRepository(session).bump_generation(tenant_id)
        return DocumentDeletion(deleted_chunks=deleted_chunks, superseded_jobs=superseded)

    @staticmethod
    def _supersede_pending(
        session: Session, tenant_id: str, external_id: str, doc_id: uuid.UUID
    ) -> tuple[tuple[uuid.UUID, ...], set[str]]:
        """Skip the document's submissions pending in unfinished jobs (each job locked);
        returns those jobs and the chunk ids their attempts recorded."""
        jobs = JobRepository(session)
        superseded: list[uuid.UUID] = []
        written: set[str] = set()
        held = jobs.pending_jobs(tenant_id, [external_id], kinds=(JobKind.INGEST,)).get(
            external_id, ()
        )
        for job_id in sorted(set(held)):
            job = jobs.lock(job_id, tenant_id=tenant_id)
            if job is None or job.status not in (JobStatus.QUEUED, JobStatus.RUNNING):
                continue  # finished since it was read
            items = jobs.pending_items_of(job_id, external_id=external_id)
            for item in items:
                item.status = JobItemStatus.SKIPPED
                item.document_id = doc_id
                item.error = DELETED_AFTER_SUBMISSION
                job.skipped += 1
                written.update(item.chunk_ids or ())
            if items:
                superseded.append(job_id)
        session.flush()
        return tuple(superseded), written


def _linked(row: LinkRow, direction: str) -> LinkedDocument:
    return LinkedDocument(
        external_id=row.external_id,
        title=row.title,
        type=row.type,
        weight=row.weight,
        direction=direction,
        origin=row.origin,
    )


def _passing(
    session: Session, tenant_id: str, external_ids: Collection[str], restriction: FilterNode
) -> set[str]:
    """Which of ``external_ids`` are indexed documents passing ``restriction``."""
    docs = DocumentRepository(session).by_external_ids(tenant_id, list(external_ids))
    return {d.external_id for d in docs if matches(restriction, d.filter_fields())}


def _view(
    doc: Document | None,
    *,
    external_id: str,
    pending: tuple[uuid.UUID, ...],
    text: bool = False,
) -> DocumentView:
    if doc is None:
        return DocumentView(
            external_id=external_id,
            status="pending",
            title="",
            source="",
            lang="",
            tags=(),
            metadata={},
            chunk_count=0,
            pending_jobs=pending,
            created_at=None,
            updated_at=None,
        )
    return DocumentView(
        external_id=doc.external_id,
        status="indexed",
        title=doc.title,
        source=doc.source,
        lang=doc.lang,
        tags=tuple(doc.tags),
        metadata=dict(doc.metadata_),
        chunk_count=doc.chunk_count,
        pending_jobs=pending,
        created_at=doc.created_at,
        updated_at=doc.updated_at,
        text=doc.content if text else None,
    )
