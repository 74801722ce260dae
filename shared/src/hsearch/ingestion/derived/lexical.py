"""The tenant's lexical data derived from its documents: its BM25 statistics
(:mod:`hsearch.lexical.statistics`) and its vocabulary for typo tolerance
(:mod:`hsearch.lexical.typos`), two derived kinds.

The statistics count each document in (its contribution, recorded on its row) and its
replaced version out, in the transaction that writes the row; the vocabulary lists the
words of the documents written, and keeps them (a word no chunk holds any more has a
document frequency of 0 and is passed over), so a delete leaves it as it is.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.models import Document
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.lexical import LexicalStatsRepository, VocabularyRepository
from hsearch.embedding.protocol import Embedding, SparseKind
from hsearch.errors import ReindexError
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.records import embedding_text
from hsearch.lexical.analyzer import term_frequencies
from hsearch.lexical.statistics import (
    LexicalContribution,
    LexicalStatistics,
    PendingStatistics,
    WeightedDocument,
    weigh_chunks,
)
from hsearch.lexical.typos import vocabulary_words

__all__ = ["LexicalStatisticsKind", "StatisticsDrift", "VocabularyDrift", "VocabularyKind"]

logger = logging.getLogger(__name__)

_PAGE = 500
"""Documents read at a time by a check."""


@dataclass(slots=True)
class _Corpus:
    """A tenant's BM25 totals, counted document by document."""

    chunks: int = 0
    length: int = 0
    terms: Counter[int] = field(default_factory=Counter)

    def add(self, contribution: LexicalContribution) -> None:
        self.chunks += contribution.chunks
        self.length += contribution.length
        self.terms.update(contribution.terms)


@dataclass(frozen=True, slots=True)
class StatisticsDrift:
    """A tenant's BM25 statistics against the sum of its documents' contributions."""

    tenant_id: str
    kept: bool
    """Whether the encoder keeps statistics (term counts); if not, nothing is checked."""
    corpus: tuple[int, int] = (0, 0)
    """``(chunks, total length)`` as stored."""
    expected_corpus: tuple[int, int] = (0, 0)
    """``(chunks, total length)`` summed from the documents."""
    terms: tuple[int, ...] = ()
    """The term ids whose document frequency differs from the documents' sum."""
    expected: Mapping[int, int] = field(default_factory=dict)
    """Per term id, the document frequency summed from the documents."""
    kind: str = "lexical_statistics"

    @property
    def clean(self) -> bool:
        return self.corpus == self.expected_corpus and not self.terms

    def figures(self) -> dict[str, object]:
        return {
            "lexical_corpus_differs": self.corpus != self.expected_corpus,
            "lexical_terms_differing": len(self.terms),
        }


class LexicalStatisticsKind:
    """The tenant's BM25 statistics (module docstring). ``term_counts``: the configured
    encoder's sparse side is term counts, so the statistics are kept (what a check
    compares; writes and rebuilds follow the encoder they are given)."""

    name = "lexical_statistics"

    def __init__(self, statistics: LexicalStatistics, *, term_counts: bool = True) -> None:
        self._statistics = statistics
        self._term_counts = term_counts

    def writer(self, unit: WriteUnit) -> _StatisticsWriter:
        return _StatisticsWriter(self._statistics, unit)

    def remove(self, session: Session, removal: Removal) -> None:
        """The documents counted out of the statistics, as their rows recorded them
        (one change for them all)."""
        self._statistics.record_all(
            session,
            tenant_id=removal.tenant_id,
            documents=[
                WeightedDocument(
                    weights=(),
                    contribution=LexicalContribution(),
                    replaced=LexicalContribution.of_document(doc),
                )
                for doc in removal.documents
            ],
        )

    def sweep(self, tenant_id: str) -> None:
        pass  # only rows

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        return LexicalStatsRepository(session).purge_tenant(tenant_id)

    def rebuild(self, context: RebuildContext) -> _StatisticsRebuild:
        return _StatisticsRebuild(
            term_counts=context.encoder.sparse_kind is SparseKind.TERM_FREQUENCY
        )

    def check(self, sessions: SessionFactory, tenant_id: str) -> StatisticsDrift:
        """The stored statistics against the sum of the documents' contributions (what
        indexing and deletion add and subtract)."""
        if not self._term_counts:
            return StatisticsDrift(tenant_id=tenant_id, kept=False)
        expected = _Corpus()
        with sessions() as session:
            for doc in _documents(session, tenant_id):
                expected.add(LexicalContribution.of_document(doc))
            repo = LexicalStatsRepository(session)
            corpus = repo.corpus(tenant_id)
            stored = repo.all_document_frequencies(tenant_id)
        dfs = {t: n for t, n in expected.terms.items() if n > 0}
        differing = tuple(
            sorted(t for t in dfs.keys() | stored.keys() if dfs.get(t) != stored.get(t))
        )
        return StatisticsDrift(
            tenant_id=tenant_id,
            kept=True,
            corpus=corpus,
            expected_corpus=(expected.chunks, expected.length),
            terms=differing,
            expected=dfs,
        )

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """The tenant's statistics replaced by the documents' sum."""
        if not isinstance(drift, StatisticsDrift):
            raise TypeError(f"not a drift of lexical statistics: {drift!r}")
        chunks, length = drift.expected_corpus
        with transaction(sessions) as session:
            LexicalStatsRepository(session).replace_tenant(
                drift.tenant_id, chunks=chunks, length=length, document_frequencies=drift.expected
            )
        logger.warning(
            "reconcile.statistics_replaced tenant=%s terms=%d", drift.tenant_id, len(drift.terms)
        )
        return Repair(changed=True)


