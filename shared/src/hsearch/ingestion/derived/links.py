"""A document's links (:mod:`hsearch.graph.links`), kept in ``document_links``: those it
was given (origin ``given``) and those found in its text (origin ``text``).

* **indexing** replaces a document's links by those of the version written: the ones
  submitted with it, and the ones :func:`~hsearch.graph.extract.find_links` finds in
  its text when its kinds of text links (its submission's ``text_links``, else the
  tenant's setting, read once per transaction) are not empty; in the transaction that
  writes its row. A link both given and found is kept as given; each (target, type)
  once; at most :data:`~hsearch.graph.links.MAX_LINKS` found in one text;
* **deletion** and **tenant purge** remove the document's own links; links to it from
  other documents stay, unresolved until a document of that external id comes back;
* **reindex** changes no link: links do not depend on the encoder;
* **reconcile** finds links of documents that no longer exist (a crash between two
  transactions cannot leave them: they go in the transaction that deletes the row, but
  an operator's SQL could) and deletes them.

Finding links in a text (:class:`TextLinkFinder`) resolves hyperlinks and looks for
titles among the names of the tenant's documents: those indexed (their external ids and
titles read from the database, two columns) and those of the transaction being written,
so a batch that links among itself resolves, as far as one transaction holds it
(``ingest.groups_per_commit`` groups). The names are read at most once per transaction,
and only when one of its documents has kinds to find. Titles are found as the product's
:class:`~hsearch.graph.extract.MentionRule` says: whole words.

The limit: links are found when their source is indexed, against the documents there
are then. A hyperlink to a document not yet indexed resolves to nothing, and a document
indexed later is not mentioned by the documents indexed before it (nor one of a later
transaction of the same job): they find it once they are indexed again or re-linked
(``hsearch links relink --tenant ID``, :mod:`hsearch.ingestion.operations.relink`),
which is also how a change of the tenant's setting reaches the documents already
indexed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.links import LinkRepository, StoredLink
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.graph.extract import DocumentNames, MentionRule, TitleMentions, find_links
from hsearch.graph.links import MAX_LINKS, Link, LinkOrigin, TextLinks
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.ids import document_id

__all__ = [
    "MENTION_RULE",
    "LinksDrift",
    "LinksKind",
    "TextLinkFinder",
    "effective_text_links",
    "link_row",
    "stored_links",
    "text_links_column",
]

logger = logging.getLogger(__name__)

MENTION_RULE: Final = MentionRule()
"""How titles are found in a text: the product's rule (whole words)."""


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
    """The documents' links (module docstring); ``rule``: how titles are found in a
    text (the product's default unless a deployment or a test says otherwise)."""

    name = "links"

    def __init__(self, *, rule: MentionRule = MENTION_RULE) -> None:
        self._rule = rule

    def writer(self, unit: WriteUnit) -> _LinksWriter:
        return _LinksWriter(unit.tenant_id, rule=self._rule)

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
    """``document``'s given links as rows."""
    return [
        link_row(tenant_id, document.document_id, link, LinkOrigin.GIVEN) for link in document.links
    ]


def link_row(tenant_id: str, source_id: uuid.UUID, link: Link, origin: LinkOrigin) -> StoredLink:
    """``link`` of the document ``source_id`` as its row."""
    return StoredLink(
        source_id=source_id,
        target_id=document_id(tenant_id, link.target),
        target_external_id=link.target,
        type=link.type,
        weight=link.weight,
        origin=origin.value,
    )


def effective_text_links(
    chosen: Collection[str] | None, tenant_setting: Collection[str]
) -> frozenset[TextLinks]:
    """The kinds of links to find in a document's text: its submission's choice
    (``chosen``), else (``None``) the tenant's setting."""
    return frozenset(map(TextLinks, tenant_setting if chosen is None else chosen))


def text_links_column(chosen: Collection[TextLinks] | None) -> list[str] | None:
    """A submission's choice as the document row keeps it (``None``: the tenant's
    setting; ``[]``: none, whatever the setting)."""
    return None if chosen is None else sorted(kind.value for kind in chosen)


