"""Rebuilding the collection with the current encoder (``hsearch reindex``).

A collection records the encoder it was built with and refuses another one
(:class:`~hsearch.errors.EncoderMismatchError`): after a change of analyzer (or of model)
every stored chunk must be encoded again. The ``documents`` table holds what that needs,
each document's content, title, language and filter fields, so the rebuild reads it and
never asks a client to submit again:

1. refuse while ingestion jobs are queued or running (their writes would go to the old
   collection and its statistics only);
2. :meth:`VectorStore.new_collection` makes an empty collection beside the live one;
   every document is chunked and encoded as the indexer does (same chunk ids, same
   records) and written to it, a page of documents at a time. Searches keep answering
   from the live collection meanwhile;
3. in one transaction: check that no document changed and no job started since step 1,
   recompute each document's lexical contribution and every tenant's BM25 statistics
   for the new analysis, record the new encoder on each document row, switch the live
   collection (:meth:`VectorStore.swap_in`, one step for searches) and commit;
4. drop the previous collection unless asked to keep it.

Everything derived from a document is rebuilt by its kind
(:mod:`hsearch.ingestion.derived`): each is given the documents re-encoded in step 2 (the
chunks go to the new collection then) and, in step 3's transaction, the documents as
their rows will stand and the end (the statistics and the vocabulary are replaced then).
BM25 document weights are computed as a fresh ingest in the same order would compute
them (the tenant's running average chunk length). Any failure before step 3 commits
drops the new collection and leaves the live one, the statistics and the document rows
as they were (:class:`~hsearch.errors.ReindexError`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.models import Document
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.protocol import Embedder, Embedding
from hsearch.errors import HsearchError, ReindexError
from hsearch.ingestion.chunking import Chunk, Chunker
from hsearch.ingestion.derived.protocol import DerivedDocument, DerivedRebuild, RebuildContext
from hsearch.ingestion.derived.registry import DerivedKinds, standard_kinds
from hsearch.ingestion.ids import chunk_id
from hsearch.ingestion.records import embedding_text
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["ReindexReport", "ReindexService"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReindexReport:
    """What a rebuild did."""

    collection: str
    """The collection searches answer from now."""
    previous: str | None
    """The collection it replaced (``None``: there was none)."""
    kept_previous: bool
    """Whether :attr:`previous` was kept (else it was dropped)."""
    encoder: str
    """The fingerprint of the encoder the new collection was built with."""
    documents: int
    chunks: int
    tenants: int
    seconds: float


@dataclass(frozen=True, slots=True)
class _Document:
    """A document row as the rebuild reads it (detached from its session)."""

    id: uuid.UUID
    tenant_id: str
    external_id: str
    title: str
    source: str
    lang: str
    tags: tuple[str, ...]
    metadata: dict[str, object]
    content: str
    created_at: datetime


class ReindexService:
    """Rebuilds the live collection from the stored documents with ``embedder``."""

    def __init__(
        self,
        *,
        session_factory: SessionFactory,
        embedder: Embedder,
        store: VectorStore,
        chunker: Chunker | None = None,
        batch_documents: int = 32,
        derived: DerivedKinds | None = None,
    ) -> None:
        """``chunker``: how documents are cut, as the indexer cuts them (default: the
        encoder's tokenizer at the default chunk sizes); ``derived``: what is derived
        from the documents, rebuilt with the collection (default:
        :func:`~hsearch.ingestion.derived.registry.standard_kinds`)."""
        if batch_documents < 1:
            msg = f"batch_documents must be >= 1, got {batch_documents}"
            raise ValueError(msg)
        self._sessions = session_factory
        self._embedder = embedder
        self._store = store
        self._chunker = chunker or Chunker(embedder.tokenizer)
        self._batch = batch_documents
        self._derived = derived or standard_kinds(
            store=store, statistics=LexicalStatistics(session_factory), encoder=embedder.info
        )

    def run(
        self,
        *,
        keep_previous: bool = False,
        progress: Callable[[int, int], None] | None = None,
        before_swap: Callable[[], None] | None = None,
    ) -> ReindexReport:
        """Rebuild, switch searches to the new collection, then drop the previous one
        unless ``keep_previous``.

        ``progress(done, total)`` is called after each page of documents;
        ``before_swap()`` once the new collection is complete and flushed, before it
        goes live (searches still answer from the previous one then).

        Raises:
            ReindexError: Ingestion is running, documents changed during the rebuild,
                or a document could not be encoded; nothing live changed.
            BackendError: The database or the vector store failed; nothing live changed
                unless the failure came after the swap (the error says so).
        """
        started = time.perf_counter()
        info = self._embedder.info
        with self._sessions() as session:
            active = JobRepository(session).active_count_all_tenants()
            state = DocumentRepository(session).state_all_tenants()
        if active:
            msg = (
                f"{active} ingestion job(s) are queued or running; wait for them (or stop "
                "the workers) and run `hsearch reindex` again"
            )
            raise ReindexError(msg)
        total = state[0]
        built = self._store.new_collection(info)
        logger.info("reindex.started documents=%d encoder=%s", total, info.fingerprint)
        rebuilds = self._derived.rebuilds(RebuildContext(store=built, encoder=info))
        try:
            tenants, chunks = self._fill(rebuilds, total=total, progress=progress)
            built.flush()
            if before_swap is not None:
                before_swap()
            previous = self._swap(built, expected_state=state, rebuilds=rebuilds)
        except BaseException:
            self._discard(built)
            raise
        finally:
            built.close()  # its connection; the collection lives on behind the alias
        collection = self._store.live_collection() or ""
        if previous is not None and not keep_previous:
            self._store.drop_previous(previous)
        report = ReindexReport(
            collection=collection,
            previous=previous,
            kept_previous=previous is not None and keep_previous,
            encoder=info.fingerprint,
            documents=total,
            chunks=chunks,
            tenants=len(tenants),
            seconds=time.perf_counter() - started,
        )
        logger.info(
            "reindex.done collection=%s previous=%s kept=%s documents=%d chunks=%d",
            report.collection,
            report.previous,
            report.kept_previous,
            report.documents,
            report.chunks,
        )
        return report

    # -- steps ----------------------------------------------------------------

    def _fill(
        self,
        rebuilds: Sequence[DerivedRebuild],
        *,
        total: int,
        progress: Callable[[int, int], None] | None,
    ) -> tuple[set[str], int]:
        """Encode every document and give it to the kinds' rebuilds (the chunks go to
        the new collection); returns the tenants seen and the chunks written."""
        tenants: set[str] = set()
        chunk_count = 0
        after: tuple[str, uuid.UUID] | None = None
        done = 0
        while True:
            with self._sessions() as session:
                rows = DocumentRepository(session).page_all_tenants(after=after, limit=self._batch)
                page = [_detach(row) for row in rows]
            if not page:
                return tenants, chunk_count
            after = (page[-1].tenant_id, page[-1].id)
            chunked = [(doc, self._chunks(doc)) for doc in page]
            vectors = self._encode(chunked)
            documents = [
                _derived(doc, chunks, embeddings=encoded)
                for (doc, chunks), encoded in zip(chunked, vectors, strict=True)
            ]
            for rebuild in rebuilds:
                rebuild.add(documents)
            tenants.update(doc.tenant_id for doc in page)
            chunk_count += sum(len(chunks) for _, chunks in chunked)
            done += len(page)
            if progress is not None:
                progress(done, max(total, done))

    def _chunks(self, doc: _Document) -> list[Chunk]:
        chunks = self._chunker.chunk(doc.content, title=doc.title, lang=doc.lang)
        if not chunks:
            msg = f"document {doc.external_id!r} of tenant {doc.tenant_id!r} has no text to index"
            raise ReindexError(msg)
        return chunks

    def _encode(self, chunked: Sequence[tuple[_Document, list[Chunk]]]) -> list[list[Embedding]]:
        texts = [embedding_text(doc.title, c.text) for doc, chunks in chunked for c in chunks]
        langs = [doc.lang for doc, chunks in chunked for _ in chunks]
        try:
            flat = self._embedder.embed_documents(texts, langs=langs)
        except HsearchError as exc:
            names = ", ".join(repr(doc.external_id) for doc, _ in chunked)
            msg = f"cannot encode documents {names}: {exc}"
            raise ReindexError(msg) from exc
        out: list[list[Embedding]] = []
        pos = 0
        for _, chunks in chunked:
            out.append(flat[pos : pos + len(chunks)])
            pos += len(chunks)
        return out

    def _swap(
        self,
        built: VectorStore,
        *,
        expected_state: tuple[int, datetime | None],
        rebuilds: Sequence[DerivedRebuild],
    ) -> str | None:
        """Rewrite the document rows for the new encoder, end the kinds' rebuilds (the
        statistics and the vocabulary replaced) and switch the live collection, all in
        one transaction (rolled back if the switch fails)."""
        fingerprint = self._embedder.info.fingerprint
        with transaction(self._sessions) as session:
            active = JobRepository(session).active_count_all_tenants()
            if active or DocumentRepository(session).state_all_tenants() != expected_state:
                msg = (
                    "documents were ingested while the new collection was built; pause "
                    "ingestion and run `hsearch reindex` again (nothing was switched)"
                )
                raise ReindexError(msg)
            tenants = self._rewrite_documents(session, fingerprint=fingerprint, rebuilds=rebuilds)
            for rebuild in rebuilds:
                rebuild.commit(session)
            repo = TenantRepository(session)
            for tenant in sorted(tenants):
                repo.bump_generation(tenant)  # cached results of the old collection
            session.flush()
            return self._store.swap_in(built)

    def _rewrite_documents(
        self, session: Session, *, fingerprint: str, rebuilds: Sequence[DerivedRebuild]
    ) -> set[str]:
        """Record each document's chunks, encoder and the columns the kinds keep on its
        row (its lexical contribution) as the new collection has them, each document
        recounted by every kind's rebuild; returns the tenants that have documents."""
        tenants: set[str] = set()
        repo = DocumentRepository(session)
        after: tuple[str, uuid.UUID] | None = None
        while rows := repo.page_all_tenants(after=after, limit=256):
            after = (rows[-1].tenant_id, rows[-1].id)
            for row in rows:
                doc = _detach(row)
                recounted = _derived(doc, self._chunks(doc))
                for rebuild in rebuilds:
                    rebuild.recount(recounted)
                tenants.add(row.tenant_id)
                row.chunk_ids = list(recounted.chunk_ids)
                row.chunk_count = len(recounted.chunks)
                for column, value in recounted.columns.items():
                    setattr(row, column, value)
                row.encoder = fingerprint
            # Written, then let go: the identity map would otherwise hold every row.
            session.flush()
            session.expunge_all()
        return tenants

    def _discard(self, built: VectorStore) -> None:
        """Drop a collection that never went live (best effort: the error that got us
        here is the one to report)."""
        name: str | None = None
        try:
            name = built.live_collection()
            if name is not None and name != self._store.live_collection():
                self._store.drop_previous(name)
        except HsearchError as exc:
            logger.warning("reindex.discard_failed collection=%s error=%s", name, exc)


def _detach(row: Document) -> _Document:
    return _Document(
        id=row.id,
        tenant_id=row.tenant_id,
        external_id=row.external_id,
        title=row.title,
        source=row.source,
        lang=row.lang,
        tags=tuple(row.tags),
        metadata=dict(row.metadata_),
        content=row.content,
        created_at=row.created_at,
    )


def _derived(
    doc: _Document, chunks: list[Chunk], *, embeddings: Sequence[Embedding] = ()
) -> DerivedDocument:
    """``doc`` cut into ``chunks`` (encoded as ``embeddings``), as the kinds see it."""
    return DerivedDocument(
        tenant_id=doc.tenant_id,
        document_id=doc.id,
        external_id=doc.external_id,
        title=doc.title,
        source=doc.source,
        lang=doc.lang,
        tags=doc.tags,
        metadata=doc.metadata,
        content=doc.content,
        created_at=doc.created_at,
        chunks=[c.text for c in chunks],
        offsets=[(c.start, c.end) for c in chunks],
        chunk_ids=[chunk_id(doc.id, i, c.text) for i, c in enumerate(chunks)],
        embeddings=embeddings,
    )
