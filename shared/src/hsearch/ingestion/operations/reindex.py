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

BM25 document weights are computed as a fresh ingest in the same order would compute
them (the tenant's running average chunk length). Any failure before step 3 commits
drops the new collection and leaves the live one, the statistics and the document rows
as they were (:class:`~hsearch.errors.ReindexError`).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import transaction
from hsearch.db.models import Document
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.lexical import LexicalStatsRepository, VocabularyRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind
from hsearch.errors import HsearchError, ReindexError
from hsearch.ingestion.chunking import Chunk, Chunker
from hsearch.ingestion.ids import chunk_id
from hsearch.ingestion.records import chunk_records, embedding_text
from hsearch.lexical.analyzer import term_frequencies
from hsearch.lexical.statistics import LexicalContribution, weigh_chunks
from hsearch.lexical.typos import vocabulary_words
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


@dataclass(slots=True)
class _Corpus:
    """A tenant's corpus as the new collection holds it (running BM25 totals)."""

    chunks: int = 0
    length: int = 0
    terms: Counter[int] = field(default_factory=Counter)
    words: set[str] = field(default_factory=set)
    """Its vocabulary (:mod:`hsearch.lexical.typos`), listed anew."""


class ReindexService:
    """Rebuilds the live collection from the stored documents with ``embedder``."""

    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        embedder: Embedder,
        store: VectorStore,
        chunker: Chunker | None = None,
        batch_documents: int = 32,
    ) -> None:
        """``chunker``: how documents are cut, as the indexer cuts them (default: the
        encoder's tokenizer at the default chunk sizes)."""
        if batch_documents < 1:
            msg = f"batch_documents must be >= 1, got {batch_documents}"
            raise ValueError(msg)
        self._sessions = session_factory
        self._embedder = embedder
        self._store = store
        self._chunker = chunker or Chunker(embedder.tokenizer)
        self._batch = batch_documents

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
        try:
            corpora = self._fill(built, total=total, progress=progress)
            built.flush()
            if before_swap is not None:
                before_swap()
            previous = self._swap(built, expected_state=state, corpora=corpora)
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
            chunks=sum(c.chunks for c in corpora.values()),
            tenants=len(corpora),
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
        built: VectorStore,
        *,
        total: int,
        progress: Callable[[int, int], None] | None,
    ) -> dict[str, _Corpus]:
        """Encode every document into ``built``; returns each tenant's running totals."""
        term_counts = self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY
        corpora: dict[str, _Corpus] = {}
        after: tuple[str, uuid.UUID] | None = None
        done = 0
        while True:
            with self._sessions() as session:
                rows = DocumentRepository(session).page_all_tenants(after=after, limit=self._batch)
                page = [_detach(row) for row in rows]
            if not page:
                return corpora
            after = (page[-1].tenant_id, page[-1].id)
            chunked = [(doc, self._chunks(doc)) for doc in page]
            vectors = self._encode(chunked)
            for (doc, chunks), encoded in zip(chunked, vectors, strict=True):
                corpus = corpora.setdefault(doc.tenant_id, _Corpus())
                if term_counts:
                    embeddings = _weighted(encoded, corpus)
                else:
                    embeddings = encoded
                    corpus.chunks += len(chunks)
                built.upsert(
                    chunk_records(
                        tenant_id=doc.tenant_id,
                        document_id=doc.id,
                        external_id=doc.external_id,
                        title=doc.title,
                        source=doc.source,
                        lang=doc.lang,
                        tags=doc.tags,
                        metadata=doc.metadata,
                        created_at=doc.created_at,
                        chunk_ids=[chunk_id(doc.id, i, c.text) for i, c in enumerate(chunks)],
                        chunks=[c.text for c in chunks],
                        offsets=[(c.start, c.end) for c in chunks],
                        vectors=embeddings,
                    )
                )
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
        corpora: dict[str, _Corpus],
    ) -> str | None:
        """Rewrite the statistics and document rows for the new encoder and switch the
        live collection, all in one transaction (rolled back if the switch fails)."""
        fingerprint = self._embedder.info.fingerprint
        term_counts = self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY
        with transaction(self._sessions) as session:
            active = JobRepository(session).active_count_all_tenants()
            if active or DocumentRepository(session).state_all_tenants() != expected_state:
                msg = (
                    "documents were ingested while the new collection was built; pause "
                    "ingestion and run `hsearch reindex` again (nothing was switched)"
                )
                raise ReindexError(msg)
            recounted = self._rewrite_documents(session, fingerprint=fingerprint)
            if term_counts:
                for tenant, corpus in corpora.items():
                    check = recounted.get(tenant, _Corpus())
                    if (check.chunks, check.length) != (corpus.chunks, corpus.length):
                        msg = (
                            f"tenant {tenant!r}: the encoder's term counts ({corpus.chunks} "
                            f"chunks, {corpus.length} terms) differ from the lexical "
                            f"analyzer's ({check.chunks}, {check.length})"
                        )
                        raise ReindexError(msg)
                LexicalStatsRepository(session).replace_all(
                    {t: (c.chunks, c.length, c.terms) for t, c in recounted.items()}
                )
            else:
                LexicalStatsRepository(session).replace_all({})
            vocabulary = VocabularyRepository(session)
            vocabulary.clear()
            for tenant, corpus in sorted(recounted.items()):
                vocabulary.add(tenant, corpus.words)
            tenants = TenantRepository(session)
            for tenant in sorted(recounted):
                tenants.bump_generation(tenant)  # cached results of the old collection
            session.flush()
            return self._store.swap_in(built)

    def _rewrite_documents(self, session: Session, *, fingerprint: str) -> dict[str, _Corpus]:
        """Record each document's chunks, lexical contribution and encoder as the new
        collection has them; returns every tenant's statistics recounted from them."""
        term_counts = self._embedder.info.sparse_kind is SparseKind.TERM_FREQUENCY
        repo = DocumentRepository(session)
        recounted: dict[str, _Corpus] = {}
        after: tuple[str, uuid.UUID] | None = None
        while rows := repo.page_all_tenants(after=after, limit=256):
            after = (rows[-1].tenant_id, rows[-1].id)
            for row in rows:
                chunks = self._chunks(_detach(row))
                contribution = (
                    LexicalContribution.of_chunks(
                        [
                            term_frequencies(embedding_text(row.title, c.text), lang=row.lang)[0]
                            for c in chunks
                        ]
                    )
                    if term_counts
                    else LexicalContribution()
                )
                corpus = recounted.setdefault(row.tenant_id, _Corpus())
                corpus.chunks += contribution.chunks
                corpus.length += contribution.length
                corpus.terms.update(contribution.terms)
                corpus.words |= vocabulary_words([row.title, *(c.text for c in chunks)])
                row.chunk_ids = [chunk_id(row.id, i, c.text) for i, c in enumerate(chunks)]
                row.chunk_count = len(chunks)
                row.lexical_terms = contribution.stored_terms()
                row.lexical_length = contribution.length
                row.encoder = fingerprint
            # Written, then let go: the identity map would otherwise hold every row.
            session.flush()
            session.expunge_all()
        return recounted

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


def _weighted(embeddings: list[Embedding], corpus: _Corpus) -> list[Embedding]:
    """BM25 weights for one document's term counts, with the tenant's average chunk
    length once this document is counted in (as :meth:`LexicalStatistics.weigh_document`
    computes it for a new document), and the document counted into ``corpus``."""
    chunks = [e.sparse for e in embeddings]
    contribution = LexicalContribution.of_chunks(chunks)
    corpus.chunks += contribution.chunks
    corpus.length += contribution.length
    weights = weigh_chunks(chunks, avg_length=corpus.length / max(corpus.chunks, 1))
    return [Embedding(dense=e.dense, sparse=w) for e, w in zip(embeddings, weights, strict=True)]