class _StatisticsWriter:
    """Each group's documents weighed as the tenant's corpus stands once the documents
    before them are counted in, as if written one by one; the unit's changes recorded
    at once before the commit (a row per term: the better part of a group's database
    time, so once per unit rather than per group)."""

    def __init__(self, statistics: LexicalStatistics, unit: WriteUnit) -> None:
        self._statistics = statistics
        self._unit = unit
        self._term_counts = unit.encoder.sparse_kind is SparseKind.TERM_FREQUENCY
        self._pending = PendingStatistics()

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        if not self._term_counts:
            for doc in documents:
                doc.columns.update(lexical_terms={}, lexical_length=0)
            return
        # Term counts become BM25 with the tenant's statistics; the weights themselves
        # are made with the store's records, on its thread.
        weighed = self._statistics.weigh_documents(
            session,
            tenant_id=self._unit.tenant_id,
            documents=[([e.sparse for e in d.embeddings], d.replaced) for d in documents],
            pending=self._pending,
            weights=False,
        )
        for doc, weighted in zip(documents, weighed, strict=True):
            doc.columns.update(
                lexical_terms=weighted.contribution.stored_terms(),
                lexical_length=weighted.contribution.length,
            )
            doc.reweigh = partial(_bm25, avg_length=weighted.avg_length)

    def finish(self, session: Session) -> None:
        self._statistics.record_all(
            session, tenant_id=self._unit.tenant_id, documents=self._pending.documents
        )

    def wait(self) -> BaseException | None:
        return None


class _StatisticsRebuild:
    """Each tenant's statistics recounted for the new analysis. The new collection's
    BM25 weights are those a fresh ingest in the same order would make (the tenant's
    running average chunk length, :meth:`add`); the statistics are recounted from the
    stored text by the analyzer (:meth:`recount`), which must agree with the encoder's
    term counts."""

    def __init__(self, *, term_counts: bool) -> None:
        self._term_counts = term_counts
        self._filled: dict[str, _Corpus] = {}
        self._recounted: dict[str, _Corpus] = {}

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        if not self._term_counts:
            return
        for doc in documents:
            # As LexicalStatistics.weigh_document weighs a new document: the tenant's
            # average chunk length once this document is counted in.
            corpus = self._filled.setdefault(doc.tenant_id, _Corpus())
            contribution = LexicalContribution.of_chunks([e.sparse for e in doc.embeddings])
            corpus.chunks += contribution.chunks
            corpus.length += contribution.length
            doc.reweigh = partial(_bm25, avg_length=corpus.length / max(corpus.chunks, 1))

    def recount(self, document: DerivedDocument) -> None:
        contribution = (
            LexicalContribution.of_chunks(
                [
                    term_frequencies(embedding_text(document.title, c), lang=document.lang)[0]
                    for c in document.chunks
                ]
            )
            if self._term_counts
            else LexicalContribution()
        )
        self._recounted.setdefault(document.tenant_id, _Corpus()).add(contribution)
        document.columns.update(
            lexical_terms=contribution.stored_terms(), lexical_length=contribution.length
        )

    def commit(self, session: Session) -> None:
        if not self._term_counts:
            LexicalStatsRepository(session).replace_all({})
            return
        for tenant, corpus in self._filled.items():
            check = self._recounted.get(tenant, _Corpus())
            if (check.chunks, check.length) != (corpus.chunks, corpus.length):
                msg = (
                    f"tenant {tenant!r}: the encoder's term counts ({corpus.chunks} "
                    f"chunks, {corpus.length} terms) differ from the lexical "
                    f"analyzer's ({check.chunks}, {check.length})"
                )
                raise ReindexError(msg)
        LexicalStatsRepository(session).replace_all(
            {t: (c.chunks, c.length, c.terms) for t, c in self._recounted.items()}
        )


