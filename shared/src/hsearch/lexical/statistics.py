"""Per-tenant BM25 statistics: what turns raw term counts into BM25 for one tenant.

Encoders whose sparse side is term counts (:attr:`SparseKind.TERM_FREQUENCY`: the
offline and fake encoders) give the same counts for a text whatever the tenant; BM25
needs the tenant's corpus on both sides (:mod:`hsearch.lexical.bm25`):

* query side, :meth:`LexicalStatistics.weigh_query`: each query term's IDF from the
  tenant's document frequencies and chunk count. It runs after encoding, as a step of
  its own, so that a query's encoding stays tenant-independent (and cacheable);
* document side, :meth:`LexicalStatistics.weigh_document`: saturated term frequencies
  normalised by the tenant's average chunk length, as the corpus will be once this
  document has replaced its previous version;
* the statistics themselves, :meth:`LexicalStatistics.record`: a document's
  contribution (its chunks, their total length in terms and, per term, how many of its
  chunks hold it) is added when it is indexed, and the version it replaces subtracted.
  The document row keeps its contribution (:class:`LexicalContribution`) for that.

BM25's "document" is a chunk: the sparse leg retrieves chunks, so N counts chunks and a
term's document frequency counts the chunks holding it.

Transactions belong to the caller on the indexing side: :meth:`weigh_document` and
:meth:`record` work in the session they are given, so the statistics change in the same
transaction that marks the document indexed (and roll back with it); the counters'
rows are locked by their upserts until that commit. The query side only reads, in a
short session of its own. SQL lives in :class:`LexicalStatsRepository`.

The query side keeps what it read (per tenant, bounded: the corpus size and the
document frequencies of the terms asked), used only while the database is down and for
``database.stale_s`` after the read (nothing can change the statistics meanwhile: every
write goes through the database). A query with a term not read within that window
raises :class:`~hsearch.errors.MetadataUnavailableError`: the sparse leg then fails
and the search answers with its other legs, flagged degraded.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from cachetools import LRUCache

from hsearch.db.engine import DATABASE_UNAVAILABLE, Session, SessionFactory, unavailable
from hsearch.db.repositories.lexical import LexicalStatsRepository, TermDeltas
from hsearch.lexical.bm25 import bm25_document_weights, bm25_query_weights
from hsearch.types import SparseVector

__all__ = [
    "LexicalContribution",
    "LexicalStatistics",
    "PendingStatistics",
    "RecordedDocument",
    "WeighedQuery",
    "WeightedDocument",
    "weigh_chunks",
]

_TENANTS_KEPT = 1_000
"""Tenants whose last-read statistics a process keeps for an outage (least recent out)."""
_TERMS_KEPT = 10_000
"""Document frequencies kept per tenant (least recently asked out)."""


def weigh_chunks(chunks: Sequence[SparseVector], *, avg_length: float) -> tuple[SparseVector, ...]:
    """BM25 document-side weights of chunks (their raw term counts) in a corpus whose
    average chunk length is ``avg_length`` (taken as at least 1)."""
    return tuple(
        bm25_document_weights(
            tf, length=max(1, int(sum(tf.values))), avg_length=max(avg_length, 1.0)
        )
        for tf in chunks
    )


class RecordedDocument(Protocol):
    """What the statistics read of an indexed document: its row's record of what it
    contributed (:class:`hsearch.db.models.Document`)."""

    @property
    def chunk_count(self) -> int: ...

    @property
    def lexical_length(self) -> int: ...

    @property
    def lexical_terms(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class LexicalContribution:
    """What one indexed document adds to its tenant's statistics."""

    chunks: int = 0
    """How many chunks it has (each one a BM25 document)."""
    length: int = 0
    """The total length of its chunks in terms."""
    terms: Mapping[int, int] = field(default_factory=dict)
    """Per term id, how many of its chunks hold the term."""

    @classmethod
    def of_chunks(cls, term_frequencies: Sequence[SparseVector]) -> LexicalContribution:
        """The contribution of chunks with these raw term counts."""
        terms: Counter[int] = Counter()
        length = 0
        for tf in term_frequencies:
            terms.update(tf.indices)
            length += int(sum(tf.values))
        return cls(chunks=len(term_frequencies), length=length, terms=dict(terms))

    @classmethod
    def of_document(cls, document: RecordedDocument) -> LexicalContribution:
        """What the indexed version of ``document`` contributed, as its row recorded it."""
        return cls(
            chunks=document.chunk_count,
            length=document.lexical_length,
            terms={int(k): int(v) for k, v in document.lexical_terms.items()},
        )

    def stored_terms(self) -> dict[Any, int]:
        """:attr:`terms` for the document row: the term ids are the keys, which the
        JSON column writes as strings (:func:`~hsearch.db.engine.json_dumps`; read
        back, :meth:`of_document` takes either). Converting them here cost the
        indexing thread about 8 µs per document."""
        return dict(self.terms)


