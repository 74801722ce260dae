"""The links between a tenant's documents (:class:`~hsearch.db.models.DocumentLink`).

A link is stored by the document ids of both ends; an end resolves when a document row
of that id exists (the join below), so a link to a document not yet ingested, or
deleted, is kept and simply not followed.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import and_, delete, func, select
from sqlalchemy.orm import Session, aliased

from hsearch.db.models import Document, DocumentLink
from hsearch.db.repositories.bulk import insert_rows
from hsearch.db.values import in_values

__all__ = ["GraphEdge", "LinkRepository", "LinkRow", "StoredLink"]


@dataclass(frozen=True, slots=True)
class StoredLink:
    """A link to write: from a document, to another by id (and external id)."""

    source_id: uuid.UUID
    target_id: uuid.UUID
    target_external_id: str
    type: str
    weight: float
    origin: str


@dataclass(frozen=True, slots=True)
class LinkRow:
    """A link as ``GET /v1/documents/{id}/links`` lists it: the document at its other
    end (``None`` title: not indexed, the link unresolved)."""

    external_id: str
    title: str | None
    type: str
    weight: float
    origin: str


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """A resolved link, both ends indexed documents (ids as the chunks' ``document_id``)."""

    source: str
    target: str
    type: str
    weight: float
    source_external_id: str
    target_external_id: str


class LinkRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def replace(
        self,
        tenant_id: str,
        source_ids: Collection[uuid.UUID],
        links: Sequence[StoredLink],
        *,
        origins: Collection[str] | None = None,
    ) -> None:
        """The links of the documents ``source_ids`` (of ``origins`` only, when given)
        replaced by ``links``."""
        self.delete_from(tenant_id, source_ids, origins=origins)
        if links:
            insert_rows(
                self._session,
                DocumentLink,
                [
                    {
                        "tenant_id": tenant_id,
                        "source_id": link.source_id,
                        "target_id": link.target_id,
                        "target_external_id": link.target_external_id,
                        "type": link.type,
                        "weight": link.weight,
                        "origin": link.origin,
                    }
                    for link in links
                ],
            )

    def delete_from(
        self,
        tenant_id: str,
        source_ids: Collection[uuid.UUID],
        *,
        origins: Collection[str] | None = None,
    ) -> int:
        """Delete the links of the documents ``source_ids``; links deleted."""
        if not source_ids:
            return 0
        stmt = delete(DocumentLink).where(
            DocumentLink.tenant_id == tenant_id,
            in_values(DocumentLink.source_id, "ids"),
        )
        if origins is not None:
            stmt = stmt.where(DocumentLink.origin.in_(list(origins)))
        result = self._session.execute(
            stmt, {"ids": list(source_ids)}, execution_options={"synchronize_session": False}
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]  # a CursorResult

    def purge(self, tenant_id: str) -> int:
        """Delete every link of the tenant; links deleted."""
        result = self._session.execute(
            delete(DocumentLink).where(DocumentLink.tenant_id == tenant_id),
            execution_options={"synchronize_session": False},
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]  # a CursorResult

    def stored_from(
        self, tenant_id: str, source_ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, list[StoredLink]]:
        """The links of the documents ``source_ids`` as stored, by source (a source with
        none is left out)."""
        if not source_ids:
            return {}
        stmt = select(
            DocumentLink.source_id,
            DocumentLink.target_id,
            DocumentLink.target_external_id,
            DocumentLink.type,
            DocumentLink.weight,
            DocumentLink.origin,
        ).where(DocumentLink.tenant_id == tenant_id, in_values(DocumentLink.source_id, "ids"))
        found: dict[uuid.UUID, list[StoredLink]] = {}
        for row in self._session.execute(stmt, {"ids": list(source_ids)}):
            link = StoredLink(*row)
            found.setdefault(link.source_id, []).append(link)
        return found

    def out_links(
        self, tenant_id: str, source_id: uuid.UUID, *, types: Collection[str] | None = None
    ) -> list[LinkRow]:
        """The document's links, by type then target; unresolved ones too."""
        target = aliased(Document)
        stmt = (
            select(
                DocumentLink.target_external_id,
                target.title,
                DocumentLink.type,
                DocumentLink.weight,
                DocumentLink.origin,
            )
            .outerjoin(target, target.id == DocumentLink.target_id)
            .where(DocumentLink.tenant_id == tenant_id, DocumentLink.source_id == source_id)
            .order_by(DocumentLink.type, DocumentLink.target_external_id)
        )
        if types is not None:
            stmt = stmt.where(DocumentLink.type.in_(list(types)))
        return [LinkRow(*row) for row in self._session.execute(stmt)]

    def back_links(
        self, tenant_id: str, target_id: uuid.UUID, *, types: Collection[str] | None = None
    ) -> list[LinkRow]:
        """The indexed documents that link to the document, by type then source."""
        source = aliased(Document)
        stmt = (
            select(
                source.external_id,
                source.title,
                DocumentLink.type,
                DocumentLink.weight,
                DocumentLink.origin,
            )
            .join(source, source.id == DocumentLink.source_id)
            .where(DocumentLink.tenant_id == tenant_id, DocumentLink.target_id == target_id)
            .order_by(DocumentLink.type, source.external_id)
        )
        if types is not None:
            stmt = stmt.where(DocumentLink.type.in_(list(types)))
        return [LinkRow(*row) for row in self._session.execute(stmt)]

    def linked(
        self, tenant_id: str, document_ids: Collection[uuid.UUID]
    ) -> dict[uuid.UUID, list[tuple[str, str, float, Document]]]:
        """For each of ``document_ids``, the indexed documents it links to (``out``)
        and from (``in``), as ``(direction, type, weight, document)``, by direction,
        type and external id."""
        if not document_ids:
            return {}
        ids = {"ids": list(document_ids)}
        found: dict[uuid.UUID, list[tuple[str, str, float, Document]]] = {}
        other = aliased(Document)
        for direction, near, far in (
            ("out", DocumentLink.source_id, DocumentLink.target_id),
            ("in", DocumentLink.target_id, DocumentLink.source_id),
        ):
            stmt = (
                select(near, DocumentLink.type, DocumentLink.weight, other)
                .join(other, other.id == far)
                .where(DocumentLink.tenant_id == tenant_id, in_values(near, "ids"))
                .order_by(near, DocumentLink.type, other.external_id)
            )
            for document_id, type_, weight, document in self._session.execute(stmt, ids):
                found.setdefault(document_id, []).append((direction, type_, weight, document))
        return found

    def graph_edges(self, tenant_id: str, *, batch: int = 50_000) -> Iterator[GraphEdge]:
        """Every resolved link of the tenant (both ends indexed), streamed."""
        source = aliased(Document)
        target = aliased(Document)
        stmt = (
            select(
                DocumentLink.source_id,
                DocumentLink.target_id,
                DocumentLink.type,
                DocumentLink.weight,
                source.external_id,
                target.external_id,
            )
            .join(source, source.id == DocumentLink.source_id)
            .join(target, target.id == DocumentLink.target_id)
            .where(DocumentLink.tenant_id == tenant_id)
            .execution_options(yield_per=batch)
        )
        for source_id, target_id, type_, weight, source_ext, target_ext in self._session.execute(
            stmt
        ):
            yield GraphEdge(
                str(source_id), str(target_id), type_, float(weight), source_ext, target_ext
            )

    def count(self, tenant_id: str) -> int:
        """The tenant's links, resolved or not."""
        return int(
            self._session.scalar(
                select(func.count())
                .select_from(DocumentLink)
                .where(DocumentLink.tenant_id == tenant_id)
            )
            or 0
        )

    def orphaned_sources(self, tenant_id: str) -> list[uuid.UUID]:
        """Ids of documents with links but no row (their links outlived them)."""
        stmt = (
            select(DocumentLink.source_id)
            .outerjoin(
                Document,
                and_(Document.id == DocumentLink.source_id, Document.tenant_id == tenant_id),
            )
            .where(DocumentLink.tenant_id == tenant_id, Document.id.is_(None))
            .distinct()
        )
        return list(self._session.scalars(stmt))
