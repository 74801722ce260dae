"""The lexical analyzer behind the term-frequency sparse vectors (offline and fake encoders).

Pure and deterministic: the same text gives the same terms, and the same term the same
index, on every machine and in every process. Documents and queries go through the very
same analysis, so whatever it does to a word it does on both sides.

Analysis, in order:

1. NFKC normalisation, case folding, NFKC again (so full-width Latin letters match ``abc``
   and ``Straße`` matches ``STRASSE``); variation selectors are dropped (presentation only).
2. Word tokens: maximal runs of letters and digits (Unicode-aware; combining marks stay
   inside their word, so Devanagari or decomposed accents are not cut apart; the
   underscore separates, so ``hybrid_search`` also matches ``hybrid`` and ``search``).
3. CJK runs (Han, Hiragana, Katakana, Hangul) inside a token become overlapping character
   bigrams (``東京都`` → ``東京``, ``京都``); a one-character run stays a unigram. This is
   the Lucene ``CJKBigramFilter`` approach: no dictionary, recall-friendly, and good
   enough for BM25 on Japanese, Chinese and Korean.

No stopword list: BM25's IDF already drives very common terms towards zero weight, a list
would be English-only (this analyzer serves every language), it would break queries made
of common words ("The Who", "to be or not to be"), and Lucene's and Elasticsearch's
standard analyzers have not removed stopwords by default for years either.

Scripts written without spaces other than CJK (Thai, Lao, Khmer, Burmese) come out as
whole-phrase tokens; they would need a dictionary segmenter, which is out of scope.

Change :data:`ANALYZER_VERSION` whenever the terms or their ids change: it is part of the
encoder version, so a collection built with the old analysis refuses the new one.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from hsearch.types import SparseVector

__all__ = [
    "ANALYZER_VERSION",
    "MAX_TERM_CHARS",
    "TERM_ID_BOUND",
    "Token",
    "analyze",
    "is_cjk",
    "term_frequencies",
    "term_id",
    "tokens",
]

ANALYZER_VERSION = "lex1"
"""Bumped whenever :func:`analyze` or :func:`term_id` would give other results."""

TERM_ID_BOUND = 2**31
"""Term ids lie in ``[0, TERM_ID_BOUND)``: fits signed 32-bit consumers as well as Milvus."""

MAX_TERM_CHARS = 64
"""Longer word tokens are dropped: they are base64 blobs, minified code or URLs run
together, never typed in a query, and would only grow the sparse vectors. Hex digests
(40-64 characters) still fit."""

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # ideographic iteration mark, closing mark, number zero
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3130-\u318f"  # Hangul Compatibility Jamo
    "\u31f0-\u31ff"  # Katakana Phonetic Extensions
    "\u3400-\u4dbf"  # CJK Unified Ideographs Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\ua960-\ua97f"  # Hangul Jamo Extended-A
    "\uac00-\ud7af"  # Hangul Syllables
    "\ud7b0-\ud7ff"  # Hangul Jamo Extended-B
    "\uf900-\ufaff"  # CJK Compatibility Ideographs
    "\uff66-\uff9f"  # Half-width Katakana
    "\U00020000-\U0003134f"  # CJK Unified Ideographs Extensions B-G, compatibility supplement
)
# The scripts analyze() splits into bigrams, as a regex character-class body: Han (with
# ideographic iteration marks, compatibility ideographs and the supplementary planes),
# Hiragana, Katakana (with phonetic extensions and half-width forms) and Hangul
# (syllables and jamo). NFKC already maps half-width Katakana and compatibility jamo to
# their canonical forms; the ranges list them anyway so the class never depends on it.
# Code that must agree with the analyzer asks is_cjk() or reads tokens().
_CJK_CHAR = re.compile(f"[{_CJK_RANGES}]")

# Presentation-only code points: emoji/text style and ideographic variation selectors.
_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")

# Python's ``\w`` leaves combining marks out; these planes hold every mark in Unicode.
_MARK_SCAN = (range(0x20000), range(0xE0000, 0xE1000))


def _mark_class() -> str:
    """A regex class body with every combining mark (categories Mn, Mc, Me)."""
    ranges: list[tuple[int, int]] = []
    for block in _MARK_SCAN:
        for cp in block:
            if unicodedata.category(chr(cp)).startswith("M"):
                if ranges and ranges[-1][1] == cp - 1:
                    ranges[-1] = (ranges[-1][0], cp)
                else:
                    ranges.append((cp, cp))
    return "".join(
        re.escape(chr(lo)) if lo == hi else f"{re.escape(chr(lo))}-{re.escape(chr(hi))}"
        for lo, hi in ranges
    )


@cache
def _token_pattern() -> re.Pattern[str]:
    # Built on first use, not at import: scanning for marks costs ~30 ms, and importing
    # the embedding package (e.g. the factory) must stay cheap.
    marks = _mark_class()
    # A CJK run: CJK-block characters that are also word characters (the blocks hold a
    # few punctuation marks, such as the katakana middle dot, which must separate).
    cjk_run = rf"(?:(?=\w)[{_CJK_RANGES}])+"
    # Any other word: starts with a letter or digit, continues with letters, digits or
    # combining marks, and stops at CJK, at underscores and at everything else.
    word = rf"[^\W_{_CJK_RANGES}](?:[^\W_{_CJK_RANGES}]|[{marks}])*"
    return re.compile(rf"(?P<cjk>{cjk_run})|{word}")


@dataclass(frozen=True, slots=True)
class Token:
    """A word or a CJK run as the analyzer delimits it, located in the text it came from."""

    text: str
    start: int
    """Offset of the token's first character in the text."""
    end: int
    """Offset just past the token's last character."""
    cjk: bool
    """A run of CJK characters (:func:`is_cjk`), which :func:`analyze` reads as
    overlapping bigrams; otherwise a word, which it reads whole."""


