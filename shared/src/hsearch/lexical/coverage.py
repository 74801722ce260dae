"""How much of a query a keyword candidate holds (pure: no I/O).

``adaptive`` fusion reads the keyword leg's first candidate's coverage of the query
(:class:`hsearch.search.fusion.QueryReading`, docs/fusion.md): where nothing stands out,
a keyword leg whose first candidate holds every word of the query, as on short queries
many chunks do, says little about their order, and leaves it to the other legs; the
evidence that a first candidate stands out is scaled by the share of the query it holds.

Coverage is the share of the query's weight the candidate holds:

* for an encoder whose sparse side is term counts (BM25 from the tenant's statistics),
  :func:`query_coverage` over the query's words (:func:`query_words`): a word weighs
  the largest weight the keyword query gives one of its terms (the BM25 IDF of its
  stem or unstemmed form; for what the leg searched for because of it, a typo's
  correction, a completion, a synonym of one word, the share of the IDF it was given),
  and a word none of whose terms any chunk holds weighs the IDF of a term no chunk
  holds: it counts, and no candidate can hold it;
* for a learned sparse encoder, :func:`vector_coverage`: the share of the query
  vector's weight on the terms the candidate holds.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

from hsearch.lexical.additions import TermExpansion
from hsearch.lexical.analyzer import analyze_query, match_terms, term_id, tokens
from hsearch.types import SparseVector

__all__ = ["query_coverage", "query_words", "vector_coverage"]


def _word_forms(text: str) -> list[frozenset[int]]:
    """The distinct words of ``text``, each as the term ids that match it."""
    words: dict[frozenset[int], None] = {}
    for token in tokens(text):
        if token.cjk:
            for bigram in analyze_query(token.text):
                words[frozenset({term_id(bigram)})] = None
        elif forms := match_terms(token.text):
            words[frozenset(term_id(t) for t in forms)] = None
    return list(words)


def query_words(text: str, expansions: Iterable[TermExpansion] = ()) -> list[frozenset[int]]:
    """The query's distinct words, stop words left out, each as the term ids that match
    it: its stem and its unstemmed form (a CJK bigram alone), and the terms of what the
    keyword leg searched for because of that one word (``expansions``: a typo's
    correction, a prefix's completion, a one-word synonym)."""
    words = _word_forms(text)
    extra: dict[frozenset[int], set[int]] = {}
    for expansion in expansions:
        source = _word_forms(expansion.query)
        if len(source) == 1 and source[0] in words:
            for forms in _word_forms(expansion.matched):
                extra.setdefault(source[0], set()).update(forms)
    return [word | extra[word] if word in extra else word for word in words]


def query_coverage(
    words: Sequence[frozenset[int]],
    held: Collection[int],
    *,
    weights: Mapping[int, float],
    unheld_weight: float,
) -> float:
    """The share of ``words``' weight that a candidate holding the terms ``held`` holds,
    in ``[0, 1]`` (0 for a query without words).

    A word weighs the largest of its terms' ``weights`` (the query's BM25 weights: the
    terms some chunk holds), or ``unheld_weight`` when no chunk holds any of its terms;
    it is held when the candidate holds one of its terms.
    """
    mass: list[float] = []
    covered: list[float] = []
    for word in words:
        known = [weights[t] for t in word if weights.get(t, 0.0) > 0.0]
        weight = max(known) if known else unheld_weight
        mass.append(weight)
        if not word.isdisjoint(held):
            covered.append(weight)
    total = math.fsum(mass)
    if total <= 0.0:
        return 0.0
    return min(1.0, math.fsum(covered) / total)


def vector_coverage(query: SparseVector, held: Collection[int]) -> float:
    """The share of ``query``'s weight on the terms ``held`` (a learned sparse query: its
    terms carry the words' weight), in ``[0, 1]``; 0 for an empty query."""
    positive = [(i, v) for i, v in zip(query.indices, query.values, strict=True) if v > 0.0]
    total = math.fsum(v for _, v in positive)
    if total <= 0.0:
        return 0.0
    return min(1.0, math.fsum(v for i, v in positive if i in held) / total)
