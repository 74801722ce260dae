from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from hsearch.lexical.analyzer import term_frequencies
from hsearch.lexical.bm25 import bm25_document_weights, bm25_idf, bm25_query_weights
from hsearch.types import SparseVector

counts = st.integers(min_value=1, max_value=1000)
lengths = st.integers(min_value=0, max_value=100_000)
avg_lengths = st.floats(min_value=0.5, max_value=10_000.0)
k1s = st.floats(min_value=0.01, max_value=5.0)
bs = st.floats(min_value=0.0, max_value=1.0)


def _weight(tf: float, *, length: int = 10, avg_length: float = 10.0, **kw: float) -> float:
    vector = bm25_document_weights(
        SparseVector((7,), (tf,)), length=length, avg_length=avg_length, **kw
    )
    assert vector.indices == (7,)
    return vector.values[0]


def _dot(a: SparseVector, b: SparseVector) -> float:
    other = b.to_dict()
    return sum(v * other.get(i, 0.0) for i, v in zip(a.indices, a.values, strict=True))


def test_document_weight_formula() -> None:
    # tf·(k1+1) / (tf + k1·(1 - b + b·len/avg)) = 2·2.2 / (2 + 1.2·1) at average length
    assert _weight(2.0) == pytest.approx(1.375)
    assert _weight(2.0, length=20) == pytest.approx(4.4 / (2 + 1.2 * (0.25 + 0.75 * 2)))


def test_b_zero_ignores_length_and_k1_zero_is_binary() -> None:
    assert _weight(3.0, length=1, b=0.0) == _weight(3.0, length=500, b=0.0)
    assert _weight(5.0, k1=0.0) == 1.0


def test_document_weights_keep_indices_and_drop_zero_counts() -> None:
    tf = SparseVector((1, 5, 9), (1.0, 0.0, 4.0))
    weights = bm25_document_weights(tf, length=5, avg_length=5.0)
    assert weights.indices == (1, 9)


@given(
    terms=st.dictionaries(
        st.integers(min_value=0, max_value=2**40), st.integers(min_value=0, max_value=9)
    ),
    order=st.randoms(use_true_random=False),
    length=lengths,
    avg_length=avg_lengths,
)
def test_document_weights_are_the_formula_per_present_term_in_index_order(
    terms: dict[int, int], order: Any, length: int, avg_length: float
) -> None:
    # Whatever the input's order or zero counts (the fast path takes sorted, all-present
    # vectors; the rest go the general way), the same weights, sorted by index.
    pairs = list(terms.items())
    order.shuffle(pairs)
    tf = SparseVector(tuple(i for i, _ in pairs), tuple(float(c) for _, c in pairs))
    weights = bm25_document_weights(tf, length=length, avg_length=avg_length)
    norm = 1.2 * (1.0 - 0.75 + 0.75 * length / avg_length)
    expected = {i: c * 2.2 / (c + norm) for i, c in terms.items() if c > 0}
    assert weights.indices == tuple(sorted(expected))
    assert weights.values == tuple(expected[i] for i in weights.indices)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"length": -1, "avg_length": 1.0}, "length"),
        ({"length": True, "avg_length": 1.0}, "length"),
        ({"length": 3, "avg_length": 0.0}, "avg_length"),
        ({"length": 3, "avg_length": math.nan}, "avg_length"),
        ({"length": 3, "avg_length": 1.0, "k1": -0.1}, "k1"),
        ({"length": 3, "avg_length": 1.0, "k1": math.inf}, "k1"),
        ({"length": 3, "avg_length": 1.0, "b": 1.5}, "b must be"),
        ({"length": 3, "avg_length": 1.0, "b": -0.1}, "b must be"),
    ],
)
def test_document_weights_validate_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        bm25_document_weights(SparseVector((1,), (1.0,)), **kwargs)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("at", [0, 1, 2])
def test_document_weights_reject_bad_counts(bad: float, at: int) -> None:
    # Wherever it stands among good counts (a NaN compares false with all of them).
    values = [2.0, 1.0, 3.0]
    values[at] = bad
    tf = SparseVector((1, 4, 9), tuple(values))
    with pytest.raises(ValueError, match=f"term {tf.indices[at]} "):
        bm25_document_weights(tf, length=6, avg_length=1.0)


