"""Ranking after retrieval (pure): the weight rule, fusion and shaping, and the ordering
of hits by their rerank scores."""

from __future__ import annotations

import dataclasses
import math
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.search.fusion import LegHit
from hsearch.search.ranking import (
    RankingSpec,
    dense_cannot_read,
    group_by_document,
    leg_weights,
    page,
    query_weights,
    rank,
    rerank,
)
from hsearch.types import CountUnit, FusionMethod, Leg
from hsearch.vectorstore.protocol import StoredHit


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


def test_query_weights_apply_coverage_and_fall_back() -> None:
    legs = {"dense": [LegHit("a", 0.9)], "sparse": [LegHit("b", 3.0)]}
    prior = {"dense": 0.95, "sparse": 0.05}
    latin = frozenset({"LATIN"})

    def weights(query: str, legs: dict[str, list[LegHit]], **kw: Any) -> dict[str, float]:
        options: dict[str, Any] = {
            "configured": prior,
            "dense_scripts": latin,
            "min_dense_script_coverage": 0.5,
        }
        options.update(kw)
        return query_weights(query, legs, **options)

    assert weights("rivers of Europe", legs) == prior
    # Mostly Japanese words: the English-only dense leg is dropped.
    assert weights("RIAIは何の略？", legs) == {"dense": 0.0, "sparse": 0.05}
    # ...unless the sparse leg found nothing, or the encoder reads every script.
    assert weights("RIAIは何の略？", {**legs, "sparse": []}) == prior
    assert weights("RIAIは何の略？", legs, dense_scripts=None) == prior
    # A degraded leg drops out; if it was the only weighted one, the rest share equally.
    assert weights("rivers", {"dense": legs["dense"]}) == {"dense": 0.95}
    sparse_only = {"dense": 0.0, "sparse": 1.0}
    assert weights("rivers", {"dense": legs["dense"]}, configured=sparse_only) == {"dense": 1.0}


def test_dense_cannot_read_is_a_function_of_the_query_text() -> None:
    latin = frozenset({"LATIN"})
    assert dense_cannot_read("RIAIは何の略？", dense_scripts=latin, min_dense_script_coverage=0.5)
    assert not dense_cannot_read("rivers", dense_scripts=latin, min_dense_script_coverage=0.5)
    assert not dense_cannot_read("日本の首都", dense_scripts=None, min_dense_script_coverage=0.5)
    # leg_weights with the flag is query_weights with the scripts.
    legs = {"dense": [LegHit("a", 0.9)], "sparse": [LegHit("b", 3.0)]}
    prior = {"dense": 0.95, "sparse": 0.05}
    for text in ("RIAIは何の略？", "rivers"):
        flag = dense_cannot_read(text, dense_scripts=latin, min_dense_script_coverage=0.5)
        assert leg_weights(legs, configured=prior, dense_unreadable=flag) == query_weights(
            text, legs, configured=prior, dense_scripts=latin, min_dense_script_coverage=0.5
        )


def stored(chunk: str, score: float, document: str, source: str = "wiki") -> StoredHit:
    return StoredHit(chunk, score, {"document_id": document, "source": source, "text": chunk})


SPEC = RankingSpec(
    method=FusionMethod.RRF,
    weights=((Leg.DENSE, 0.5), (Leg.SPARSE, 0.5)),
    rrf_k=60,
    dense_unreadable=False,
    min_score=None,
    group_by_document=False,
    facets=(),
    facet_unit=CountUnit.DOCUMENT,
    window=100,
    offset=0,
    top_k=10,
)
LEGS: dict[str, list[StoredHit]] = {
    Leg.DENSE: [stored("a1", 0.9, "a"), stored("b1", 0.8, "b"), stored("a2", 0.7, "a")],
    Leg.SPARSE: [stored("a2", 9.0, "a"), stored("c1", 5.0, "c", "blog")],
}


def test_rank_fuses_the_legs_that_answered() -> None:
    ranked = rank(SPEC, LEGS)
    assert [f.id for f in ranked.candidates] == ["a2", "a1", "b1", "c1"]
    assert list(ranked.units) == [(f, 1) for f in ranked.candidates]
    assert ranked.weights == {Leg.DENSE: 0.5, Leg.SPARSE: 0.5}
    assert ranked.applied_weights == {Leg.DENSE: 0.5, Leg.SPARSE: 0.5}
    assert set(ranked.fields) == {"a1", "a2", "b1", "c1"}


def test_a_skipped_leg_is_reported_with_weight_0_and_takes_no_part() -> None:
    ranked = rank(SPEC, {Leg.SPARSE: LEGS[Leg.SPARSE]}, skipped=[Leg.DENSE])
    assert ranked.weights == {Leg.DENSE: 0.0, Leg.SPARSE: 0.5}
    assert ranked.applied_weights == {Leg.SPARSE: 1.0}
    assert [f.id for f in ranked.candidates] == ["a2", "c1"]


def test_threshold_grouping_and_page() -> None:
    # RRF scores: a2 = 0.5/63 + 0.5/61, a1 = 0.5/61, b1 = c1 = 0.5/62.
    spec = dataclasses.replace(SPEC, min_score=0.5 / 61.5, group_by_document=True)
    ranked = rank(spec, LEGS)
    assert [f.id for f in ranked.candidates] == ["a2", "a1"]
    assert [(f.id, n) for f, n in ranked.units] == [("a2", 2)]
    everything = rank(SPEC, LEGS)
    paged = dataclasses.replace(SPEC, offset=1, top_k=2)
    assert [f.id for f, _ in page(everything.units, spec=paged)] == ["a1", "b1"]


def test_pages_end_at_the_window() -> None:
    ranked = rank(SPEC, LEGS)  # four fused hits
    spec = dataclasses.replace(SPEC, window=3, offset=1, top_k=10)
    assert [f.id for f, _ in page(ranked.units, spec=spec)] == ["a1", "b1"]
    assert page(ranked.units, spec=dataclasses.replace(spec, offset=3)) == ()


def test_group_by_document_keeps_the_best_chunk_first() -> None:
    ranked = rank(SPEC, LEGS)
    grouped = group_by_document(ranked.candidates, fields=ranked.fields)
    assert [(f.id, n) for f, n in grouped] == [("a2", 2), ("b1", 1), ("c1", 1)]
