"""The lexical analyzer behind the term-frequency sparse vectors (offline and fake encoders).

Pure and deterministic: the same text gives the same terms, and the same term the same
index, on every machine and in every process. Documents and queries go through the same
steps, so whatever analysis does to a word it does on both sides (docs/analyzer.md
has the measurements behind each step).

Analysis, in order:

1. NFKC normalisation, case folding, NFKC again (so full-width Latin letters match ``abc``
   and ``Straße`` matches ``STRASSE``); variation selectors are dropped (presentation only).
2. Word tokens: maximal runs of letters and digits (Unicode-aware; combining marks stay
   inside their word, so Devanagari or decomposed accents are not cut apart; the
   underscore separates, so ``hybrid_search`` also matches ``hybrid`` and ``search``).
3. Accent folding for Latin letters: combining marks on a Latin base letter are removed
   (``café`` ≡ ``cafe``, ``Müller`` ≡ ``muller``). Marks on other scripts stay: in
   Devanagari or Cyrillic (``й``) they tell letters apart.
4. English words: a Latin-script word of an English document (``lang`` ``en``, or no
   ``lang`` at all: then the script decides) is dropped when it is an English stop word
   (:data:`STOP_WORDS`) and otherwise reduced to its Snowball (Porter2) stem
   (``volcanoes`` → ``volcano``). Documents in another language keep their Latin words
   as folded, marked as such (:data:`UNSTEMMED_PREFIX`; no English rules on German or
   Vietnamese text); words in other scripts are never stemmed.
5. CJK runs (Han, Hiragana, Katakana, Hangul) inside a token become overlapping character
   bigrams (``東京都`` → ``東京``, ``京都``); a one-character run stays a unigram. This is
   the Lucene ``CJKBigramFilter`` approach: no dictionary, recall-friendly, and good
   enough for BM25 on Japanese, Chinese and Korean.

Queries carry no language, so :func:`analyze_query` gives each Latin word in both forms:
its stem, which English documents hold, and its folded form marked with
:data:`UNSTEMMED_PREFIX` (``=volcanoes``), which documents in other languages hold. Each
document holds one of the two vocabularies, so a query word matches it through one form
at most; in a tenant without such documents the marked forms match nothing and BM25
leaves them out (document frequency 0). Stop words are dropped from queries in every
form: they cannot weigh in a ranking.

Scripts written without spaces other than CJK (Thai, Lao, Khmer, Burmese) come out as
whole-phrase tokens; they would need a dictionary segmenter, which is out of scope.

Change :data:`ANALYZER_VERSION` whenever the terms or their ids change: it is part of the
encoder version, so a collection built with the old analysis refuses the new one (and
``hsearch reindex`` rebuilds it).
"""

from __future__ import annotations

import hashlib
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache

import Stemmer  # PyStemmer: the Snowball stemmers compiled to C

from hsearch.types import SparseVector

__all__ = [
    "ANALYZER_VERSION",
    "MAX_TERM_CHARS",
    "STOP_WORDS",
    "TERM_ID_BOUND",
    "UNSTEMMED_PREFIX",
    "Token",
    "analyze",
    "analyze_query",
    "english_stem",
    "is_cjk",
    "match_terms",
    "query_term_frequencies",
    "term_frequencies",
    "term_id",
    "term_set",
    "tokens",
]

ANALYZER_VERSION = "lex2"
"""Bumped whenever :func:`analyze`, :func:`analyze_query` or :func:`term_id` would give
other results. ``lex1``: folding and CJK bigrams; ``lex2``: + Latin accent folding,
English stop words and Snowball stems."""

TERM_ID_BOUND = 2**31
"""Term ids lie in ``[0, TERM_ID_BOUND)``: fits signed 32-bit consumers as well as Milvus."""

MAX_TERM_CHARS = 64
"""Longer word tokens are dropped: they are base64 blobs, minified code or URLs run
together, never typed in a query, and would only grow the sparse vectors. Hex digests
(40-64 characters) still fit."""

# Snowball's English stop list (snowballstem.org, algorithms/english/stop.txt), as folded
# words: its contractions ("don't", "they'll") are split at the apostrophe by the
# tokenizer, so their clitics ("s", "t", "ll", "re", "ve", "d", "m") and the unambiguous
# negated forms are listed instead; fragments that are also words of their own ("can",
# "won", "don", "haven", "shan", "let") are not.
_SNOWBALL_ENGLISH_STOP = """
    i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what
    which who whom this that these those am is are was were be been being have has had
    having do does did doing would should could ought
    a an the and but if or because as until while of at by for with about against
    between into through during before after above below to from up down in out on off
    over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very
    s t d ll m re ve isn aren wasn weren hasn hadn doesn didn wouldn shouldn couldn
    mustn cannot
"""

