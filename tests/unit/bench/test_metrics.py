"""The relevance metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest
from bench.metrics import (
    dedup,
    evaluate_ranking,
    mean_metrics,
    ndcg_at_k,
    percentile,
    recall_at_k,
    relevant,
)

LOG2_3 = math.log2(3)


def test_dedup_keeps_the_first_occurrence_in_order() -> None:
    assert dedup(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]
    assert dedup([]) == []


def test_relevant_is_score_above_zero() -> None:
    assert relevant({"a": 2, "b": 1, "c": 0, "d": -1}) == {"a", "b"}


def test_ndcg_binary_single_relevant_at_rank_two() -> None:
    # DCG = 1/log2(3); IDCG = 1/log2(2) = 1.
    assert ndcg_at_k(["x", "a"], {"a": 1}, 10) == pytest.approx(1 / LOG2_3)


def test_ndcg_perfect_ranking_is_one() -> None:
    assert ndcg_at_k(["a", "b", "c"], {"a": 2, "b": 1, "c": 1}, 10) == pytest.approx(1.0)


def test_ndcg_graded_gains() -> None:
    qrels = {"a": 2, "b": 1, "c": 0}
    # ranking b, c, a: DCG = 1/log2(2) + 0/log2(3) + 2/log2(4) = 1 + 0 + 1 = 2
    # ideal a, b:      IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.6309...
    expected = 2 / (2 + 1 / LOG2_3)
    assert ndcg_at_k(["b", "c", "a"], qrels, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.760188, abs=1e-6)


def test_ndcg_graded_swap_costs_less_than_missing_the_best() -> None:
    qrels = {"a": 2, "b": 1}
    swapped = ndcg_at_k(["b", "a"], qrels, 10)  # (1 + 2/log2 3) / (2 + 1/log2 3)
    assert swapped == pytest.approx((1 + 2 / LOG2_3) / (2 + 1 / LOG2_3))
    only_b = ndcg_at_k(["b"], qrels, 10)  # 1 / (2 + 1/log2 3)
    assert only_b == pytest.approx(1 / (2 + 1 / LOG2_3))
    assert only_b < swapped < 1.0


def test_ndcg_cutoff_ignores_ranks_beyond_k() -> None:
    ranking = [f"x{i}" for i in range(10)] + ["a"]
    assert ndcg_at_k(ranking, {"a": 1}, 10) == 0.0
    assert ndcg_at_k(ranking, {"a": 1}, 11) == pytest.approx(1 / math.log2(12))


def test_ideal_dcg_is_truncated_at_k() -> None:
    qrels = {f"d{i}": 1 for i in range(12)}
    ranking = [f"d{i}" for i in range(10)]
    assert ndcg_at_k(ranking, qrels, 10) == pytest.approx(1.0)


def test_ndcg_unjudged_and_zero_scored_documents_gain_nothing() -> None:
    # "z" is judged non-relevant (0): it gains nothing and is not in the ideal ranking.
    assert ndcg_at_k(["z", "u", "a"], {"a": 1, "z": 0}, 10) == pytest.approx(0.5)


def test_ndcg_without_relevant_documents_is_zero() -> None:
    assert ndcg_at_k(["a"], {"a": 0}, 10) == 0.0
    assert ndcg_at_k([], {}, 10) == 0.0


def test_recall_at_k() -> None:
    qrels = {"a": 1, "b": 2, "c": 1, "d": 1, "z": 0}
    ranking = ["a", "x", "b", "z"] + [f"y{i}" for i in range(10)] + ["c"]
    assert recall_at_k(ranking, qrels, 10) == pytest.approx(2 / 4)
    assert recall_at_k(ranking, qrels, 100) == pytest.approx(3 / 4)
    assert recall_at_k(ranking, qrels, 1) == pytest.approx(1 / 4)
    assert recall_at_k(ranking, {"a": 0}, 10) == 0.0


@pytest.mark.parametrize("k", [0, -1])
def test_k_must_be_positive(k: int) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        ndcg_at_k(["a"], {"a": 1}, k)
    with pytest.raises(ValueError, match="k must be >= 1"):
        recall_at_k(["a"], {"a": 1}, k)


def test_evaluate_ranking_deduplicates_chunks_of_one_document() -> None:
    # Two chunks of "x" come first: deduplicated, "a" is at rank 2, not 3.
    metrics = evaluate_ranking(["x", "x", "a", "a"], {"a": 1})
    assert metrics["ndcg@10"] == pytest.approx(1 / LOG2_3)
    assert metrics["recall@10"] == 1.0
    assert metrics["recall@100"] == 1.0


def test_evaluate_ranking_dedup_brings_documents_into_the_cutoff() -> None:
    # Eleven chunks, ten of them of "x": without dedup "a" would fall outside the top 10.
    metrics = evaluate_ranking(["x"] * 10 + ["a"], {"a": 1})
    assert metrics["recall@10"] == 1.0
    assert metrics["ndcg@10"] == pytest.approx(1 / LOG2_3)


def test_evaluate_ranking_reports_recall_at_5() -> None:
    # Two relevant documents, at (deduplicated) ranks 2 and 6: one of them in the top 5.
    metrics = evaluate_ranking(["x", "a", "a", "y", "z", "w", "b"], {"a": 1, "b": 1})
    assert list(metrics) == ["ndcg@10", "recall@5", "recall@10", "recall@100"]
    assert metrics["recall@5"] == 0.5
    assert metrics["recall@10"] == 1.0


def test_mean_metrics() -> None:
    per_query = [{"ndcg@10": 1.0, "recall@10": 0.5}, {"ndcg@10": 0.0, "recall@10": 1.0}]
    assert mean_metrics(per_query) == {"ndcg@10": 0.5, "recall@10": 0.75}
    assert mean_metrics([]) == {}


def test_percentile() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0) == 1.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 100) == 4.0
    assert percentile([5.0], 95) == 5.0
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
