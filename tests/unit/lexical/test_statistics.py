"""Tenant BM25 statistics on SQLite: query IDF, document weights, recorded deltas."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import json_dumps, transaction
from hsearch.db.models import Document, LexicalCorpusStats, LexicalTermStats
from hsearch.db.repositories.lexical import LexicalStatsRepository, TermDeltas
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import MetadataUnavailableError
from hsearch.lexical.analyzer import query_term_frequencies, term_frequencies, term_id
from hsearch.lexical.bm25 import bm25_document_weights, bm25_idf
from hsearch.lexical.statistics import (
    LexicalContribution,
    LexicalStatistics,
    PendingStatistics,
    WeightedDocument,
)
from hsearch.types import SparseVector
from tests.unit.outage import Outage

TENANT = "t"
A, B, C = 11, 22, 33  # term ids


def tf(counts: dict[int, float]) -> SparseVector:
    return SparseVector.from_mapping(counts)


def seed(
    sessions: sessionmaker[Session],
    *,
    chunks: int,
    length: int,
    dfs: dict[int, int],
    tenant: str = TENANT,
) -> None:
    """Write statistics directly, as if documents had been indexed."""
    with transaction(sessions) as session:
        TenantRepository(session).ensure(tenant)
        LexicalStatsRepository(session).apply_delta(
            tenant, chunks=chunks, length=length, term_deltas=TermDeltas.of(dfs)
        )


def recorded(
    sessions: sessionmaker[Session], tenant: str = TENANT
) -> tuple[tuple[int, int], dict[int, int]]:
    with sessions() as session:
        corpus = session.get(LexicalCorpusStats, tenant)
        dfs = {
            row.term_id: row.df
            for row in session.scalars(
                select(LexicalTermStats).where(LexicalTermStats.tenant_id == tenant)
            )
        }
        return ((corpus.chunk_count, corpus.total_length) if corpus else (0, 0)), dfs


def index(
    sessions: sessionmaker[Session],
    statistics: LexicalStatistics,
    chunks: list[SparseVector],
    *,
    replaced: Document | None = None,
) -> WeightedDocument:
    """Weigh and record one document in one transaction, as the indexer does."""
    with transaction(sessions) as session:
        TenantRepository(session).ensure(TENANT)
        weighted = statistics.weigh_document(
            session, tenant_id=TENANT, chunks=chunks, replaced=replaced
        )
        statistics.record(session, tenant_id=TENANT, document=weighted)
    return weighted


def as_document(contribution: LexicalContribution) -> Document:
    """A document row holding ``contribution``, as the indexer stores it."""
    return Document(
        chunk_count=contribution.chunks,
        lexical_length=contribution.length,
        lexical_terms=contribution.stored_terms(),
    )


# -- query side ---------------------------------------------------------------------------


def test_query_terms_get_the_tenant_idf(sessions: sessionmaker[Session]) -> None:
    seed(sessions, chunks=10, length=100, dfs={A: 2, B: 10})
    seed(sessions, chunks=1000, length=9000, dfs={A: 900, C: 5}, tenant="other")
    weights = LexicalStatistics(sessions).weigh_query(TENANT, tf({A: 1.0, B: 3.0, C: 1.0}))
    # Counts in the query do not matter; C is not in this tenant's corpus and drops out.
    assert weights.to_dict() == {
        A: pytest.approx(bm25_idf(2, document_count=10)),
        B: pytest.approx(bm25_idf(10, document_count=10)),
    }
    assert weights.to_dict()[A] == pytest.approx(1.4816045409242156)  # ln(1 + 8.5 / 2.5)


def test_a_stop_word_carries_no_weight_in_a_query(sessions: sessionmaker[Session]) -> None:
    statistics = LexicalStatistics(sessions)
    for text in (
        "Rust and C give control over memory.",
        "Python and Java manage memory for you.",
        "Cats and dogs and birds.",
        "Programming languages: a survey.",
    ):
        index(sessions, statistics, [term_frequencies(text)[0]])
    query = query_term_frequencies("programming languages and memory")
    weights = statistics.weigh_query(TENANT, query).to_dict()
    # The query's unstemmed forms match no English chunk and drop out with "and".
    assert set(weights) == {term_id("program"), term_id("languag"), term_id("memori")}
    assert term_id("and") not in weights
    # Without the stop list "and" (in 3 of 4 chunks) would weigh 30% of "programming".
    assert bm25_idf(3, document_count=4) > 0.29 * bm25_idf(1, document_count=4)


def test_a_tenant_without_statistics_matches_nothing(sessions: sessionmaker[Session]) -> None:
    weighed = LexicalStatistics(sessions).weigh_query_terms("nobody", tf({A: 1.0}))
    assert len(weighed.weights) == 0
    assert weighed.max_document_frequency == 0


def test_the_commonest_query_term_bounds_the_matches(sessions: sessionmaker[Session]) -> None:
    """The largest document frequency among the query's terms, read with them: at least
    that many of the tenant's chunks hold a query term (another tenant's do not count)."""
    seed(sessions, chunks=10, length=100, dfs={A: 2, B: 7})
    seed(sessions, chunks=1000, length=9000, dfs={A: 900, C: 5}, tenant="other")
    statistics = LexicalStatistics(sessions)
    weighed = statistics.weigh_query_terms(TENANT, tf({A: 1.0, B: 1.0, C: 1.0}))
    assert weighed.max_document_frequency == 7
    assert weighed.weights == statistics.weigh_query(TENANT, tf({A: 1.0, B: 1.0, C: 1.0}))
    assert statistics.weigh_query_terms(TENANT, tf({A: 1.0, C: 1.0})).max_document_frequency == 2


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_while_the_database_is_down_the_statistics_read_within_the_window_are_used(
    sessions: sessionmaker[Session],
) -> None:
    seed(sessions, chunks=10, length=100, dfs={A: 2, B: 10})
    outage, clock = Outage(sessions), Clock()
    statistics = LexicalStatistics(outage, stale_s=30, clock=clock)
    query = tf({A: 1.0, B: 1.0, C: 1.0})
    read = statistics.weigh_query(TENANT, query)
    assert set(read.to_dict()) == {A, B}
    seed(sessions, chunks=0, length=0, dfs={A: 5})  # not seen: the database is down next
    outage.down = True
    clock.now += 29
    opened = outage.opened
    assert statistics.weigh_query(TENANT, query).to_dict() == read.to_dict()
    assert outage.opened > opened, "the database is asked first"
    assert statistics.weigh_query(TENANT, tf({A: 1.0})).to_dict() == {A: read.to_dict()[A]}
    with pytest.raises(MetadataUnavailableError):
        statistics.weigh_query(TENANT, tf({A: 1.0, 44: 1.0}))  # a term never read
    with pytest.raises(MetadataUnavailableError):
        statistics.weigh_query("other", tf({A: 1.0}))  # a tenant never read
    clock.now += 1
    with pytest.raises(MetadataUnavailableError):
        statistics.weigh_query(TENANT, query)  # read 30 s ago: too old
    outage.down = False
    assert statistics.weigh_query(TENANT, tf({A: 1.0})).to_dict()[A] == pytest.approx(
        bm25_idf(7, document_count=10)
    )


def test_without_a_window_nothing_is_kept_for_an_outage(sessions: sessionmaker[Session]) -> None:
    seed(sessions, chunks=10, length=100, dfs={A: 2})
    outage = Outage(sessions)
    statistics = LexicalStatistics(outage)
    statistics.weigh_query(TENANT, tf({A: 1.0}))
    outage.down = True
    with pytest.raises(MetadataUnavailableError):
        statistics.weigh_query(TENANT, tf({A: 1.0}))


def test_document_count_is_never_below_a_document_frequency(
    sessions: sessionmaker[Session],
) -> None:
    # Two reads, not one snapshot: a concurrent ingest may have counted a term's chunks
    # before the corpus size. Here df(A) = 3 with N = 1: N is taken as 3.
    seed(sessions, chunks=1, length=5, dfs={A: 3, B: 1})
    weights = LexicalStatistics(sessions).weigh_query(TENANT, tf({A: 1.0, B: 1.0}))
    assert weights.to_dict() == {
        A: pytest.approx(bm25_idf(3, document_count=3)),
        B: pytest.approx(bm25_idf(1, document_count=3)),
    }


# -- document side ------------------------------------------------------------------------


def test_contribution_counts_chunks_per_term() -> None:
    contribution = LexicalContribution.of_chunks([tf({A: 3.0, B: 1.0}), tf({A: 1.0})])
    assert contribution == LexicalContribution(chunks=2, length=5, terms={A: 2, B: 1})
    assert json_dumps(contribution.stored_terms()) == json_dumps({str(A): 2, str(B): 1})
    assert LexicalContribution.of_document(as_document(contribution)) == contribution
    # As the row reads back: string keys.
    read_back = Document(chunk_count=2, lexical_length=5, lexical_terms={str(A): 2, str(B): 1})
    assert LexicalContribution.of_document(read_back) == contribution


def test_first_document_is_normalised_by_its_own_average_length(
    sessions: sessionmaker[Session],
) -> None:
    chunks = [tf({A: 2.0}), tf({A: 1.0, B: 3.0})]  # lengths 2 and 4: average 3
    weighted = index(sessions, LexicalStatistics(sessions), chunks)
    assert weighted.weights == (
        bm25_document_weights(chunks[0], length=2, avg_length=3.0),
        bm25_document_weights(chunks[1], length=4, avg_length=3.0),
    )
    assert weighted.replaced == LexicalContribution()
    assert recorded(sessions) == ((2, 6), {A: 2, B: 1})


def test_document_weights_use_the_corpus_with_the_document_in_it(
    sessions: sessionmaker[Session],
) -> None:
    seed(sessions, chunks=3, length=30, dfs={A: 3})
    chunk = tf({A: 1.0, B: 1.0})  # length 2: average (30 + 2) / 4 = 8
    weighted = index(sessions, LexicalStatistics(sessions), [chunk])
    assert weighted.weights == (bm25_document_weights(chunk, length=2, avg_length=8.0),)
    assert recorded(sessions) == ((4, 32), {A: 4, B: 1})


def test_a_replace_subtracts_the_old_version(sessions: sessionmaker[Session]) -> None:
    statistics = LexicalStatistics(sessions)
    seed(sessions, chunks=2, length=10, dfs={A: 2})  # another document
    old = index(sessions, statistics, [tf({A: 1.0, B: 9.0}), tf({B: 2.0, C: 2.0})])
    assert recorded(sessions) == ((4, 24), {A: 3, B: 2, C: 1})

    chunk = tf({A: 4.0})
    new = index(sessions, statistics, [chunk], replaced=as_document(old.contribution))
    # The old version's chunks and length no longer count: average (10 + 4) / 3 chunks.
    assert new.replaced == old.contribution
    assert new.weights == (bm25_document_weights(chunk, length=4, avg_length=14 / 3),)
    # Its terms are gone too; terms no chunk holds any more leave the table.
    assert recorded(sessions) == ((3, 14), {A: 3})


def test_record_changes_nothing_until_the_caller_commits(
    sessions: sessionmaker[Session],
) -> None:
    statistics = LexicalStatistics(sessions)
    with sessions() as session:  # no commit: the indexer's transaction rolled back
        TenantRepository(session).ensure(TENANT)
        weighted = statistics.weigh_document(
            session, tenant_id=TENANT, chunks=[tf({A: 1.0})], replaced=None
        )
        statistics.record(session, tenant_id=TENANT, document=weighted)
        assert LexicalStatsRepository(session).corpus(TENANT) == (1, 1)
    assert recorded(sessions) == ((0, 0), {})


def test_documents_recorded_in_one_transaction_each_see_the_ones_before(
    sessions: sessionmaker[Session],
) -> None:
    # The indexer weighs and records a group's documents one after the other in one
    # transaction: each is normalised by the corpus with the ones before it in it.
    statistics = LexicalStatistics(sessions)
    seed(sessions, chunks=1, length=4, dfs={A: 1})
    chunks = [tf({A: 2.0}), tf({B: 6.0}), tf({A: 1.0, C: 1.0})]  # lengths 2, 6 and 2
    with transaction(sessions) as session:
        weights = []
        for chunk in chunks:
            weighted = statistics.weigh_document(
                session, tenant_id=TENANT, chunks=[chunk], replaced=None
            )
            statistics.record(session, tenant_id=TENANT, document=weighted)
            weights.append(weighted.weights[0])
    length = 4
    for n, (chunk, weight) in enumerate(zip(chunks, weights, strict=True), 2):
        size = int(sum(chunk.values))
        length += size
        assert weight == bm25_document_weights(chunk, length=size, avg_length=length / n)
    assert recorded(sessions) == ((4, 14), {A: 3, B: 1, C: 1})


def test_a_group_weighed_and_recorded_at_once_equals_one_by_one(
    sessions: sessionmaker[Session],
) -> None:
    # The indexer weighs a group with one read and records one summed change: the
    # weights and the statistics are those of recording each document before the next.
    statistics = LexicalStatistics(sessions)
    seed(sessions, chunks=2, length=10, dfs={A: 2, C: 1})
    old = as_document(LexicalContribution.of_chunks([tf({C: 3.0}), tf({A: 1.0})]))
    group: list[tuple[list[SparseVector], Document | None]] = [
        ([tf({A: 2.0}), tf({B: 5.0})], None),
        ([tf({A: 1.0, B: 1.0})], old),  # replaces a version holding the tenant's only C
        ([tf({B: 3.0, A: 4.0})], None),
    ]
    one_by_one, expected = weighed_one_by_one(sessions, statistics, group)
    with transaction(sessions) as session:
        at_once = statistics.weigh_documents(session, tenant_id=TENANT, documents=group)
        statistics.record_all(session, tenant_id=TENANT, documents=at_once)
    assert at_once == one_by_one
    assert recorded(sessions) == expected
    assert expected == ((4, 22), {A: 4, B: 3})  # C, held by the replaced version only, is gone


def test_groups_weighed_in_turn_and_recorded_once_equal_one_by_one(
    sessions: sessionmaker[Session],
) -> None:
    # A unit of groups: each group is weighed with what the groups before it weighed
    # counted in (no read of the statistics after the first), and the statistics change
    # once for all of them. Weights and statistics are those of recording each document
    # before the next, a document written by two groups (replaced by the second) too.
    statistics = LexicalStatistics(sessions)
    seed(sessions, chunks=2, length=10, dfs={A: 2, C: 1})
    old = as_document(LexicalContribution.of_chunks([tf({C: 3.0}), tf({A: 1.0})]))
    first_version = [tf({A: 2.0}), tf({B: 5.0})]
    groups: list[list[tuple[list[SparseVector], Document | None]]] = [
        [(first_version, None), ([tf({A: 1.0, B: 1.0})], old)],
        [
            ([tf({B: 3.0, A: 4.0})], as_document(LexicalContribution.of_chunks(first_version))),
            ([tf({C: 2.0})], None),
        ],
    ]
    one_by_one, expected = weighed_one_by_one(
        sessions, statistics, [document for group in groups for document in group]
    )
    with transaction(sessions) as session:
        pending = PendingStatistics()
        in_turn = []
        for group in groups:
            in_turn += statistics.weigh_documents(
                session, tenant_id=TENANT, documents=group, pending=pending
            )
            assert recorded_in(session) == ((2, 10), {A: 2, C: 1})  # nothing recorded yet
        assert pending.documents == in_turn
        statistics.record_all(session, tenant_id=TENANT, documents=pending.documents)
    assert in_turn == one_by_one
    assert recorded(sessions) == expected
    assert expected == ((3, 17), {A: 3, B: 2, C: 1})


def weighed_one_by_one(
    sessions: sessionmaker[Session],
    statistics: LexicalStatistics,
    documents: Sequence[tuple[list[SparseVector], Document | None]],
) -> tuple[list[WeightedDocument], tuple[tuple[int, int], dict[int, int]]]:
    """``documents`` weighed and recorded each before the next is weighed, in a
    transaction rolled back: their weights, and the statistics they would leave."""
    with transaction(sessions) as session:
        weighed = []
        for chunks, replaced in documents:
            weighted = statistics.weigh_document(
                session, tenant_id=TENANT, chunks=chunks, replaced=replaced
            )
            statistics.record(session, tenant_id=TENANT, document=weighted)
            weighed.append(weighted)
        left = recorded_in(session)
        session.rollback()
    return weighed, left


def recorded_in(session: Session) -> tuple[tuple[int, int], dict[int, int]]:
    corpus = LexicalStatsRepository(session).corpus(TENANT)
    dfs = {
        row.term_id: row.df
        for row in session.scalars(
            select(LexicalTermStats).where(LexicalTermStats.tenant_id == TENANT)
        )
    }
    return corpus, dfs


def check_term_deltas(sessions: sessionmaker[Session], tenant: str) -> None:
    """A group's term changes, in one statement per dialect (a JSON array unpacked by
    SQLite, two arrays by Postgres), add to, create and remove term rows, 64-bit term
    ids included (tests/integration/test_lexical_stats_postgres.py runs it on Postgres)."""
    big = 2**62 + 7
    with transaction(sessions) as session:
        TenantRepository(session).ensure(tenant)
        LexicalStatsRepository(session).apply_delta(
            tenant, chunks=3, length=30, term_deltas=TermDeltas.of({1: 2, 5: 1, big: 3})
        )
    with transaction(sessions) as session:
        LexicalStatsRepository(session).apply_delta(
            tenant,
            chunks=-1,
            length=-10,
            term_deltas=TermDeltas.of({1: 1, 5: -1, big: -1, 9: 4, 11: 0}),
        )
    with transaction(sessions) as session:
        stats = LexicalStatsRepository(session)
        assert stats.corpus(tenant) == (2, 20)
        assert stats.document_frequencies(tenant, [1, 5, 9, 11, big]) == {1: 3, 9: 4, big: 2}


def test_term_deltas_add_create_and_remove_rows(sessions: sessionmaker[Session]) -> None:
    check_term_deltas(sessions, TENANT)


def test_term_deltas_sum_documents_in_term_order_leaving_out_what_cancels() -> None:
    """A unit's change: the documents added, less the versions they replace, summed per
    term; terms in increasing order (the order their rows are locked in) and none whose
    change is zero, 64-bit term ids as they are."""
    big = 2**62 + 7
    added = [{5: 1, 1: 2, big: 1}, {5: 3, 9: 1}, {}]
    removed = [{1: 2, 7: 1}, {big: 4}]
    deltas = TermDeltas.summed(added, removed)
    assert deltas.terms.tolist() == [5, 7, 9, big]
    assert deltas.as_dict() == {5: 4, 7: -1, 9: 1, big: -3}
    assert len(TermDeltas.summed([{3: 1}], [{3: 1}])) == 0
    assert len(TermDeltas.summed([], [])) == 0
    assert TermDeltas.of({4: 2, 2: 0, 3: -1}).as_dict() == {3: -1, 4: 2}
