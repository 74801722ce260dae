"""Ordering hits by new scores (pure): the last step of the ranking after fusion.

The scores come from a :class:`~hsearch.rerank.protocol.Reranker`; ordering them is
ranking logic (stable ties, refusing NaN), kept apart from the model adapters so it is
tested exhaustively without one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter
from typing import TypeVar

__all__ = ["rerank"]

_T = TypeVar("_T")


def rerank(hits: Sequence[_T], scores: Sequence[float]) -> list[tuple[_T, float]]:
    """Pair each hit with its score, best first; equal scores keep the hits' original order.

    ``scores[i]`` belongs to ``hits[i]``. Raises :class:`ValueError` when the lengths
    differ or a score is NaN (which has no place in an order).
    """
    if len(hits) != len(scores):
        msg = f"rerank needs one score per hit: got {len(scores)} scores for {len(hits)} hits"
        raise ValueError(msg)
    values = [float(score) for score in scores]
    if any(math.isnan(value) for value in values):
        msg = "rerank scores must be numbers (finite or infinite), not NaN"
        raise ValueError(msg)
    # sorted() is stable, also with reverse=True: ties stay in their original order.
    return sorted(zip(hits, values, strict=True), key=itemgetter(1), reverse=True)
