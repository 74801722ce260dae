"""A tenant's vocabulary, and the words of it a mistyped or unfinished query word means.

Typo tolerance (docs/search.md, Typos) matches a query word to the words the tenant's
documents hold, never to a dictionary: a corpus of aerodynamics corrects ``boundry`` to
``boundary`` and a corpus of recipes ``boundry`` to nothing.

* **The vocabulary** is every Latin-script word of the indexed text, folded as the
  analyzer folds it (case, accents; :func:`vocabulary_words`), from 3 to
  :data:`MAX_WORD_CHARS` characters, stop words and digits left out. The indexer adds a
  document's words as it indexes it; a word whose last document is deleted stays listed
  and is dropped at query time, where its document frequency is 0.
* **Typos** are counted with the Damerau-Levenshtein distance (an insertion, a deletion,
  a substitution or a swap of two letters is one typo), allowed as Meilisearch allows
  them (:func:`allowed_typos`): none below 5 characters, one from 5, two from 9. A word
  gets the candidates at the smallest distance any has, so ``plaet`` becomes ``plate``
  and not also ``plant``, ``planet``.
* **Prefixes** (search as you type): the vocabulary's words that start with the word.

rapidfuzz computes the distances (C++, with an early exit past the bound) over the words
within the bound in length; the vocabulary is kept sorted for the prefix lookups.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Iterable
from typing import Final

from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

from hsearch.lexical.analyzer import STOP_WORDS, english_stem, tokens

__all__ = [
    "MAX_WORD_CHARS",
    "MIN_WORD_CHARS",
    "Vocabulary",
    "allowed_typos",
    "fold_word",
    "normal_word",
    "vocabulary_words",
]

MIN_WORD_CHARS: Final = 3
MAX_WORD_CHARS: Final = 32
"""Longer words (identifiers, chemical names run together) are not listed."""
ONE_TYPO_FROM: Final = 5
TWO_TYPOS_FROM: Final = 9


def allowed_typos(word: str) -> int:
    """How many typos a query word of this length may carry (Meilisearch's defaults)."""
    if len(word) >= TWO_TYPOS_FROM:
        return 2
    if len(word) >= ONE_TYPO_FROM:
        return 1
    return 0


def normal_word(word: str) -> str:
    """``word`` NFKC-normalised, case folded, without the accents on Latin letters."""
    folded = unicodedata.normalize("NFKC", word).casefold()
    if folded.isascii():
        return folded
    stripped = "".join(
        c for c in unicodedata.normalize("NFD", folded) if not unicodedata.combining(c)
    )
    return unicodedata.normalize("NFC", stripped)


def _latin(char: str) -> bool:
    return char.isascii() or unicodedata.name(char, "").startswith("LATIN ")


def fold_word(word: str) -> str:
    """``word`` as the vocabulary lists it (:func:`normal_word`); empty when it is no
    listable word: too short or long, a stop word, digits only, not Latin letters."""
    folded = normal_word(word)
    if not MIN_WORD_CHARS <= len(folded) <= MAX_WORD_CHARS or folded in STOP_WORDS:
        return ""
    if folded.isdigit() or not all(c.isalnum() and _latin(c) for c in folded):
        return ""
    return folded


def vocabulary_words(texts: Iterable[str]) -> set[str]:
    """The listable words of ``texts`` (:func:`fold_word`), each once."""
    words: set[str] = set()
    for text in texts:
        for token in tokens(text):
            if not token.cjk:
                word = fold_word(token.text)
                if word:
                    words.add(word)
    return words


class Vocabulary:
    """A tenant's words, for :meth:`corrections` and :meth:`completions`. Immutable."""

    def __init__(self, words: Iterable[str]) -> None:
        self._sorted = sorted(set(words))
        self._set = frozenset(self._sorted)
        self._by_length = _by_length(self._sorted)
        # Each stem with its shortest word: a typo of a form the text does not hold
        # ("vulcano" when it holds "volcanoes") is found through the stems.
        stems: dict[str, str] = {}
        for word in sorted(self._sorted, key=len):
            stems.setdefault(english_stem(word), word)
        self._stems = stems
        self._stems_by_length = _by_length(sorted(stems))

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, word: object) -> bool:
        return word in self._set

    def corrections(self, word: str, *, max_typos: int) -> list[tuple[str, int]]:
        """The listed words within ``max_typos`` of ``word`` (folded), at the smallest
        distance any of them has, with that distance; none when ``word`` is listed.
        When no listed word is that close, the stems are compared (the typed word's
        against the listed words'), each standing for its shortest word."""
        if max_typos <= 0 or word in self._set:
            return []
        found = _closest(word, self._by_length, max_typos)
        if found:
            return found
        by_stem = _closest(english_stem(word), self._stems_by_length, max_typos)
        return sorted((self._stems[s], d) for s, d in by_stem)

    def completions(self, prefix: str, *, limit: int) -> list[str]:
        """Up to ``limit`` listed words that start with ``prefix`` and are longer,
        shortest first."""
        if not prefix or limit <= 0:
            return []
        start = bisect.bisect_left(self._sorted, prefix)
        found: list[str] = []
        for word in self._sorted[start:]:
            if not word.startswith(prefix):
                break
            if word != prefix:
                found.append(word)
        found.sort(key=lambda w: (len(w), w))
        return found[:limit]


def _by_length(words: Iterable[str]) -> dict[int, list[str]]:
    grouped: dict[int, list[str]] = {}
    for word in words:
        grouped.setdefault(len(word), []).append(word)
    return grouped


def _closest(word: str, by_length: dict[int, list[str]], max_typos: int) -> list[tuple[str, int]]:
    """The words of ``by_length`` within ``max_typos`` of ``word``, at the smallest
    distance found, with it, in order."""
    found: list[tuple[str, int]] = []
    for length in range(len(word) - max_typos, len(word) + max_typos + 1):
        choices = by_length.get(length)
        if not choices:
            continue
        for match, distance, _ in process.extract_iter(
            word, choices, scorer=DamerauLevenshtein.distance, score_cutoff=max_typos
        ):
            found.append((str(match), int(distance)))
    if not found:
        return []
    best = min(d for _, d in found)
    return sorted((w, d) for w, d in found if d == best)