@dataclass(frozen=True, slots=True)
class WeighedQuery:
    """A query's BM25 weights, and what the statistics tell of its matches."""

    weights: SparseVector
    max_document_frequency: int
    """The largest document frequency among the query's terms: at least this many of
    the tenant's chunks hold one of them (0 when none does), as the statistics stood
    when read (they follow the store within a write's commit)."""
    document_count: int = 1
    """The tenant's chunks (N) the weights were computed with, at least 1: the IDF of a
    term no chunk holds is ``bm25_idf(0, document_count=N)``."""


@dataclass(frozen=True, slots=True)
class WeightedDocument:
    """A document's chunks weighted for BM25, and the statistics change that goes with
    them (:meth:`LexicalStatistics.record` it once the chunks are stored)."""

    weights: tuple[SparseVector, ...]
    """The BM25 document-side weights, one vector per chunk, in chunk order (empty when
    weighed with ``weights=False``: :func:`weigh_chunks` with :attr:`avg_length`)."""
    contribution: LexicalContribution
    """What this version of the document adds to the statistics."""
    replaced: LexicalContribution
    """What the version it replaces had added (nothing for a new document)."""
    avg_length: float = 1.0
    """The corpus' average chunk length it is weighed with."""


@dataclass(slots=True)
class PendingStatistics:
    """Documents weighed in one transaction and not recorded yet: given to
    :meth:`LexicalStatistics.weigh_documents` call after call, each call weighs its
    documents as the corpus stands with those before counted in, without a read of the
    statistics (the first call reads them); :meth:`LexicalStatistics.record_all` then
    records them all at once. A worker writing several groups of documents in one
    transaction so changes the statistics once instead of once per group: each change
    upserts a row per term, the better part of a group's database time."""

    corpus: tuple[int, int] | None = None
    """``(chunk count, total length)`` with every document weighed so far counted in;
    ``None`` until the first call."""
    documents: list[WeightedDocument] = field(default_factory=list)
    """The documents weighed so far, in order."""


class _LastRead:
    """What the query side last read of one tenant's statistics, and when."""

    def __init__(self) -> None:
        self.chunks = (0, float("-inf"))
        self.dfs: LRUCache[int, tuple[int, float]] = LRUCache(maxsize=_TERMS_KEPT)


