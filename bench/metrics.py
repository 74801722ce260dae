"""Retrieval metrics, pure: nDCG@k with graded gains, recall@k, and the helpers around them.

Conventions (those of BEIR / ``pytrec_eval``):

* ``qrels`` maps a document id to its judged relevance; a score > 0 is relevant, and
  the gain of a retrieved document is its score (linear gain), 0 when unjudged.
* DCG@k = Σ_{i=1..k} gain_i / log2(i + 1); the ideal DCG sorts the query's own
  judgements by score; nDCG@k = DCG@k / IDCG@k.
* recall@k = |relevant ∩ top k| / |relevant|.
* A ranking is first deduplicated (the first, best-ranked occurrence of an id wins):
  the search returns chunks, several of which can belong to one document.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

__all__ = [
    "dedup",
    "evaluate_ranking",
    "mean_metrics",
    "ndcg_at_k",
    "percentile",
    "recall_at_k",
    "relevant",
]


def dedup(ids: Iterable[str]) -> list[str]:
    """``ids`` in order with repeats removed (the first occurrence is kept)."""
    return list(dict.fromkeys(ids))


def relevant(qrels: Mapping[str, float]) -> set[str]:
    """The ids judged relevant (score > 0)."""
    return {doc for doc, score in qrels.items() if score > 0}


def _dcg(gains: Sequence[float]) -> float:
    return math.fsum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """nDCG@k of a deduplicated ``ranking``; 0.0 when the query has no relevant document."""
    if k < 1:
        msg = f"k must be >= 1, got {k}"
        raise ValueError(msg)
    ideal = _dcg(sorted((s for s in qrels.values() if s > 0), reverse=True)[:k])
    if ideal == 0.0:
        return 0.0
    gains = [max(float(qrels.get(doc, 0.0)), 0.0) for doc in ranking[:k]]
    return _dcg(gains) / ideal


def recall_at_k(ranking: Sequence[str], qrels: Mapping[str, float], k: int) -> float:
    """Fraction of the relevant documents found in the first ``k`` of ``ranking``."""
    if k < 1:
        msg = f"k must be >= 1, got {k}"
        raise ValueError(msg)
    wanted = relevant(qrels)
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranking[:k])) / len(wanted)


def evaluate_ranking(ranking: Iterable[str], qrels: Mapping[str, float]) -> dict[str, float]:
    """nDCG@10, recall@5, recall@10 and recall@100 of one query's ranking (deduplicated
    first)."""
    ranked = dedup(ranking)
    return {
        "ndcg@10": ndcg_at_k(ranked, qrels, 10),
        "recall@5": recall_at_k(ranked, qrels, 5),
        "recall@10": recall_at_k(ranked, qrels, 10),
        "recall@100": recall_at_k(ranked, qrels, 100),
    }


def mean_metrics(per_query: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over queries (an empty input gives an empty dict)."""
    if not per_query:
        return {}
    return {name: math.fsum(q[name] for q in per_query) / len(per_query) for name in per_query[0]}


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0-100) with linear interpolation; 50 is the median."""
    if not values:
        msg = "percentile of an empty sequence"
        raise ValueError(msg)
    if not 0 <= p <= 100:
        msg = f"p must be within [0, 100], got {p}"
        raise ValueError(msg)
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)
