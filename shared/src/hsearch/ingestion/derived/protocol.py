"""A kind of data derived from a document, and what its maintainers hand it.

Five places maintain what is derived from the documents; each calls every registered
kind (:class:`~hsearch.ingestion.derived.registry.DerivedKinds`) at one point of its
work, so a new kind is one registration and its store:

* **indexing** (the worker's write pipeline): per transaction (a *unit* of up to
  ``ingest.groups_per_commit`` groups of documents) a :class:`DerivedWriter`
  (:meth:`DerivedKind.writer`) is told of each group's documents in the transaction,
  before their rows are written (:meth:`DerivedWriter.write_group`), then once before
  the commit (:meth:`DerivedWriter.finish`); what it sent elsewhere is waited for before
  the transaction ends, committed or not (:meth:`DerivedWriter.wait`). A document's
  derived data thus changes in the transaction that writes its row and marks its job
  item done, or not at all;
* **deletion** (one document, or a delete job's batch): :meth:`DerivedKind.remove`, in
  the transaction that deletes the rows, under their row locks;
* **tenant purge**: :meth:`DerivedKind.sweep` outside any transaction, before and after
  the transaction that deletes the tenant's rows, which calls :meth:`DerivedKind.purge`;
* **reindex** (a new collection built from the stored documents): a
  :class:`DerivedRebuild` (:meth:`DerivedKind.rebuild`) is given every document
  re-encoded (:meth:`DerivedRebuild.add`, no transaction open), then, in the
  transaction that switches the live collection, every document again as the rows will
  have it (:meth:`DerivedRebuild.recount`) and the end (:meth:`DerivedRebuild.commit`);
* **reconcile**: :meth:`DerivedKind.check` finds a tenant's drift,
  :meth:`DerivedKind.repair` repairs it (or asks for documents to be indexed again).

Kinds are called in registration order, and a kind may read what those before it set
on a document (:attr:`DerivedDocument.columns`, :attr:`DerivedDocument.reweigh`): the
lexical statistics come before the chunks, whose sparse vectors they weigh.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from hsearch.db.engine import Session, SessionFactory
from hsearch.db.models import Document
from hsearch.embedding.protocol import Embedding, EncoderInfo
from hsearch.graph.links import Link, TextLinks
from hsearch.vectorstore.protocol import VectorStore

__all__ = [
    "DerivedDocument",
    "DerivedKind",
    "DerivedRebuild",
    "DerivedWriter",
    "KindDrift",
    "RebuildContext",
    "Removal",
    "Repair",
    "WriteUnit",
]


@dataclass(slots=True, kw_only=True)
class DerivedDocument:
    """One version of a document, as every kind sees it: being indexed (with its
    chunks' embeddings and the version it replaces), re-encoded by a rebuild, or
    recounted in a rebuild's last transaction (no embeddings)."""

    tenant_id: str
    document_id: uuid.UUID
    external_id: str
    title: str
    source: str
    lang: str
    tags: Sequence[str]
    metadata: Mapping[str, Any]
    content: str
    created_at: datetime
    chunks: Sequence[str]
    """The chunks' texts, in order (verbatim slices of :attr:`content`)."""
    offsets: Sequence[tuple[int, int]]
    chunk_ids: Sequence[str]
    links: Sequence[Link] = ()
    """The links submitted with this version (recounted: none; links are kept as they
    are by a rebuild)."""
    text_links: frozenset[TextLinks] | None = None
    """The kinds of links to find in its text (``None``: the tenant's setting)."""
    embeddings: Sequence[Embedding] = ()
    """The encoder's vectors, one per chunk (none when recounted)."""
    replaced: Document | None = None
    """Indexing: the indexed version this one replaces (its row, locked; read before
    this write changes it), ``None`` for a new document."""
    item_id: int = 0
    """Indexing: the job item this version comes from."""
    attempts: frozenset[str] = frozenset()
    """Indexing: the chunk ids attempts of this item recorded (written, maybe, by an
    attempt that never finished)."""
    columns: dict[str, Any] = field(default_factory=dict)
    """Document row columns a kind keeps there (its share of the document's data, read
    back when the document is replaced or removed): written with the row."""
    reweigh: Callable[[Sequence[Embedding]], Sequence[Embedding]] | None = None
    """Set by a kind that changes the vectors before they are stored (BM25 weights for
    term counts); applied by the kind that stores them, on its own thread."""
    stale_chunks: int = 0
    """Set by the store's kind: chunks of other versions and attempts it deletes (for the
    log)."""

    def stored_vectors(self) -> Sequence[Embedding]:
        """:attr:`embeddings` as the store is to hold them (:attr:`reweigh` applied)."""
        return self.embeddings if self.reweigh is None else self.reweigh(self.embeddings)


@dataclass(frozen=True, slots=True)
class WriteUnit:
    """One transaction of the indexer's: the tenant, the encoder, and the write
    pipeline's threads (one worker each, so a thread runs what it is given in order)."""

    tenant_id: str
    encoder: EncoderInfo
    thread: Callable[[str], Executor]


class DerivedWriter(Protocol):
    """A kind's writes in one of the indexer's transactions (:class:`WriteUnit`)."""

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        """A group's documents, in ``session`` (which holds their rows locked), before
        their rows are written: change what the kind keeps, or note it for
        :meth:`finish`; set :attr:`DerivedDocument.columns`."""
        ...

    def finish(self, session: Session) -> None:
        """Every group is written: the unit's last statements, before the commit."""
        ...

    def wait(self) -> BaseException | None:
        """Wait for what was sent outside the database (the transaction ends only after
        it); returns the first error it met (the transaction is then rolled back; an
        :class:`~hsearch.errors.HsearchError` that is not a
        :class:`~hsearch.errors.BackendError` means the records were refused, and the
        documents are written one by one to find the one at fault)."""
        ...


@dataclass(frozen=True, slots=True)
class Removal:
    """Documents removed in the caller's transaction (their rows locked, deleted after
    the kinds have removed what they derived from them)."""

    tenant_id: str
    documents: Sequence[Document]
    attempts: frozenset[str] = frozenset()
    """Chunk ids recorded by submissions of these documents that will never be indexed
    (what a dead attempt may have written)."""


@dataclass(frozen=True, slots=True)
class RebuildContext:
    """A rebuild (``hsearch reindex``): the collection being built beside the live one
    and the encoder it is built with."""

    store: VectorStore
    encoder: EncoderInfo


class DerivedRebuild(Protocol):
    """A kind rebuilt from every stored document."""

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        """A page of documents re-encoded, in the rebuild's order (tenant, id); no
        transaction is open."""
        ...

    def recount(self, document: DerivedDocument) -> None:
        """In the switching transaction, each stored document again, in the same order,
        without embeddings: set :attr:`DerivedDocument.columns` for its row."""
        ...

    def commit(self, session: Session) -> None:
        """In the switching transaction, once every document is recounted: replace what
        the kind keeps (raise :class:`~hsearch.errors.ReindexError` to refuse the
        switch)."""
        ...


class KindDrift(Protocol):
    """What a kind found of one tenant's drift."""

    @property
    def kind(self) -> str:
        """The kind's name."""
        ...

    @property
    def clean(self) -> bool:
        """No drift."""
        ...

    def figures(self) -> dict[str, object]:
        """What the report line shows of it (JSON values)."""
        ...


@dataclass(frozen=True, slots=True)
class Repair:
    """What repairing a drift did, and what is left to the reconciler."""

    resubmit: tuple[str, ...] = ()
    """External ids of documents to index again from their stored text."""
    changed: bool = False
    """Searches may find something else now: cached results go stale."""


class DerivedKind(Protocol):
    """A kind of data derived from documents (module docstring)."""

    @property
    def name(self) -> str:
        """Unique among the registered kinds; names its drift in reconcile reports."""
        ...

    def writer(self, unit: WriteUnit) -> DerivedWriter:
        """Its writes in one of the indexer's transactions."""
        ...

    def remove(self, session: Session, removal: Removal) -> None:
        """Remove what it derived from ``removal``'s documents, in ``session``."""
        ...

    def sweep(self, tenant_id: str) -> None:
        """Remove what it keeps of the tenant outside the metadata database (a tenant
        purge, before and after its rows go); idempotent."""
        ...

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        """Delete the tenant's rows in ``session``; rows deleted, by table."""
        ...

    def rebuild(self, context: RebuildContext) -> DerivedRebuild:
        """A rebuild of it from every stored document."""
        ...

    def check(self, sessions: SessionFactory, tenant_id: str) -> KindDrift:
        """The tenant's drift (reads only)."""
        ...

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """Repair ``drift`` (one of this kind's :meth:`check`)."""
        ...