def is_cjk(char: str) -> bool:
    """Whether ``char`` (one character) belongs to the scripts :func:`analyze` splits into
    bigrams: Han, Hiragana, Katakana and Hangul, the scripts written without spaces
    between words, where every character is a unit of its own."""
    return _CJK_CHAR.fullmatch(char) is not None


def tokens(text: str) -> Iterator[Token]:
    """The analyzer's tokens of ``text`` as it is (not normalised), with their offsets.

    For code that must point into the original text with the analyzer's boundaries, such
    as snippet highlighting: :func:`analyze` applied to a token's text (or to a bigram of
    a CJK run) gives the terms it stands for. The boundaries are those :func:`analyze`
    draws in the normalised text except where normalisation moves them: a variation
    selector, which :func:`analyze` drops, separates two CJK characters here.
    """
    for match in _token_pattern().finditer(text):
        yield Token(match.group(0), match.start(), match.end(), cjk=match.group("cjk") is not None)


def _normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    # Case folding can decompose (``ǰ`` → ``ǰ``); recompose so terms are in one form.
    return _VARIATION_SELECTORS.sub("", unicodedata.normalize("NFKC", folded))


def analyze(text: str) -> list[str]:
    """Split ``text`` into the terms the sparse side indexes, in reading order.

    Terms repeat as often as they occur (their counts are the term frequencies). Never
    yields an empty term; yields no term at all for text without letters or digits.
    """
    terms: list[str] = []
    for match in _token_pattern().finditer(_normalise(text)):
        token = match.group(0)
        if match.group("cjk") is None:
            if len(token) <= MAX_TERM_CHARS:
                terms.append(token)
        elif len(token) == 1:
            terms.append(token)
        else:
            terms.extend(token[i : i + 2] for i in range(len(token) - 1))
    return terms


def term_id(term: str) -> int:
    """The sparse-vector index of ``term``: a stable hash in ``[0, 2**31)``.

    BLAKE2b, never Python's ``hash()``: that one is salted per process, and these ids are
    stored in the index and compared across processes and machines. Distinct terms may
    collide (n distinct terms give about n**2 / 2**32 colliding pairs: ~230 in a million);
    a collision only merges two rare terms' counts, which BM25 tolerates.
    """
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4, person=b"hsearch.term").digest()
    return int.from_bytes(digest, "big") % TERM_ID_BOUND


def term_frequencies(text: str) -> tuple[SparseVector, int]:
    """Count the terms of ``text`` by :func:`term_id`.

    Returns the counts as a sparse vector and the document length in terms (the number
    :func:`analyze` yields, which equals the sum of the counts).
    """
    terms = analyze(text)
    counts = Counter(term_id(term) for term in terms)
    return SparseVector.from_mapping({i: float(n) for i, n in counts.items()}), len(terms)
