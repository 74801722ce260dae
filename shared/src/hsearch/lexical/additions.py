"""What the keyword leg searches beyond the words typed: typo corrections, completions of
the last word, synonyms; pure (:mod:`hsearch.lexical.expansion` reads the lexicons).

Each addition is a :class:`TermExpansion` (which query word, which word it adds, why);
its terms join the query's BM25 vector weighted below the words typed (a fraction of
their IDF, :data:`FACTORS`), so a chunk holding the word as typed ranks above one holding
only a correction, all else equal. A term already in the query keeps its weight.

* **Typos** (:mod:`hsearch.lexical.typos`): only for a word the tenant's text does not
  hold in any of its analyzer forms (no term of it has a document frequency): a word
  found as typed is taken as meant. Up to :data:`MAX_CORRECTIONS` words at the smallest
  distance, those the corpus holds most.
* **Prefix** (``prefix: true``): the last word also as the start of longer words, the
  :data:`MAX_COMPLETIONS` the corpus holds most.
* **Synonyms** (:mod:`hsearch.lexical.synonyms`), on the query's text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from hsearch.lexical.analyzer import analyze_query, term_id
from hsearch.lexical.synonyms import Synonyms
from hsearch.lexical.typos import Vocabulary, allowed_typos, fold_word, normal_word
from hsearch.types import SparseVector

__all__ = [
    "FACTORS",
    "Expanded",
    "ExpansionKind",
    "TenantLexicon",
    "TermExpansion",
    "expand_learned",
    "expand_query",
    "expansion_candidates",
]


class ExpansionKind(StrEnum):
    TYPO = "typo"
    PREFIX = "prefix"
    SYNONYM = "synonym"


FACTORS: Final[dict[tuple[ExpansionKind, int], float]] = {
    (ExpansionKind.TYPO, 1): 0.6,
    (ExpansionKind.TYPO, 2): 0.4,
    (ExpansionKind.PREFIX, 0): 0.8,
    (ExpansionKind.SYNONYM, 0): 0.8,
}
"""The share of its IDF an added term weighs, by why it was added (and typos)."""
MAX_CORRECTIONS: Final = 3
MAX_COMPLETIONS: Final = 10
_COMPLETION_CANDIDATES: Final = 200


@dataclass(frozen=True, slots=True)
class TermExpansion:
    """A word (or words) the keyword leg searched for because of a query word."""

    query: str
    """The query's word (or the synonym rule's side found in the query)."""
    matched: str
    """What was searched for because of it."""
    kind: ExpansionKind
    typos: int = 0

    @property
    def factor(self) -> float:
        return FACTORS[(self.kind, self.typos)]


@dataclass(frozen=True, slots=True)
class Expanded:
    vector: SparseVector
    """The query's BM25 weights with the additions'."""
    expansions: tuple[TermExpansion, ...] = ()
    """The additions that weigh (their words found in the tenant's text)."""


@dataclass(frozen=True, slots=True)
class TenantLexicon:
    """What expansion reads of a tenant: its words and its synonyms."""

    vocabulary: Vocabulary
    synonyms: Synonyms


def expansion_candidates(
    *,
    words: Sequence[str],
    text: str,
    lexicon: TenantLexicon,
    known: Callable[[str], bool],
    typos: bool,
    prefix: bool,
) -> list[TermExpansion]:
    """Every addition the lexicon offers for a query (``text``, whose searched words are
    ``words``) before any is weighed: corrections of the words that are not ``known``
    (nor stop words), completions of the last word, synonyms."""
    candidates: list[TermExpansion] = []
    vocabulary = lexicon.vocabulary
    if typos and len(vocabulary):
        for word in words:
            folded = fold_word(word)
            if not folded or not analyze_query(word) or known(word):
                continue
            for match, distance in vocabulary.corrections(folded, max_typos=allowed_typos(folded)):
                candidates.append(TermExpansion(word, match, ExpansionKind.TYPO, distance))
    if prefix and words and len(vocabulary):
        last = words[-1]
        for match in vocabulary.completions(normal_word(last), limit=_COMPLETION_CANDIDATES):
            candidates.append(TermExpansion(last, match, ExpansionKind.PREFIX))
    for source, target in lexicon.synonyms.lookup(text):
        candidates.append(TermExpansion(source, target, ExpansionKind.SYNONYM))
    return candidates


def expand_query(
    *,
    words: Sequence[str],
    text: str,
    weights: SparseVector,
    lexicon: TenantLexicon,
    weigh: Callable[[SparseVector], SparseVector],
    typos: bool,
    prefix: bool,
) -> Expanded:
    """The query's BM25 ``weights`` (of ``text``, whose searched words are ``words``)
    with the additions the module docstring lists. ``weigh`` gives the tenant's IDF of
    term counts (:meth:`~hsearch.lexical.statistics.LexicalStatistics.weigh_query`)."""
    present = {int(i) for i in weights.indices}

    def known(word: str) -> bool:
        return any(term_id(t) in present for t in analyze_query(word))

    candidates = expansion_candidates(
        words=words, text=text, lexicon=lexicon, known=known, typos=typos, prefix=prefix
    )
    if not candidates:
        return Expanded(weights)
    terms_of = {c.matched: [term_id(t) for t in analyze_query(c.matched)] for c in candidates}
    counts: dict[int, float] = {t: 1.0 for ids in terms_of.values() for t in ids}
    idf = weigh(SparseVector.from_mapping(counts)).to_dict()

    def rarity(c: TermExpansion) -> float:
        return min((idf[t] for t in terms_of[c.matched] if t in idf), default=float("inf"))

    kept = _kept(candidates, rarity)
    merged = weights.to_dict()
    for expansion in kept:
        for t in terms_of[expansion.matched]:
            if t in idf and t not in present:
                merged[t] = max(merged.get(t, 0.0), expansion.factor * idf[t])
    return Expanded(SparseVector.from_mapping(merged), tuple(kept))


def expand_learned(
    weights: SparseVector,
    candidates: Sequence[TermExpansion],
    vectors: Mapping[str, SparseVector],
) -> Expanded:
    """A learned sparse encoder's query ``weights`` (BGE-M3's) with ``candidates``
    added: each the encoder's own weights of its words (``vectors``, by
    :attr:`TermExpansion.matched`) times its factor. Without document frequencies,
    corrections and completions are kept in the order they were found (fewest typos,
    then shortest), within the same limits."""
    kept = _kept(candidates, lambda c: 0.0 if vectors.get(c.matched) else float("inf"))
    merged = weights.to_dict()
    present = set(merged)
    for expansion in kept:
        for t, v in vectors[expansion.matched].to_dict().items():
            if t not in present:
                merged[t] = max(merged.get(t, 0.0), expansion.factor * v)
    return Expanded(SparseVector.from_mapping(merged), tuple(kept))


def _kept(
    candidates: Sequence[TermExpansion], rarity: Callable[[TermExpansion], float]
) -> list[TermExpansion]:
    """The candidates whose words the tenant holds (a finite ``rarity``); per query word
    the most frequent corrections and completions (lowest rarity first), synonyms all."""
    kept: list[TermExpansion] = []
    for kind, limit in (
        (ExpansionKind.TYPO, MAX_CORRECTIONS),
        (ExpansionKind.PREFIX, MAX_COMPLETIONS),
    ):
        by_word: dict[str, list[TermExpansion]] = {}
        for c in candidates:
            if c.kind is kind and rarity(c) != float("inf"):
                by_word.setdefault(c.query, []).append(c)
        for found in by_word.values():
            kept.extend(sorted(found, key=lambda c: (c.typos, rarity(c)))[:limit])
    kept.extend(
        c for c in candidates if c.kind is ExpansionKind.SYNONYM and rarity(c) != float("inf")
    )
    return kept
