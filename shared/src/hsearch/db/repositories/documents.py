from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from hsearch.db.engine import hold_write_lock
from hsearch.db.models import Document
from hsearch.db.repositories.bulk import insert_rows
from hsearch.db.values import in_values

# Built once (the indexer reads a group's documents with them): a statement built per
# call coerces each id of its ``IN`` list and computes its cache key again. The ids are
# one parameter (hsearch.db.values).
_MANY = select(Document).where(in_values(Document.id, "ids")).order_by(Document.id)
# Locked rows are read as they are now, also into objects the session holds already.
_MANY_FOR_UPDATE = _MANY.with_for_update().execution_options(populate_existing=True)


@dataclass(frozen=True, slots=True)
class LinkSource:
    """What finding a document's links in its text reads of its row."""

    id: uuid.UUID
    external_id: str
    content: str
    text_links: list[str] | None
    """Its submission's choice of kinds (``None``: the tenant's setting)."""


@dataclass(frozen=True, slots=True)
class ConceptSource:
    """What a tenant's concept index, and the check of its concepts, read of a row."""

    id: uuid.UUID
    external_id: str
    title: str
    lang: str
    chunk_ids: list[str]
    concepts: dict[str, Any] | None
    """``{"v": version, "chunks": [[concept, ...], ...]}``; ``None``: not extracted."""


class DocumentRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, document_id: uuid.UUID) -> Document | None:
        return self._session.get(Document, document_id)

    def get_for_update(self, document_id: uuid.UUID) -> Document | None:
        # Serialises two workers indexing the same document (Postgres: a row lock).
        hold_write_lock(self._session)
        return self._session.scalar(
            select(Document).where(Document.id == document_id).with_for_update()
        )

    def get_many(
        self, document_ids: Collection[uuid.UUID], *, for_update: bool = False
    ) -> dict[uuid.UUID, Document]:
        """The documents of ``document_ids`` that exist, by id; with ``for_update``
        their rows locked, in id order (two workers locking overlapping sets wait for
        each other instead of deadlocking: the statement orders its rows, and locks them
        in that order)."""
        if not document_ids:
            return {}
        stmt = _MANY
        if for_update:
            hold_write_lock(self._session)
            stmt = _MANY_FOR_UPDATE
        return {doc.id: doc for doc in self._session.scalars(stmt, {"ids": list(document_ids)})}

    def insert_all(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert new documents, given as their columns (attribute names), in one
        statement (:func:`~hsearch.db.repositories.bulk.insert_rows`)."""
        insert_rows(self._session, Document, rows)

    def delete_all(self, documents: Sequence[Document]) -> None:
        """Delete ``documents``' rows (loaded and row-locked by the caller), flushed with
        the caller's transaction."""
        for document in documents:
            self._session.delete(document)

    def add(self, document: Document) -> None:
        self._session.add(document)
        self._session.flush()

    def count(self, tenant_id: str) -> int:
        return int(
            self._session.scalar(
                select(func.count()).select_from(Document).where(Document.tenant_id == tenant_id)
            )
            or 0
        )

    def totals(self, tenant_id: str) -> tuple[int, int]:
        """``(documents, chunks)`` of the tenant."""
        n, c = self._session.execute(
            select(func.count(), func.coalesce(func.sum(Document.chunk_count), 0)).where(
                Document.tenant_id == tenant_id
            )
        ).one()
        return int(n), int(c)

    def totals_all_tenants(self) -> dict[str, tuple[int, int]]:
        """``{tenant: (documents, chunks)}`` of every tenant that has documents."""
        stmt = select(
            Document.tenant_id, func.count(), func.coalesce(func.sum(Document.chunk_count), 0)
        ).group_by(Document.tenant_id)
        return {t: (int(n), int(c)) for t, n, c in self._session.execute(stmt)}

    def tenant_page(self, tenant_id: str, *, after: uuid.UUID | None, limit: int) -> list[Document]:
        """The tenant's documents in id order, the first ``limit`` after ``after``."""
        stmt = (
            select(Document)
            .where(Document.tenant_id == tenant_id)
            .order_by(Document.id)
            .limit(limit)
        )
        if after is not None:
            stmt = stmt.where(Document.id > after)
        return list(self._session.scalars(stmt))

    def names(self, tenant_id: str, *, batch: int = 10_000) -> Iterator[tuple[str, str]]:
        """Every document of the tenant as ``(external id, title)``, streamed: the two
        columns only (what links in a text are resolved against)."""
        stmt = (
            select(Document.external_id, Document.title)
            .where(Document.tenant_id == tenant_id)
            .execution_options(yield_per=batch)
        )
        for external_id, title in self._session.execute(stmt):
            yield str(external_id), str(title)

    def concept_sources(
        self, tenant_id: str, *, batch: int = 2_000, versions_only: bool = False
    ) -> Iterator[ConceptSource]:
        """The tenant's documents in id order as :class:`ConceptSource`, streamed;
        ``versions_only``: the concepts' version alone (``{"v": ...}``), not the chunks'
        concepts (what checking them needs)."""
        concepts = Document.concepts["v"].as_string() if versions_only else Document.concepts
        stmt = (
            select(
                Document.id,
                Document.external_id,
                Document.title,
                Document.lang,
                Document.chunk_ids,
                concepts,
            )
            .where(Document.tenant_id == tenant_id)
            .order_by(Document.id)
            .execution_options(yield_per=batch)
        )
        for id_, external_id, title, lang, chunk_ids, found in self._session.execute(stmt):
            value = {"v": found} if versions_only and found is not None else found
            yield ConceptSource(id_, external_id, title, lang, list(chunk_ids or ()), value)

    def link_sources(
        self, tenant_id: str, *, after: uuid.UUID | None, limit: int, for_update: bool = False
    ) -> list[LinkSource]:
        """The tenant's documents in id order, the first ``limit`` after ``after``, as
        :class:`LinkSource`; with ``for_update`` their rows locked (in id order, as
        :meth:`get_many` locks them)."""
        stmt = (
            select(Document.id, Document.external_id, Document.content, Document.text_links)
            .where(Document.tenant_id == tenant_id)
            .order_by(Document.id)
            .limit(limit)
        )
        if after is not None:
            stmt = stmt.where(Document.id > after)
        if for_update:
            hold_write_lock(self._session)
            stmt = stmt.with_for_update()
        return [LinkSource(*row) for row in self._session.execute(stmt)]

    def by_external_id(
        self, tenant_id: str, *, source: str | None, after: str | None, limit: int
    ) -> list[Document]:
        """The tenant's documents in external id order (of one ``source``, if given), the
        first ``limit`` after the external id ``after`` (``None``: from the start)."""
        stmt = (
            select(Document)
            .where(Document.tenant_id == tenant_id)
            .order_by(Document.external_id)
            .limit(limit)
        )
        if source is not None:
            stmt = stmt.where(Document.source == source)
        if after is not None:
            stmt = stmt.where(Document.external_id > after)
        return list(self._session.scalars(stmt))

    def page_all_tenants(
        self, *, after: tuple[str, uuid.UUID] | None, limit: int
    ) -> list[Document]:
        """Documents of every tenant in ``(tenant_id, id)`` order, the first ``limit``
        after the key ``after`` (``None``: from the start): keyset pages, stable while
        rows change (a rebuild reads the whole table this way)."""
        stmt = select(Document).order_by(Document.tenant_id, Document.id).limit(limit)
        if after is not None:
            stmt = stmt.where(tuple_(Document.tenant_id, Document.id) > tuple_(*after))
        return list(self._session.scalars(stmt))

    def state_all_tenants(self) -> tuple[int, datetime | None]:
        """``(count, latest updated_at)`` over every tenant: it changes when any document
        is added or re-indexed."""
        count, latest = self._session.execute(
            select(func.count(), func.max(Document.updated_at)).select_from(Document)
        ).one()
        return int(count or 0), latest

    def tenant_ids_all_tenants(self) -> set[str]:
        """The tenants that have documents."""
        return set(self._session.scalars(select(Document.tenant_id).distinct()))

    def chunk_ids_by_external_id(self, tenant_id: str) -> list[tuple[str, list[str]]]:
        """Each of the tenant's documents as ``(external id, chunk ids)``."""
        rows = self._session.execute(
            select(Document.external_id, Document.chunk_ids).where(Document.tenant_id == tenant_id)
        )
        return [(external_id, list(chunk_ids or ())) for external_id, chunk_ids in rows]

    def by_external_ids(self, tenant_id: str, external_ids: Collection[str]) -> list[Document]:
        """The tenant's documents of ``external_ids`` that exist."""
        return list(
            self._session.scalars(
                select(Document).where(
                    Document.tenant_id == tenant_id, Document.external_id.in_(external_ids)
                )
            )
        )
