"""A document's links (:mod:`hsearch.graph.links`), kept in ``document_links``.

* **indexing** replaces a document's links by those of the version written (those
  submitted with it), in the transaction that writes its row;
* **deletion** and **tenant purge** remove the document's own links; links to it from
  other documents stay, unresolved until a document of that external id comes back;
* **reindex** changes no link: links do not depend on the encoder;
* **reconcile** finds links of documents that no longer exist (a crash between two
  transactions cannot leave them: they go in the transaction that deletes the row, but
  an operator's SQL could) and deletes them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.repositories.links import LinkRepository, StoredLink
from hsearch.graph.links import LinkOrigin
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.ids import document_id

__all__ = ["LinksDrift", "LinksKind"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LinksDrift:
    tenant_id: str
    orphaned: tuple[uuid.UUID, ...]
    """Documents gone whose links are still stored."""
    kind: str = "links"

    @property
    def clean(self) -> bool:
        return not self.orphaned

    def figures(self) -> dict[str, object]:
        return {"links_of_deleted_documents": len(self.orphaned)}


class LinksKind:
    """The documents' links (module docstring)."""

    name = "links"

    def writer(self, unit: WriteUnit) -> _LinksWriter:
        return _LinksWriter(unit.tenant_id)

    def remove(self, session: Session, removal: Removal) -> None:
        LinkRepository(session).delete_from(
            removal.tenant_id, [doc.id for doc in removal.documents]
        )

    def sweep(self, tenant_id: str) -> None:
        pass  # only rows

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        return {"document_links": LinkRepository(session).purge(tenant_id)}

    def rebuild(self, context: RebuildContext) -> _LinksRebuild:
        return _LinksRebuild()

    def check(self, sessions: SessionFactory, tenant_id: str) -> LinksDrift:
        with sessions() as session:
            orphaned = LinkRepository(session).orphaned_sources(tenant_id)
        return LinksDrift(tenant_id=tenant_id, orphaned=tuple(sorted(orphaned)))

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """The links of the documents gone deleted."""
        if not isinstance(drift, LinksDrift):
            raise TypeError(f"not a drift of the links: {drift!r}")
        with transaction(sessions) as session:
            deleted = LinkRepository(session).delete_from(drift.tenant_id, drift.orphaned)
        logger.warning(
            "reconcile.links_deleted tenant=%s documents=%d links=%d",
            drift.tenant_id,
            len(drift.orphaned),
            deleted,
        )
        return Repair(changed=True)


def stored_links(tenant_id: str, document: DerivedDocument) -> list[StoredLink]:
    """``document``'s links as rows."""
    return [
        StoredLink(
            source_id=document.document_id,
            target_id=document_id(tenant_id, link.target),
            target_external_id=link.target,
            type=link.type,
            weight=link.weight,
            origin=LinkOrigin.GIVEN.value,
        )
        for link in document.links
    ]


class _LinksWriter:
    """Each group's documents' links replaced, in the group's transaction."""

    def __init__(self, tenant_id: str) -> None:
        self._tenant_id = tenant_id

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        links = [row for doc in documents for row in stored_links(self._tenant_id, doc)]
        # Every document's, new ones too: one statement, and nothing can be left over.
        LinkRepository(session).replace(
            self._tenant_id, [doc.document_id for doc in documents], links
        )

    def finish(self, session: Session) -> None:
        pass

    def wait(self) -> BaseException | None:
        return None


class _LinksRebuild:
    """Nothing to rebuild: links do not depend on the encoder."""

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        pass

    def recount(self, document: DerivedDocument) -> None:
        pass

    def commit(self, session: Session) -> None:
        pass
