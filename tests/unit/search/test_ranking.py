"""Ranking after fusion: the pure ordering of hits by their rerank scores."""

from __future__ import annotations

import math
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.search.ranking import rerank


def test_rerank_orders_by_score_descending() -> None:
    assert rerank(["a", "b", "c"], [0.1, 3.0, -2.0]) == [("b", 3.0), ("a", 0.1), ("c", -2.0)]


def test_rerank_keeps_original_order_on_ties() -> None:
    hits = ["first", "second", "third", "fourth"]
    assert rerank(hits, [1.0, 2.0, 1.0, 2.0]) == [
        ("second", 2.0),
        ("fourth", 2.0),
        ("first", 1.0),
        ("third", 1.0),
    ]
    assert [hit for hit, _ in rerank(hits, [0.0, -0.0, 0.0, -0.0])] == hits


def test_rerank_empty() -> None:
    assert rerank([], []) == []


def test_rerank_returns_floats_and_accepts_infinities() -> None:
    ranked = rerank(["a", "b", "c"], [1, -math.inf, math.inf])
    assert ranked == [("c", math.inf), ("a", 1.0), ("b", -math.inf)]
    assert all(type(score) is float for _, score in ranked)


def test_rerank_keeps_hit_objects() -> None:
    hits = [{"id": 1}, {"id": 2}]
    ranked = rerank(hits, [0.0, 1.0])
    assert ranked[0][0] is hits[1]
    assert ranked[1][0] is hits[0]


@pytest.mark.parametrize(("n_hits", "n_scores"), [(2, 1), (1, 2), (0, 1), (3, 0)])
def test_rerank_rejects_length_mismatch(n_hits: int, n_scores: int) -> None:
    with pytest.raises(ValueError, match=f"got {n_scores} scores for {n_hits} hits"):
        rerank(list(range(n_hits)), [0.0] * n_scores)


def test_rerank_rejects_nan() -> None:
    with pytest.raises(ValueError, match="not NaN"):
        rerank(["a", "b"], [1.0, math.nan])


@given(st.lists(st.integers(min_value=-3, max_value=3).map(float), max_size=30))
def test_rerank_properties(scores: list[float]) -> None:
    hits = list(range(len(scores)))
    ranked = rerank(hits, scores)
    assert sorted(hit for hit, _ in ranked) == hits  # a permutation
    assert all(score == scores[hit] for hit, score in ranked)  # each hit keeps its score
    for (hit_a, score_a), (hit_b, score_b) in pairwise(ranked):
        assert score_a >= score_b
        if score_a == score_b:
            assert hit_a < hit_b  # ties: original order
