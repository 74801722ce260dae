"""The keyword leg's coverage of a query (:mod:`hsearch.lexical.coverage`)."""

from __future__ import annotations

import pytest

from hsearch.lexical.additions import ExpansionKind, TermExpansion
from hsearch.lexical.analyzer import analyze, term_id
from hsearch.lexical.bm25 import bm25_idf
from hsearch.lexical.coverage import query_coverage, query_words, vector_coverage
from hsearch.types import SparseVector

N = 100
"""The corpus size the weights below stand for."""


def ids(*terms: str) -> frozenset[int]:
    return frozenset(term_id(t) for t in terms)


def held(text: str) -> frozenset[int]:
    """The terms a chunk of English ``text`` is indexed with."""
    return frozenset(term_id(t) for t in analyze(text, lang="en"))


def test_a_word_is_its_stem_and_its_unstemmed_form_stop_words_left_out() -> None:
    assert query_words("Running of the lungs") == [ids("run", "=running"), ids("lung", "=lungs")]
    assert query_words("lungs LUNGS lungs") == [ids("lung", "=lungs")]  # distinct words


def test_cjk_text_counts_one_word_per_bigram() -> None:
    assert query_words("東京都") == [ids("東京"), ids("京都")]


def test_what_the_keyword_leg_searched_because_of_a_word_counts_as_that_word() -> None:
    typo = TermExpansion("fibrosys", "fibrosis", ExpansionKind.TYPO, 1)
    words = query_words("cystic fibrosys", [typo])
    assert words == [ids("cystic", "=cystic"), ids("fibrosi", "=fibrosys", "=fibrosis")]
    # A rule of several words is no one word's: nothing is added.
    rule = TermExpansion("cystic fibrosys", "mucoviscidosis", ExpansionKind.SYNONYM)
    assert query_words("cystic fibrosys", [rule]) == query_words("cystic fibrosys")


def weights(**idf: float) -> dict[int, float]:
    return {term_id(t): w for t, w in idf.items()}


def test_coverage_is_the_share_of_the_words_idf_the_candidate_holds() -> None:
    words = query_words("cystic fibrosis lungs")
    w = weights(cystic=3.0, fibrosi=2.0, lung=1.0)
    unheld = bm25_idf(0, document_count=N)
    assert query_coverage(words, held("Cystic fibrosis."), weights=w, unheld_weight=unheld) == (
        pytest.approx(5.0 / 6.0)
    )
    assert query_coverage(
        words, held("Lungs and cystic fibrosis"), weights=w, unheld_weight=unheld
    ) == pytest.approx(1.0)
    assert query_coverage(words, held("Nothing here"), weights=w, unheld_weight=unheld) == 0.0


def test_a_word_no_chunk_holds_counts_at_the_idf_of_an_unheld_term() -> None:
    # "zebra" has no weight: no chunk of the tenant holds it. It counts, and lowers the
    # coverage of every candidate; the rarest held form weighs a held word.
    words = query_words("cystic zebra")
    w = weights(cystic=3.0, **{"=cystic": 4.0})
    unheld = bm25_idf(0, document_count=N)
    assert unheld > 4.0
    assert query_coverage(words, held("cystic"), weights=w, unheld_weight=unheld) == (
        pytest.approx(4.0 / (4.0 + unheld))
    )


def test_a_query_of_stop_words_has_no_coverage() -> None:
    assert query_words("the of and") == []
    assert query_coverage([], held("the"), weights={}, unheld_weight=1.0) == 0.0


def test_a_learned_sparse_query_reads_its_own_weights() -> None:
    query = SparseVector.from_mapping({1: 0.5, 2: 0.3, 3: 0.2, 4: 0.0})
    assert vector_coverage(query, {1, 3, 9}) == pytest.approx(0.7)
    assert vector_coverage(query, set()) == 0.0
    assert vector_coverage(query, {1, 2, 3}) == pytest.approx(1.0)
    assert vector_coverage(SparseVector.from_mapping({}), {1}) == 0.0
