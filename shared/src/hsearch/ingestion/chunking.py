"""Split documents into chunks that fit the encoder, along sentence boundaries.

A chunk is a verbatim slice of the document (what a hit shows is what was written), and
it knows where it lies: ``document[chunk.start:chunk.end] == chunk.text``. It is measured
in the active encoder's own tokens (:class:`~hsearch.embedding.protocol.Tokenizer`), so
that the encoder reads all of it: a chunk holds at most ``max_tokens`` tokens, and never
more than the encoder's window leaves once the document's title, which is encoded with
every chunk (:func:`~hsearch.ingestion.records.embedding_text`), is counted.

Sentences come from sentencex (Wikimedia's rule-based segmenter: abbreviations such as
"Dr." or "e.g." in English, ``。！？`` in Japanese, paragraph breaks), in the rules of
the document's language. Consecutive sentences are packed into a chunk while they fit;
a chunk repeats the previous chunk's trailing sentences that fit in ``overlap_tokens``.
A sentence longer than a chunk is cut between tokens, preferably at a line break, else
at white space, else beside punctuation or a CJK character (Japanese has no spaces),
and only mid-word when a single word is longer than a chunk; its pieces share up to
``overlap_tokens`` tokens. Why sentencex and not a splitting library:
docs/chunking.md.
"""

from __future__ import annotations

import bisect
import logging
import re
import unicodedata
from dataclasses import dataclass

import sentencex

from hsearch.embedding.protocol import Tokenizer
from hsearch.ingestion.records import embedding_text
from hsearch.lexical.analyzer import is_cjk

__all__ = ["Chunk", "Chunker", "sentence_spans", "split_sentences"]

logger = logging.getLogger(__name__)

_FALLBACK_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n\s*\n")
"""Sentence ends for a text sentencex cannot take (lone surrogates)."""

_MIN_CHUNK_SHARE = 4
"""However long the title, a chunk may use a quarter of the encoder's window: the encoder
then truncates the end of a chunk whose title takes more than three quarters of it."""

_REFITS = 4
"""Rounds of re-cutting a chunk whose exact count exceeds the estimate (see
:meth:`Chunker.chunk`); one is enough for the tokenizers in use."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """A slice of a document: ``document[start:end] == text`` (offsets in characters,
    that is Unicode code points, as Python and JSON count them)."""

    text: str
    start: int
    end: int


def _language(lang: str) -> str:
    """The sentencex language of a document's tag: its primary subtag (``en-GB`` →
    ``en``); English rules for an unknown language."""
    primary = lang.strip().split("-")[0].split("_")[0].lower()
    return primary or "en"


def sentence_spans(text: str, *, lang: str = "") -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text``, in order, trimmed of surrounding
    white space; together they hold every character of ``text`` but white space."""
    try:
        bounds = sentencex.get_sentence_boundaries(_language(lang), text)
        cuts = {int(b["end_index"]) for b in bounds}
    except (UnicodeError, ValueError, TypeError, KeyError):
        # A str Rust cannot take (a lone surrogate); the rule sentencex would apply,
        # roughly: after .!? and white space, after 。！？, at blank lines.
        cuts = {m.end() for m in _FALLBACK_SENTENCE_END.finditer(text)}
    spans: list[tuple[int, int]] = []
    pos = 0
    for cut in [*sorted(c for c in cuts if 0 < c < len(text)), len(text)]:
        start, stop = pos, cut
        while start < stop and text[start].isspace():
            start += 1
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        if stop > start:
            spans.append((start, stop))
        pos = cut
    return spans


def split_sentences(text: str, *, lang: str = "") -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text, lang=lang)]