STOP_WORDS: frozenset[str] = frozenset(_SNOWBALL_ENGLISH_STOP.split())
"""English words too common to tell documents apart, dropped from English text and from
every query. A list rather than IDF alone: with IDF an "and" still weighs a third of a
rare word in a small corpus, and it decides rankings among documents that share the
rare words (docs/analyzer.md measures both)."""

_ENGLISH = "en"
"""The language tag (primary subtag) whose Latin words get stop words and stems."""

UNSTEMMED_PREFIX = "="
"""Marks the term of a Latin word analysed without the English rules (a document in
another language): ``volcanoes`` there is ``=volcanoes``. Stems and these words are then
two vocabularies, so the form a query adds for other languages never matches an English
document by accident (``number`` the word is not ``number`` the stem of ``numbered``).
No token holds ``=``, so no other term starts with it."""

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
def _pattern_parts() -> tuple[str, str]:
    """``(cjk_char, word)``: the regexes of one CJK character and of any other word."""
    # Built on first use, not at import: scanning for marks costs ~30 ms, and importing
    # the embedding package (e.g. the factory) must stay cheap.
    marks = _mark_class()
    # A CJK character that is also a word character (the blocks hold a few punctuation
    # marks, such as the katakana middle dot, which must separate).
    cjk_char = rf"(?=\w)[{_CJK_RANGES}]"
    # Any other word: starts with a letter or digit, continues with letters, digits or
    # combining marks, and stops at CJK, at underscores and at everything else.
    word = rf"[^\W_{_CJK_RANGES}](?:[^\W_{_CJK_RANGES}]|[{marks}])*"
    return cjk_char, word


@cache
def _token_pattern() -> re.Pattern[str]:
    """A token: a CJK run (group ``cjk``) or any other word."""
    cjk_char, word = _pattern_parts()
    return re.compile(rf"(?P<cjk>(?:{cjk_char})+)|{word}")


_FIRST_MARK = "\u0300"
"""The first combining mark in Unicode; no CJK character comes before it either."""
_PLAIN_WORD = re.compile(r"[^\W_]+")


@cache
def _unit_pattern() -> re.Pattern[str]:
    """What a tokenizer counts as one: a CJK character or any other word."""
    cjk_char, word = _pattern_parts()
    return re.compile(rf"{cjk_char}|{word}")


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


def token_spans(text: str) -> list[tuple[int, int]]:
    """The offsets of :func:`tokens` as a tokenizer sees them: a word is one span, a CJK
    run one span per character. Without building the tokens, for code that needs only
    their places or their number (chunking counts tokens of every document)."""
    return [match.span() for match in _unit_pattern().finditer(text)]


def token_count(text: str) -> int:
    """``len(token_spans(text))``, without the spans: one match per unit, found by the
    regex engine alone (chunking counts the tokens of every document; a loop over the
    matches took 14% of the indexing thread's time, docs/history/ingest-throughput.md,
    `b549c62`)."""
    if not text or max(text) < _FIRST_MARK:
        # Below U+0300 there are no combining marks and no CJK: a word is a plain run of
        # letters and digits, which a simpler regex counts several times faster.
        return len(_PLAIN_WORD.findall(text))
    return len(_unit_pattern().findall(text))


def _normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    # Case folding can decompose (``ǰ`` → ``ǰ``); recompose so terms are in one form.
    return _VARIATION_SELECTORS.sub("", unicodedata.normalize("NFKC", folded))


@lru_cache(maxsize=4096)
def _is_latin(char: str) -> bool:
    return unicodedata.name(char, "").startswith("LATIN ")


def _has_latin(word: str) -> bool:
    if word.isascii():
        return not word.isdigit()
    return any(_is_latin(char) for char in word)


def _fold_latin(word: str) -> str:
    """``word`` without the combining marks that sit on Latin letters (``café`` → ``cafe``)."""
    if word.isascii():
        return word
    kept: list[str] = []
    base_is_latin = False
    for char in unicodedata.normalize("NFD", word):
        if unicodedata.combining(char):
            if base_is_latin:
                continue
        else:
            base_is_latin = _is_latin(char)
        kept.append(char)
    return unicodedata.normalize("NFC", "".join(kept))


_STEMMERS = threading.local()


def _stem(word: str) -> str:
    # A Stemmer object is not thread-safe (it keeps a cache): one per thread. Queries
    # are encoded on worker threads.
    stemmer: Stemmer.Stemmer | None = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = Stemmer.Stemmer("english")
        _STEMMERS.english = stemmer
    return str(stemmer.stemWord(word))