class TextLinkFinder:
    """The links found in documents' texts, resolved against one set of names
    (``names``: ``(external id, title)`` pairs, read in the session of the first call
    of :meth:`links` that needs them; the module docstring says which).
    :class:`DocumentNames` is built on first use, :class:`TitleMentions` on the first
    text whose kinds include mentions."""

    def __init__(
        self,
        tenant_id: str,
        names: Callable[[Session], Iterable[tuple[str, str]]],
        *,
        rule: MentionRule = MENTION_RULE,
    ) -> None:
        self._tenant_id = tenant_id
        self._read_names = names
        self._rule = rule
        self._pairs: list[tuple[str, str]] | None = None
        self._names: DocumentNames | None = None
        self._mentions: TitleMentions | None = None

    def links(
        self,
        session: Session,
        *,
        source_id: uuid.UUID,
        external_id: str,
        text: str,
        kinds: Collection[TextLinks],
        given: Iterable[tuple[str, str]] = (),
    ) -> list[StoredLink]:
        """The links ``text`` (the document ``external_id``'s) makes of ``kinds``, as
        rows of origin ``text``: none to a (target, type) in ``given`` (its given links
        win), at most :data:`MAX_LINKS`."""
        if not kinds:
            return []
        names = self._document_names(session)
        mentions = self._title_mentions(session) if TextLinks.MENTIONS in kinds else None
        taken = set(given)
        rows: list[StoredLink] = []
        for found in find_links(
            text, names=names, mentions=mentions, self_id=external_id, kinds=kinds
        ):
            if (found.target, found.type) in taken:
                continue
            taken.add((found.target, found.type))
            link = Link(found.target, found.type, found.weight)
            rows.append(link_row(self._tenant_id, source_id, link, LinkOrigin.TEXT))
            if len(rows) == MAX_LINKS:
                break
        return rows

    def _name_pairs(self, session: Session) -> list[tuple[str, str]]:
        if self._pairs is None:
            self._pairs = list(self._read_names(session))
        return self._pairs

    def _document_names(self, session: Session) -> DocumentNames:
        if self._names is None:
            self._names = DocumentNames(self._name_pairs(session))
        return self._names

    def _title_mentions(self, session: Session) -> TitleMentions:
        if self._mentions is None:
            self._mentions = TitleMentions(self._name_pairs(session), rule=self._rule)
        return self._mentions


class _LinksWriter:
    """Each group's documents' given links replaced in the group's statements; their
    text links found and written once every group is (:meth:`finish`): by then the
    unit's own documents are all known, to resolve links among themselves."""

    def __init__(self, tenant_id: str, *, rule: MentionRule) -> None:
        self._tenant_id = tenant_id
        self._rule = rule
        # By id: a document written twice in one unit has its last version's links.
        self._documents: dict[uuid.UUID, DerivedDocument] = {}

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        links = [row for doc in documents for row in stored_links(self._tenant_id, doc)]
        # Every document's, new ones too: one statement, and nothing can be left over
        # (the text links go too; finish() writes the new version's).
        LinkRepository(session).replace(
            self._tenant_id, [doc.document_id for doc in documents], links
        )
        for doc in documents:
            doc.columns["text_links"] = text_links_column(doc.text_links)
            self._documents[doc.document_id] = doc

    def finish(self, session: Session) -> None:
        setting: list[str] | None = None
        wanted: list[tuple[DerivedDocument, frozenset[TextLinks]]] = []
        for doc in self._documents.values():
            if doc.text_links is None and setting is None:
                setting = TenantRepository(session).text_links(self._tenant_id)
            kinds = effective_text_links(doc.text_links, setting or ())
            if kinds:
                wanted.append((doc, kinds))
        if not wanted:
            return
        unit = list(self._documents.values())

        def names(session: Session) -> Iterable[tuple[str, str]]:
            # The unit's rows are written by now (each group's before the next group);
            # its documents are added from what it writes all the same, so the names
            # never depend on when the rows are flushed.
            titles = dict(DocumentRepository(session).names(self._tenant_id))
            titles.update((doc.external_id, doc.title) for doc in unit)
            return titles.items()

        finder = TextLinkFinder(self._tenant_id, names, rule=self._rule)
        found = [
            row
            for doc, kinds in wanted
            for row in finder.links(
                session,
                source_id=doc.document_id,
                external_id=doc.external_id,
                text=doc.content,
                kinds=kinds,
                given=[(link.target, link.type) for link in doc.links],
            )
        ]
        LinkRepository(session).replace(
            self._tenant_id,
            [doc.document_id for doc, _ in wanted],
            found,
            origins=(LinkOrigin.TEXT.value,),
        )

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