@dataclass(frozen=True, slots=True)
class VocabularyDrift:
    """The words of a tenant's documents its vocabulary lacks."""

    tenant_id: str
    missing: tuple[str, ...] = ()
    kind: str = "vocabulary"

    @property
    def clean(self) -> bool:
        return not self.missing

    def figures(self) -> dict[str, object]:
        return {"vocabulary_words_missing": len(self.missing)}


class VocabularyKind:
    """The tenant's vocabulary (module docstring)."""

    name = "vocabulary"

    def writer(self, unit: WriteUnit) -> _VocabularyWriter:
        return _VocabularyWriter(unit.tenant_id)

    def remove(self, session: Session, removal: Removal) -> None:
        pass  # words are only added

    def sweep(self, tenant_id: str) -> None:
        pass  # only rows

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        return VocabularyRepository(session).purge_tenant(tenant_id)

    def rebuild(self, context: RebuildContext) -> _VocabularyRebuild:
        return _VocabularyRebuild()

    def check(self, sessions: SessionFactory, tenant_id: str) -> VocabularyDrift:
        """The words of the documents' titles and texts the vocabulary lacks (words it
        holds beyond them are those of documents deleted or replaced, kept on purpose).
        Indexing lists the words of each chunk: a word cut in two by a chunk boundary (a
        word longer than a chunk) would show here, and a repair lists it whole."""
        with sessions() as session:
            stored = set(VocabularyRepository(session).words(tenant_id))
            missing: set[str] = set()
            for doc in _documents(session, tenant_id):
                missing |= vocabulary_words([doc.title, doc.content]) - stored
        return VocabularyDrift(tenant_id=tenant_id, missing=tuple(sorted(missing)))

    def repair(self, sessions: SessionFactory, drift: KindDrift) -> Repair:
        """The missing words listed."""
        if not isinstance(drift, VocabularyDrift):
            raise TypeError(f"not a drift of the vocabulary: {drift!r}")
        with transaction(sessions) as session:
            VocabularyRepository(session).add(drift.tenant_id, drift.missing)
        logger.warning(
            "reconcile.vocabulary_added tenant=%s words=%d", drift.tenant_id, len(drift.missing)
        )
        return Repair(changed=True)


class _VocabularyWriter:
    """The words of the unit's documents, listed once before the commit."""

    def __init__(self, tenant_id: str) -> None:
        self._tenant_id = tenant_id
        self._words: set[str] = set()

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        self._words |= vocabulary_words(
            text for doc in documents for text in (doc.title, *doc.chunks)
        )

    def finish(self, session: Session) -> None:
        VocabularyRepository(session).add(self._tenant_id, self._words)

    def wait(self) -> BaseException | None:
        return None


class _VocabularyRebuild:
    """Every tenant's vocabulary listed anew from its documents' chunks."""

    def __init__(self) -> None:
        self._words: dict[str, set[str]] = {}

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        pass

    def recount(self, document: DerivedDocument) -> None:
        self._words.setdefault(document.tenant_id, set()).update(
            vocabulary_words([document.title, *document.chunks])
        )

    def commit(self, session: Session) -> None:
        vocabulary = VocabularyRepository(session)
        vocabulary.clear()
        for tenant, words in sorted(self._words.items()):
            vocabulary.add(tenant, words)


def _bm25(embeddings: Sequence[Embedding], *, avg_length: float) -> list[Embedding]:
    """Term counts as BM25 document weights, in a corpus of average chunk length
    ``avg_length``."""
    weights = weigh_chunks([e.sparse for e in embeddings], avg_length=avg_length)
    return [Embedding(dense=e.dense, sparse=w) for e, w in zip(embeddings, weights, strict=True)]


def _documents(session: Session, tenant_id: str) -> Iterator[Document]:
    """The tenant's documents, a page at a time (each page let go of once read)."""
    repo = DocumentRepository(session)
    after = None
    while page := repo.tenant_page(tenant_id, after=after, limit=_PAGE):
        yield from page
        after = page[-1].id
        session.expunge_all()