def english_stem(word: str) -> str:
    """The Snowball (Porter2) stem of a folded English ``word``, as :func:`analyze` gives
    it (``volcanoes`` → ``volcano``)."""
    return _stem(word)


def _is_english(lang: str | None) -> bool:
    """Whether Latin words of a text tagged ``lang`` are read as English: tagged ``en``
    (any region: ``en-GB``) or not tagged at all (then the script decides)."""
    if not lang:
        return True
    return lang.strip().lower().replace("_", "-").split("-", 1)[0] in ("", "und", _ENGLISH)


def _word_terms(token: str, *, english: bool, query: bool) -> list[str]:
    """The terms of one non-CJK token (module docstring, steps 3 and 4)."""
    folded = _fold_latin(token)
    if len(folded) > MAX_TERM_CHARS:
        return []
    if not _has_latin(folded):
        return [folded]  # digits, other scripts: the same in every language
    if folded in STOP_WORDS and (english or query):
        return []
    if query:
        return [_stem(folded), UNSTEMMED_PREFIX + folded]
    return [_stem(folded)] if english else [UNSTEMMED_PREFIX + folded]


def _analyze(text: str, *, english: bool, query: bool) -> list[str]:
    terms: list[str] = []
    for match in _token_pattern().finditer(_normalise(text)):
        token = match.group(0)
        if match.group("cjk") is None:
            terms.extend(_word_terms(token, english=english, query=query))
        elif len(token) == 1:
            terms.append(token)
        else:
            terms.extend(token[i : i + 2] for i in range(len(token) - 1))
    return terms


def analyze(text: str, *, lang: str | None = None) -> list[str]:
    """Split a document's ``text`` into the terms the sparse side indexes, in reading order.

    ``lang`` is the document's language tag (``en``, ``de``, ``ja``…; empty or ``None``:
    unknown). Latin words get English stop words and stems when it is English or unknown
    (module docstring, step 4). Terms repeat as often as they occur (their counts are the
    term frequencies). Never yields an empty term; yields no term at all for text without
    letters or digits, or made of stop words only.
    """
    return _analyze(text, english=_is_english(lang), query=False)


@lru_cache(maxsize=8192)
def term_set(text: str) -> frozenset[str]:
    """The distinct terms of ``text`` as :func:`analyze` gives them (cached: what support
    and relevance checks compare, sentence against passage, many times a request)."""
    return frozenset(analyze(text))


def analyze_query(text: str) -> list[str]:
    """The terms of a query, which has no language: each Latin word as English text has
    it (its stem) and as other languages have it (:data:`UNSTEMMED_PREFIX` + the folded
    word), so the query matches documents in either; stop words in neither form. Other
    terms as :func:`analyze` gives them."""
    return _analyze(text, english=True, query=True)


@lru_cache(maxsize=16384)
def match_terms(word: str) -> frozenset[str]:
    """The query terms that match ``word`` (one token of a text, as :func:`tokens` cuts
    it, or one CJK bigram of it) wherever it stands: its term in English text and in
    other languages, as :func:`analyze_query` gives them. Empty for a stop word, so
    highlighting built on this never marks one."""
    return frozenset(analyze_query(word))


def term_id(term: str) -> int:
    """The sparse-vector index of ``term``: a stable hash in ``[0, 2**31)``.

    BLAKE2b, never Python's ``hash()``: that one is salted per process, and these ids are
    stored in the index and compared across processes and machines. Distinct terms may
    collide (n distinct terms give about n**2 / 2**32 colliding pairs: ~230 in a million);
    a collision only merges two rare terms' counts, which BM25 tolerates.
    """
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=4, person=b"hsearch.term").digest()
    return int.from_bytes(digest, "big") % TERM_ID_BOUND


def _count(terms: list[str]) -> SparseVector:
    counts = Counter(term_id(term) for term in terms)
    return SparseVector.from_mapping({i: float(n) for i, n in counts.items()})


def term_frequencies(text: str, *, lang: str | None = None) -> tuple[SparseVector, int]:
    """Count the terms of a document's ``text`` (:func:`analyze`) by :func:`term_id`.

    Returns the counts as a sparse vector and the document length in terms (the number
    :func:`analyze` yields, which equals the sum of the counts).
    """
    terms = analyze(text, lang=lang)
    return _count(terms), len(terms)


def query_term_frequencies(text: str) -> SparseVector:
    """Count the terms of a query (:func:`analyze_query`) by :func:`term_id`; BM25 reads
    only which terms are there (each distinct term weighs its IDF once)."""
    return _count(analyze_query(text))