@given(counts, lengths, avg_lengths, k1s, bs)
def test_document_weight_increases_with_tf_and_saturates(
    tf: int, length: int, avg_length: float, k1: float, b: float
) -> None:
    w = _weight(float(tf), length=length, avg_length=avg_length, k1=k1, b=b)
    more = _weight(float(tf + 1), length=length, avg_length=avg_length, k1=k1, b=b)
    # Equal (up to rounding) only at the bound, which an empty document reaches when b
    # is 1: its length norm is then 0.
    assert 0.0 < w <= more * (1 + 1e-12)
    assert more <= (k1 + 1.0) * (1 + 1e-12)


def test_saturation_stays_below_the_bound() -> None:
    assert _weight(10_000.0) < 2.2
    assert _weight(10_000.0, length=0, b=1.0) == pytest.approx(2.2)


@given(counts, lengths, avg_lengths, k1s, bs)
def test_document_weight_decreases_with_length(
    tf: int, length: int, avg_length: float, k1: float, b: float
) -> None:
    short = _weight(float(tf), length=length, avg_length=avg_length, k1=k1, b=b)
    longer = _weight(float(tf), length=length + 10, avg_length=avg_length, k1=k1, b=b)
    assert longer <= short


def test_idf_formula() -> None:
    assert bm25_idf(1, document_count=10) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert bm25_idf(10, document_count=10) == pytest.approx(math.log(1 + 0.5 / 10.5))


def test_idf_rejects_inconsistent_statistics() -> None:
    with pytest.raises(ValueError, match="document_frequency"):
        bm25_idf(11, document_count=10)


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6))
def test_idf_positive_and_decreasing_in_df(df: int, n: int) -> None:
    assume(df < n)
    assert bm25_idf(df + 1, document_count=n) < bm25_idf(df, document_count=n)
    assert bm25_idf(df + 1, document_count=n) > 0.0


def test_query_weights_are_idf_once_per_distinct_term() -> None:
    tf = SparseVector((1, 2, 3, 4), (3.0, 1.0, 1.0, 1.0))
    weights = bm25_query_weights(
        tf, document_frequencies={1: 2, 2: 2, 3: 0, 9: 5}, document_count=10
    )
    # term 1 counts once although repeated; 3 (df 0) and 4 (unknown) cannot match: dropped
    assert weights.indices == (1, 2)
    assert weights.values[0] == weights.values[1] == pytest.approx(bm25_idf(2, document_count=10))


def test_query_weights_of_empty_corpus_are_empty() -> None:
    assert (
        len(
            bm25_query_weights(
                SparseVector((1,), (1.0,)), document_frequencies={}, document_count=0
            )
        )
        == 0
    )


@pytest.mark.parametrize(
    ("tf", "dfs", "n", "message"),
    [
        (SparseVector((1,), (1.0,)), {1: 1}, -1, "document_count"),
        (SparseVector((1,), (1.0,)), {1: 11}, 10, "term 1 is 11"),
        (SparseVector((1,), (1.0,)), {1: -1}, 10, "term 1 is -1"),
        (SparseVector((1,), (-2.0,)), {1: 1}, 10, "query term frequencies"),
    ],
)
def test_query_weights_validate_arguments(
    tf: SparseVector, dfs: dict[int, int], n: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        bm25_query_weights(tf, document_frequencies=dfs, document_count=n)


def test_inner_product_ranks_like_bm25() -> None:
    corpus = [
        "milvus stores dense vectors",
        "milvus also stores sparse vectors for lexical search",
        "cats sleep all day",
    ]
    analysed = [term_frequencies(text) for text in corpus]
    avg = sum(length for _, length in analysed) / len(analysed)
    dfs: dict[int, int] = {}
    for tf, _ in analysed:
        for index in tf.indices:
            dfs[index] = dfs.get(index, 0) + 1
    documents = [bm25_document_weights(tf, length=n, avg_length=avg) for tf, n in analysed]
    query = bm25_query_weights(
        term_frequencies("sparse lexical search")[0],
        document_frequencies=dfs,
        document_count=len(corpus),
    )
    scores = [_dot(query, doc) for doc in documents]
    assert scores[1] > 0.0
    assert scores[0] == scores[2] == 0.0