class LexicalStatistics:
    """A tenant's BM25 statistics: weighs queries and documents, records documents."""

    def __init__(
        self,
        session_factory: SessionFactory,
        *,
        stale_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        # Only the query side opens sessions; the document side uses the caller's.
        self._sessions = session_factory
        self._stale_s = stale_s
        self._clock = clock
        self._last: LRUCache[str, _LastRead] = LRUCache(maxsize=_TENANTS_KEPT)
        self._lock = threading.Lock()

    def weigh_query(self, tenant_id: str, term_frequencies: SparseVector) -> SparseVector:
        """The BM25 query side of a query's raw term counts: the tenant's IDF per term.

        Terms the tenant's corpus does not hold are left out (they cannot match).

        Raises:
            MetadataUnavailableError: the database is down and the tenant's corpus size
                or a term's frequency was not read within ``stale_s``.
        """
        return self.weigh_query_terms(tenant_id, term_frequencies).weights

    def weigh_query_terms(self, tenant_id: str, term_frequencies: SparseVector) -> WeighedQuery:
        """:meth:`weigh_query`, with the largest document frequency of the query's terms
        read along (a lower bound of the tenant's chunks matching the query, for its
        total: :mod:`hsearch.search.totals`). Raises as :meth:`weigh_query`."""
        terms = [int(t) for t in term_frequencies.indices]
        try:
            with self._sessions() as session:
                repo = LexicalStatsRepository(session)
                n_chunks, _ = repo.corpus(tenant_id)
                dfs = repo.document_frequencies(tenant_id, terms)
        except DATABASE_UNAVAILABLE as exc:
            n_chunks, dfs = self._last_read(tenant_id, terms, exc)
        else:
            self._remember(tenant_id, terms, n_chunks, dfs)
        # The two reads are not one snapshot: a concurrent ingest may have counted a
        # term's chunks before the corpus size; N is never below any df.
        most = max(dfs.values(), default=0)
        document_count = max(n_chunks, most, 1)
        weights = bm25_query_weights(
            term_frequencies, document_frequencies=dfs, document_count=document_count
        )
        return WeighedQuery(weights, max_document_frequency=most, document_count=document_count)

    def _remember(
        self, tenant_id: str, terms: Sequence[int], n_chunks: int, dfs: Mapping[int, int]
    ) -> None:
        if self._stale_s <= 0:
            return
        now = self._clock()
        with self._lock:
            last = self._last.get(tenant_id)
            if last is None:
                last = self._last[tenant_id] = _LastRead()
            last.chunks = (n_chunks, now)
            for term in terms:  # a term the tenant lacks is a frequency of 0
                last.dfs[term] = (int(dfs.get(term, 0)), now)

    def _last_read(
        self, tenant_id: str, terms: Sequence[int], exc: Exception
    ) -> tuple[int, dict[int, int]]:
        """The corpus size and ``terms``' frequencies read within ``stale_s`` (the
        database being down: ``exc``); else the database's unavailability, raised."""
        now = self._clock()
        with self._lock:
            last = self._last.get(tenant_id)
            if last is not None and now - last.chunks[1] < self._stale_s:
                dfs: dict[int, int] = {}
                for term in terms:
                    seen = last.dfs.get(term)
                    if seen is None or now - seen[1] >= self._stale_s:
                        break
                    if seen[0]:
                        dfs[term] = seen[0]
                else:
                    return last.chunks[0], dfs
        raise unavailable(exc) from exc

    def weigh_document(
        self,
        session: Session,
        *,
        tenant_id: str,
        chunks: Sequence[SparseVector],
        replaced: RecordedDocument | None,
    ) -> WeightedDocument:
        """BM25 document-side weights of a document's chunks (their raw term counts).

        The average chunk length is the tenant's as it will be once this document is
        recorded: ``replaced`` (the version being replaced, if any) counted out and
        ``chunks`` counted in, so the first document of a tenant is normalised by its
        own length. Reads in ``session`` and changes nothing: :meth:`record` the result
        once the chunks are stored.
        """
        contribution = LexicalContribution.of_chunks(chunks)
        old = (
            LexicalContribution() if replaced is None else LexicalContribution.of_document(replaced)
        )
        n_chunks, total = LexicalStatsRepository(session).corpus(tenant_id)
        new_n = n_chunks - old.chunks + contribution.chunks
        avg_length = (total - old.length + contribution.length) / new_n if new_n > 0 else 1.0
        weights = weigh_chunks(chunks, avg_length=avg_length)
        return WeightedDocument(
            weights=weights, contribution=contribution, replaced=old, avg_length=avg_length
        )

    def weigh_documents(
        self,
        session: Session,
        *,
        tenant_id: str,
        documents: Sequence[tuple[Sequence[SparseVector], RecordedDocument | None]],
        pending: PendingStatistics | None = None,
        weights: bool = True,
    ) -> list[WeightedDocument]:
        """:meth:`weigh_document` for several documents (``(chunks, replaced)`` each),
        with one read of the statistics: each document is weighed as the corpus will be
        once it and the documents before it are recorded, the weights
        :meth:`weigh_document` gives when each is recorded before the next is weighed.
        Changes nothing: :meth:`record_all` the result once the chunks are stored.

        ``pending``: documents weighed before in this transaction and not recorded yet,
        counted in instead of read; the result is added to it. ``weights=False``: the
        weights are left to the caller (:func:`weigh_chunks` with each document's
        :attr:`~WeightedDocument.avg_length`), to be made on another thread than the
        transaction's: the indexer makes them with the store's records."""
        if pending is not None and pending.corpus is not None:
            n_chunks, total = pending.corpus
        else:
            n_chunks, total = LexicalStatsRepository(session).corpus(tenant_id)
        weighed: list[WeightedDocument] = []
        for chunks, replaced in documents:
            contribution = LexicalContribution.of_chunks(chunks)
            old = (
                LexicalContribution()
                if replaced is None
                else LexicalContribution.of_document(replaced)
            )
            n_chunks += contribution.chunks - old.chunks
            total += contribution.length - old.length
            avg_length = total / n_chunks if n_chunks > 0 else 1.0
            weighed.append(
                WeightedDocument(
                    weights=weigh_chunks(chunks, avg_length=avg_length) if weights else (),
                    contribution=contribution,
                    replaced=old,
                    avg_length=avg_length,
                )
            )
        if pending is not None:
            pending.corpus = (n_chunks, total)
            pending.documents.extend(weighed)
        return weighed

    def record_all(
        self, session: Session, *, tenant_id: str, documents: Sequence[WeightedDocument]
    ) -> None:
        """:meth:`record` for several documents at once: one summed change."""
        if not documents:
            return
        chunks = sum(d.contribution.chunks - d.replaced.chunks for d in documents)
        length = sum(d.contribution.length - d.replaced.length for d in documents)
        deltas = TermDeltas.summed(
            [d.contribution.terms for d in documents],
            [d.replaced.terms for d in documents if d.replaced.terms],
        )
        LexicalStatsRepository(session).apply_delta(
            tenant_id, chunks=chunks, length=length, term_deltas=deltas
        )

    def record(self, session: Session, *, tenant_id: str, document: WeightedDocument) -> None:
        """Count ``document`` in its tenant's statistics and its replaced version out.

        Runs in the caller's transaction (the one that marks the document indexed), so a
        rollback leaves the statistics as they were.
        """
        self.record_all(session, tenant_id=tenant_id, documents=[document])
