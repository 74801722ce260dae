"""Finding the links in a tenant's texts again (``hsearch links relink --tenant ID``).

Indexing finds a document's text links against the documents there are then
(:mod:`hsearch.ingestion.derived.links`): a document indexed later is not mentioned by
those before it, a hyperlink to it resolved to nothing, and a change of the tenant's
``text_links`` setting reaches only the documents indexed after it. A relink makes
every document's ``text`` links what indexing it now would: its kinds (its
submission's choice, kept on its row, else the tenant's setting as it is now) looked for
in its stored text, against the names of all the tenant's documents, read once, in the
first page's transaction that needs them. A document whose kinds are now empty loses its
text links; its given links are never touched.

Pages of documents, in id order, each in its own transaction, its rows locked (a worker
indexing one of them meanwhile is waited for, and its version is the one relinked). A
page whose links changed bumps the tenant's data generation in its transaction, so
cached results and the graph leg's graph go stale with it. Running it again changes
nothing (idempotent): links are compared before they are written.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from hsearch.db.engine import SessionFactory, transaction
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.links import LinkRepository, StoredLink
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.graph.extract import MentionRule
from hsearch.graph.links import LinkOrigin
from hsearch.ingestion.derived.links import MENTION_RULE, TextLinkFinder, effective_text_links

__all__ = ["RelinkReport", "Relinker"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RelinkReport:
    tenant_id: str
    documents: int
    """Documents read."""
    searched: int
    """Of them, those whose kinds of text links are not empty (their texts read)."""
    changed: int
    """Documents whose text links changed."""
    links: int
    """Text links the tenant's documents have now."""


class Relinker:
    """Finds a tenant's text links again (module docstring)."""

    def __init__(
        self, sessions: SessionFactory, *, page_size: int = 200, rule: MentionRule = MENTION_RULE
    ) -> None:
        if page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {page_size}")
        self._sessions = sessions
        self._page_size = page_size
        self._rule = rule

    def relink(self, tenant_id: str) -> RelinkReport:
        """Every document of ``tenant_id`` relinked; raises
        :class:`~hsearch.errors.TenantNotFoundError` for an unknown tenant."""
        with self._sessions() as session:
            if TenantRepository(session).get(tenant_id) is None:
                raise TenantNotFoundError(f"tenant {tenant_id!r} not found")
        finder = TextLinkFinder(
            tenant_id, lambda session: DocumentRepository(session).names(tenant_id), rule=self._rule
        )
        documents = searched = changed = links = 0
        after: uuid.UUID | None = None
        while True:
            with transaction(self._sessions) as session:
                page = DocumentRepository(session).link_sources(
                    tenant_id, after=after, limit=self._page_size, for_update=True
                )
                if not page:
                    break
                after = page[-1].id
                # Per page: a change of the setting made meanwhile applies from here on.
                setting = TenantRepository(session).text_links(tenant_id)
                repo = LinkRepository(session)
                stored = repo.stored_from(tenant_id, [doc.id for doc in page])
                replaced: list[uuid.UUID] = []
                rows: list[StoredLink] = []
                for doc in page:
                    kinds = effective_text_links(doc.text_links, setting)
                    held = stored.get(doc.id, [])
                    given = [(x.target_external_id, x.type) for x in held if _given(x)]
                    found = finder.links(
                        session,
                        source_id=doc.id,
                        external_id=doc.external_id,
                        text=doc.content,
                        kinds=kinds,
                        given=given,
                    )
                    searched += bool(kinds)
                    links += len(found)
                    if _key(found) != _key(x for x in held if not _given(x)):
                        replaced.append(doc.id)
                        rows.extend(found)
                documents += len(page)
                if replaced:
                    repo.replace(tenant_id, replaced, rows, origins=(LinkOrigin.TEXT.value,))
                    TenantRepository(session).bump_generation(tenant_id)
                    changed += len(replaced)
        logger.info(
            "links.relinked tenant=%s documents=%d searched=%d changed=%d links=%d",
            tenant_id,
            documents,
            searched,
            changed,
            links,
        )
        return RelinkReport(
            tenant_id=tenant_id,
            documents=documents,
            searched=searched,
            changed=changed,
            links=links,
        )


def _given(link: StoredLink) -> bool:
    return link.origin == LinkOrigin.GIVEN.value


def _key(links: Iterable[StoredLink]) -> set[tuple[str, str, float]]:
    return {(link.target_external_id, link.type, link.weight) for link in links}
