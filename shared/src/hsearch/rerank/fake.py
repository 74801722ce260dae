"""A reranker with no model, for tests: deterministic, instant, and tie-prone."""

from __future__ import annotations

from collections.abc import Sequence

from hsearch.lexical.analyzer import ANALYZER_VERSION, analyze
from hsearch.rerank.protocol import check_passages

__all__ = ["FakeReranker"]


class FakeReranker:
    """Deterministic scorer with no model: the number of distinct query terms a passage holds.

    Terms come from :func:`hsearch.lexical.analyzer.analyze`, the analysis of the sparse
    leg, so ``"Tokyo"`` matches ``"TOKYO"`` and Japanese matches by character bigrams.
    Scores are whole numbers, so ties are common: handy for testing tie-breaks.
    ``calls`` counts :meth:`score` calls (a test can check that rerank was skipped).
    """

    def __init__(self) -> None:
        self.calls = 0

    @property
    def name(self) -> str:
        return f"fake-reranker:{ANALYZER_VERSION}"

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """Distinct query terms found in each passage, as floats."""
        check_passages(passages)
        self.calls += 1
        terms = set(analyze(query))
        return [float(len(terms.intersection(analyze(passage)))) for passage in passages]
