"""Split documents into overlapping chunks along sentence boundaries.

Chunks are verbatim slices of the document (what a hit shows is what was written).
Character-based on purpose for now: sentences end at ``.!?`` followed by white space,
after the CJK full stops ``。！？`` (Japanese has no spaces) and at blank lines; a
sentence longer than a chunk is cut at white space (hard only inside a run without any,
such as Japanese text). Token-aware chunking is a later step.
"""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n\s*\n")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence, trimmed of surrounding white space."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for match in [*_SENTENCE_END.finditer(text), None]:
        end = match.start() if match else len(text)
        start = pos
        while start < end and text[start].isspace():
            start += 1
        stop = end
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        if stop > start:
            spans.append((start, stop))
        if match:
            pos = match.end()
    return spans


def split_sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def chunk_text(text: str, *, max_chars: int, overlap_chars: int = 0) -> list[str]:
    """Group consecutive sentences into chunks of at most ``max_chars`` characters;
    a chunk repeats up to ``overlap_chars`` characters of the previous chunk's
    trailing sentences."""
    if max_chars <= 0:
        msg = "max_chars must be > 0"
        raise ValueError(msg)
    if not 0 <= overlap_chars < max_chars:
        msg = "overlap_chars must be in [0, max_chars)"
        raise ValueError(msg)
    pieces: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        pieces.extend(_split_long_sentence(text, start, end, max_chars, overlap_chars))

    chunks: list[str] = []
    group: list[tuple[int, int]] = []
    for piece in pieces:
        if group and piece[1] - group[0][0] > max_chars:
            chunks.append(text[group[0][0] : group[-1][1]])
            group = _overlap_tail(group, overlap_chars, limit=max_chars, next_end=piece[1])
        group.append(piece)
    if group:
        chunks.append(text[group[0][0] : group[-1][1]])
    return chunks


def _split_long_sentence(
    text: str, start: int, end: int, max_chars: int, overlap_chars: int
) -> list[tuple[int, int]]:
    """One sentence as pieces of at most ``max_chars``, consecutive pieces sharing up to
    ``overlap_chars``. A piece ends at the last white space that fits, so words stay
    whole (and the shared part starts at a word); only a run without white space longer
    than a chunk is cut hard."""
    pieces: list[tuple[int, int]] = []
    while end - start > max_chars:
        limit = start + max_chars
        cut = next((i for i in range(limit, start, -1) if text[i].isspace()), None)
        stop = limit if cut is None else cut
        trimmed = stop
        while trimmed > start and text[trimmed - 1].isspace():
            trimmed -= 1
        pieces.append((start, trimmed))
        following = max(stop - overlap_chars, start + 1)
        if cut is not None:  # start the shared part at a word, not inside one
            while following < stop and not text[following - 1].isspace():
                following += 1
        while following < end and text[following].isspace():
            following += 1
        start = following
    pieces.append((start, end))
    return pieces


def _overlap_tail(
    group: list[tuple[int, int]], overlap_chars: int, *, limit: int, next_end: int
) -> list[tuple[int, int]]:
    """The trailing pieces of ``group`` to repeat, within the overlap budget and such
    that the next chunk still fits."""
    tail: list[tuple[int, int]] = []
    for piece in reversed(group):
        if group[-1][1] - piece[0] > overlap_chars or next_end - piece[0] > limit:
            break
        tail.insert(0, piece)
    return tail
