"""Snippets: the best window of a text, query terms marked, safe to put in HTML.

Pure: no I/O. Terms are matched with the very analysis the sparse (lexical) leg uses:
the query is read by :func:`hsearch.lexical.analyzer.analyze_query`, the text is cut
into the analyzer's tokens (:func:`hsearch.lexical.analyzer.tokens`, which keep their
offsets), and each token, or each bigram of a CJK run, matches by its analysed terms
(:func:`hsearch.lexical.analyzer.match_terms`: folding, stems), so a word is
highlighted exactly when it could have matched lexically: a full-width ``API`` in a
text matches the query ``api``, ``volcanoes`` and ``café`` match the queries
``volcano`` and ``cafe``, and a stop word (``and``) is never marked, since no query
holds one; in Japanese, where words are not separated by spaces, the query's character
bigrams are found inside the text's CJK runs (and a one-character CJK query term
matches that character anywhere in a run).

The window is the ``max_chars`` characters of the text holding the most distinct query
terms (then the most matches; the earliest wins a tie), moved so it does not cut a word
when it can help it. With no match the snippet is the start of the text.

Everything from the text is HTML-escaped; the ``pre``/``post`` markers and the ellipsis
are inserted *after* escaping, verbatim, so they must be trusted strings (the defaults
are). Runs of whitespace become one space (a snippet is one line).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from hsearch.errors import InvalidRequestError
from hsearch.lexical.additions import TermExpansion
from hsearch.lexical.analyzer import analyze_query, is_cjk, match_terms, tokens
from hsearch.lexical.syntax import Clause, TextTerms

__all__ = ["MIN_SNIPPET_CHARS", "highlighted_query", "make_snippet", "term_matches"]

MIN_SNIPPET_CHARS: Final = 16

_WHITESPACE: Final = re.compile(r"\s+")
_MAX_SNAP: Final = 24
"""How far a window edge may move to avoid cutting a word."""


@dataclass(slots=True)
class _Span:
    start: int
    end: int
    terms: set[str]


def make_snippet(
    text: str,
    query: str,
    *,
    max_chars: int = 240,
    pre: str = "<em>",
    post: str = "</em>",
    ellipsis: str = "…",
) -> str:
    """An HTML-safe snippet of ``text`` with the terms of ``query`` between ``pre`` and
    ``post``.

    ``max_chars`` bounds the characters taken from ``text`` (escaping, markers and the
    ``ellipsis`` added where the text was cut come on top).
    """
    if not isinstance(max_chars, int) or isinstance(max_chars, bool):
        msg = f"max_chars must be an integer of at least {MIN_SNIPPET_CHARS}, got {max_chars!r}"
        raise InvalidRequestError(msg)
    if max_chars < MIN_SNIPPET_CHARS:
        msg = f"max_chars must be at least {MIN_SNIPPET_CHARS}, got {max_chars}"
        raise InvalidRequestError(msg)
    spans = _find_matches(text, frozenset(analyze_query(query)))
    start, end = _choose_window(text, spans, max_chars)
    start, end = _snap(text, start, end, spans)
    # Trim whitespace at the edges: it would only become a stray space.
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    pieces: list[str] = []
    if text[:start].strip():
        pieces.append(ellipsis)
    cursor = start
    for span in spans:
        if span.start < start or span.end > end:
            continue  # a match the window cuts is shown, unmarked, as far as it goes
        pieces.append(_escape(text[cursor : span.start]))
        pieces.append(f"{pre}{_escape(text[span.start : span.end])}{post}")
        cursor = span.end
    pieces.append(_escape(text[cursor:end]))
    if text[end:].strip():
        pieces.append(ellipsis)
    return "".join(pieces)


def _escape(segment: str) -> str:
    return html.escape(_WHITESPACE.sub(" ", segment), quote=True)


def _find_matches(text: str, query_terms: frozenset[str]) -> list[_Span]:
    """Where query terms occur in ``text``: sorted, overlapping or touching spans merged."""
    if not query_terms or not text:
        return []
    unigrams = frozenset(t for t in query_terms if len(t) == 1 and is_cjk(t))
    found: list[_Span] = []
    # The analyzer's own tokens, located in the original text so they can be marked.
    for token in tokens(text):
        word, base = token.text, token.start
        if not token.cjk or len(word) == 1:
            hit = match_terms(word) & query_terms
            if hit:
                found.append(_Span(base, token.end, set(hit)))
            continue
        for i in range(len(word) - 1):
            hit = match_terms(word[i : i + 2]) & query_terms
            if hit:
                found.append(_Span(base + i, base + i + 2, set(hit)))
        if unigrams:
            for i, char in enumerate(word):
                hit = match_terms(char) & unigrams
                if hit:
                    found.append(_Span(base + i, base + i + 1, set(hit)))
    found.sort(key=lambda span: (span.start, span.end))
    merged: list[_Span] = []
    for span in found:
        if merged and span.start <= merged[-1].end:
            merged[-1].end = max(merged[-1].end, span.end)
            merged[-1].terms |= span.terms
        else:
            merged.append(span)
    return merged


def _choose_window(text: str, spans: list[_Span], max_chars: int) -> tuple[int, int]:
    if not spans or len(text) <= max_chars:
        return 0, min(len(text), max_chars)
    best: tuple[int, int] = (-1, -1)
    best_range = (0, 0)
    last = 0
    for first in range(len(spans)):
        last = max(last, first)
        while last + 1 < len(spans) and spans[last + 1].end - spans[first].start <= max_chars:
            last += 1
        window = spans[first : last + 1]
        distinct: set[str] = set()
        for span in window:
            distinct |= span.terms
        score = (len(distinct), len(window))
        if score > best:
            best, best_range = score, (first, last)
    first_span, last_span = spans[best_range[0]], spans[best_range[1]]
    slack = max(0, max_chars - (last_span.end - first_span.start))
    start = max(0, min(first_span.start - slack // 3, len(text) - max_chars))
    return start, start + max_chars


def _inside_word(text: str, i: int) -> bool:
    """Whether offset ``i`` falls between two characters of one (non-CJK) word."""
    if not 0 < i < len(text):
        return False
    left, right = text[i - 1], text[i]
    return left.isalnum() and right.isalnum() and not is_cjk(left) and not is_cjk(right)


def _snap(text: str, start: int, end: int, spans: list[_Span]) -> tuple[int, int]:
    inside = [span for span in spans if span.start >= start and span.end <= end]
    first_match = inside[0].start if inside else end
    last_match = inside[-1].end if inside else start
    if _inside_word(text, start):
        for candidate in range(start + 1, min(start + _MAX_SNAP, first_match) + 1):
            if not _inside_word(text, candidate):
                start = candidate
                break
    if _inside_word(text, end):
        for candidate in range(end - 1, max(end - _MAX_SNAP, last_match, start) - 1, -1):
            if not _inside_word(text, candidate):
                end = candidate
                break
    return start, end


def term_matches(text: str, expansions: Sequence[TermExpansion]) -> tuple[TermExpansion, ...]:
    """The ``expansions`` whose words ``text`` holds (in any of the analyzer's forms; a
    few words as a phrase)."""
    if not expansions:
        return ()
    read = TextTerms(text)
    return tuple(
        e for e in expansions if read.holds(Clause(e.matched, phrase=len(e.matched.split()) > 1))
    )


def highlighted_query(query: str, expansions: Sequence[TermExpansion]) -> str:
    """What a snippet marks: the query's words and the words searched for beyond them."""
    return " ".join([query, *(e.matched for e in expansions)])