class Chunker:
    """Cuts documents into :class:`Chunk` s of at most ``max_tokens`` of ``tokenizer``'s
    tokens, capped at what its window leaves beside the title (:meth:`budget`).

    ``overlap_tokens``: how much of the previous chunk a chunk may repeat (whole
    sentences, or the end of a sentence cut in pieces), at most half the budget.
    """

    def __init__(self, tokenizer: Tokenizer, *, max_tokens: int = 512, overlap_tokens: int = 32):
        if max_tokens < 1:
            msg = f"max_tokens must be >= 1, got {max_tokens}"
            raise ValueError(msg)
        if not 0 <= overlap_tokens < max_tokens:
            msg = f"overlap_tokens must be in [0, max_tokens), got {overlap_tokens}"
            raise ValueError(msg)
        self._tokenizer = tokenizer
        self._max_tokens = max_tokens
        self._overlap = overlap_tokens

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def budget(self, title: str = "") -> int:
        """The most tokens a chunk of a document titled ``title`` holds: ``max_tokens``,
        or less when the encoder's window, less the title's tokens, is smaller (never
        less than a quarter of the window)."""
        title_tokens = self._tokenizer.count_tokens([embedding_text(title, "")])[0] if title else 0
        return self._budget(title_tokens)

    def _budget(self, title_tokens: int) -> int:
        window = self._tokenizer.max_tokens
        floor = max(1, window // _MIN_CHUNK_SHARE)
        return min(self._max_tokens, max(window - title_tokens, floor))

    def chunk(self, text: str, *, title: str = "", lang: str = "") -> list[Chunk]:
        """``text`` as chunks, in order; none for a text of white space only.

        Packing counts tokens by their position in the tokenization of the whole text;
        a chunk is then counted on its own, as the encoder will read it, and cut again
        (smaller) in the rare case a tokenizer splits the slice into more tokens than
        it did in context (a SentencePiece word start, a word cut in the middle).
        """
        lo, hi = _trimmed(text)
        if lo == hi:
            return []
        # Most documents fit one chunk: the title's and the text's tokens counted in one
        # call, and such a text is its one chunk, as the cut below would make it (its
        # sentences span it, trimmed, and none is cut).
        if title:
            title_tokens, text_tokens = self._tokenizer.count_tokens(
                [embedding_text(title, ""), text[lo:hi]]
            )
        else:
            title_tokens, text_tokens = 0, self._tokenizer.count_tokens([text[lo:hi]])[0]
        budget = self._budget(title_tokens)
        if text_tokens <= budget:
            return [Chunk(text[lo:hi], lo, hi)]
        spans = self._cut(text, 0, len(text), budget=budget, lang=lang)
        for _ in range(_REFITS):
            counts = self._tokenizer.count_tokens([text[a:b] for a, b in spans])
            if all(n <= budget for n in counts):
                break
            refit: list[tuple[int, int]] = []
            for (a, b), n in zip(spans, counts, strict=True):
                if n <= budget or len(self._tokenizer.token_spans(text[a:b])) <= 1:
                    refit.append((a, b))
                else:
                    refit.extend(self._cut(text, a, b, budget=2 * budget - n, lang=lang))
            spans = refit
        return [Chunk(text[a:b], a, b) for a, b in spans]

    def _cut(self, text: str, lo: int, hi: int, *, budget: int, lang: str) -> list[tuple[int, int]]:
        """Chunk spans of ``text[lo:hi]`` (offsets in ``text``) of at most ``budget``
        tokens as the whole of ``text[lo:hi]`` is tokenized."""
        budget = max(budget, 1)
        overlap = min(self._overlap, budget // 2)
        part = text[lo:hi]
        tokens = _Tokens(part, self._tokenizer.token_spans(part), offset=lo)
        pieces: list[tuple[int, int]] = []
        for start, end in sentence_spans(part, lang=lang):
            pieces.extend(tokens.split(start + lo, end + lo, budget=budget, overlap=overlap))

        chunks: list[tuple[int, int]] = []
        group: list[tuple[int, int]] = []
        for piece in pieces:
            if group and tokens.count(group[0][0], piece[1]) > budget:
                chunks.append((group[0][0], group[-1][1]))
                group = _overlap_tail(tokens, group, overlap, budget=budget, next_end=piece[1])
            group.append(piece)
        if group:
            chunks.append((group[0][0], group[-1][1]))
        return chunks


def _trimmed(text: str) -> tuple[int, int]:
    """``text``'s extent without its leading and trailing white space."""
    lo, hi = 0, len(text)
    while lo < hi and text[lo].isspace():
        lo += 1
    while hi > lo and text[hi - 1].isspace():
        hi -= 1
    return lo, hi


class _Tokens:
    """The tokens of ``text`` located by their start offset: counts over any range, and
    the places between tokens where a long sentence is best cut."""

    def __init__(self, text: str, spans: list[tuple[int, int]], *, offset: int) -> None:
        self._text = text
        self._offset = offset
        ordered = sorted(spans)
        self._starts = [a + offset for a, _ in ordered]
        self._ends = [b + offset for _, b in ordered]

    def _char(self, pos: int) -> str:
        return self._text[pos - self._offset]

    def count(self, start: int, end: int) -> int:
        """Tokens starting in ``[start, end)``."""
        return bisect.bisect_left(self._starts, end) - bisect.bisect_left(self._starts, start)

    def _rank(self, k: int) -> int:
        """How good a cut before token ``k`` is: 3 at a line break, 2 at white space, 1
        beside punctuation or a CJK character, 0 inside a word (-1: no cut, the token
        starts where the previous one does)."""
        start, previous_end = self._starts[k], self._ends[k - 1]
        if start <= self._starts[k - 1]:
            return -1
        gap = self._text[previous_end - self._offset : start - self._offset]
        if "\n" in gap:
            return 3
        if any(c.isspace() for c in gap):
            return 2
        before, after = self._char(start - 1), self._char(start)
        if any(is_cjk(c) or unicodedata.category(c)[0] in "PSZ" for c in (before, after)):
            return 1
        return 0

    def split(self, start: int, end: int, *, budget: int, overlap: int) -> list[tuple[int, int]]:
        """The sentence ``[start, end)`` as pieces of at most ``budget`` tokens, each
        cut before a token; consecutive pieces share up to ``overlap`` tokens, starting
        at a word. A piece is longer only where no token boundary is left to cut at."""
        first = bisect.bisect_left(self._starts, start)
        last = bisect.bisect_left(self._starts, end)  # tokens [first, last) are this sentence's
        pieces: list[tuple[int, int]] = []
        k, lo = first, start
        while last - k > budget:
            cut = self._best_cut(k, min(k + budget, last - 1), last=last, budget=budget)
            if cut is None:  # a run of tokens with no boundary between them
                break
            stop = self._starts[cut]
            while stop > lo and self._char(stop - 1).isspace():
                stop -= 1
            pieces.append((lo, stop))
            following = next(
                (j for j in range(max(cut - overlap, k + 1), cut) if self._rank(j) >= 1), cut
            )
            k, lo = following, self._starts[following]
        pieces.append((lo, end))
        return pieces

    def _best_cut(self, k: int, limit: int, *, last: int, budget: int) -> int | None:
        """The token to start the next piece at, in ``(k, limit]``: the last of the best
        rank in the second half of the window, else the last of the best rank in all of
        it; else the first boundary after ``limit`` and before ``last`` (an over-long
        piece); ``None`` when there is none."""
        for low in (k + max(budget // 2, 1), k + 1):
            ranked = [(self._rank(j), j) for j in range(max(low, k + 1), limit + 1)]
            ranked = [(r, j) for r, j in ranked if r >= 0]
            if ranked:
                return max(ranked)[1]
        return next((j for j in range(limit + 1, last) if self._rank(j) >= 0), None)


def _overlap_tail(
    tokens: _Tokens, group: list[tuple[int, int]], overlap: int, *, budget: int, next_end: int
) -> list[tuple[int, int]]:
    """The trailing pieces of ``group`` to repeat: within ``overlap`` tokens, and such
    that the next chunk, with the piece ending at ``next_end``, still fits."""
    tail: list[tuple[int, int]] = []
    for piece in reversed(group):
        if (
            tokens.count(piece[0], group[-1][1]) > overlap
            or tokens.count(piece[0], next_end) > budget
        ):
            break
        tail.insert(0, piece)
    return tail
