"""Citations decided by code (pure, no I/O): what a model writes is untrusted input.

A model is asked to cite passages as ``[n]``; whatever it writes, the client sees only
citations this module checked:

* :class:`SentenceAssembler` cuts the streamed text into sentences as it arrives and
  holds every marker back (``[9]``, ``[1, 2]``, ``[3][4]``): a marker never reaches a
  client as the model wrote it. The text is passed on as it comes; a sentence is
  closed once the word after its end arrives (so markers written after the full stop
  still belong to it).
* :func:`check_sentence` decides a closed sentence's citations: each passage's support
  is the share of the sentence's terms it holds (the lexical analyzer's terms: stems
  for English, character bigrams for Japanese and Chinese, so text without spaces
  works), optionally raised by an embedding similarity. A passage the model cited that
  supports the sentence is kept; one that does not, or a marker that points to no
  passage, is dropped; when none of the model's markers holds, the best supporting
  passage is cited instead; a sentence no passage supports is flagged and cited by
  nothing.
* The checked markers are appended to their sentence (``Paris is the capital.[1]``):
  the streamed text and the final answer are the same string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from hsearch.lexical.analyzer import term_set

__all__ = [
    "CheckedSentence",
    "Closed",
    "SentenceAssembler",
    "Support",
    "best_quote",
    "check_sentence",
    "marker_suffix",
    "sentence_spans",
    "support_score",
]

LATIN_TERMINATORS = frozenset(".!?")
CJK_TERMINATORS = frozenset("。！？")
_MARKER_CHARS = frozenset("0123456789 ,;")
_CLOSERS = frozenset("\"')]\u300d\u300f\uff09\u201d\u2019")  # quotes and brackets that close
_MAX_MARKER_LENGTH = 24
_MARKER = re.compile(r"\[(\d{1,4}(?:\s*[,;]\s*\d{1,4})*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")


@dataclass(frozen=True, slots=True)
class Closed:
    """A sentence the assembler closed: its text as shown (no markers) and the passage
    numbers the model's markers named in it (1-based, as written, unchecked)."""

    text: str
    markers: tuple[int, ...]


@dataclass
class SentenceAssembler:
    """Feeds on streamed text; returns what can be shown now and the sentences closed.

    ``feed`` returns a list whose items are text to show (``str``) or a :class:`Closed`
    sentence, in order; ``finish`` closes the last one.
    """

    _held: str = ""
    _sentence: list[str] = field(default_factory=list)
    _markers: list[int] = field(default_factory=list)
    _ended: bool = False
    """The sentence's end was written; it closes at the next word."""
    _maybe_ended: bool = False
    """A Latin full stop (or ! ?) was written: an end if white space follows, not if a
    word goes on at once (3.5, e.g.)."""
    _gap: str = ""
    """White space after a sentence's end, shown once the sentence is closed."""
    _space: str = ""
    """White space inside a sentence, shown once a word follows (dropped before a
    marker, so ``people [2].`` shows as ``people.``)."""

    def feed(self, delta: str) -> list[str | Closed]:
        out: list[str | Closed] = []
        text = self._held + delta
        self._held = ""
        i = 0
        while i < len(text):
            char = text[i]
            if char == "[":
                end = _marker_end(text, i)
                if end is None:  # undecided until more text comes
                    self._held = text[i:]
                    break
                if end > i:  # a marker: held back for good, with the space before it
                    self._markers.extend(_numbers(text[i : end + 1]))
                    self._space = ""
                    if self._ended:
                        self._gap = ""
                    i = end + 1
                    continue
            self._take(char, out)
            i += 1
        return _merged(out)

    def finish(self) -> list[str | Closed]:
        """The end of the stream: a marker left open is dropped, the sentence closed."""
        held, self._held = self._held, ""
        out: list[str | Closed] = []
        if held and _MARKER_START.fullmatch(held) is None:
            for char in held:
                self._take(char, out)
        self._close(out)
        if self._gap:
            out.append(self._gap)
            self._gap = ""
        return _merged(out)

    def _take(self, char: str, out: list[str | Closed]) -> None:
        if self._ended:
            if char.isspace():
                self._gap += char
                return
            self._close(out)
            if self._gap:
                out.append(self._gap)
                self._gap = ""
        if self._maybe_ended:
            if char.isspace():
                self._maybe_ended, self._ended = False, True
                self._gap += char
                return
            if char not in _CLOSERS:
                self._maybe_ended = False
        if char == "\n" and "".join(self._sentence).strip():
            self._ended = True
            self._space = ""
            self._gap += char
            return
        if char.isspace():
            if self._sentence:  # white space before a sentence's first word is dropped
                self._space += char
            return
        if self._space:
            self._sentence.append(self._space)
            out.append(self._space)
            self._space = ""
        self._sentence.append(char)
        out.append(char)
        if char in CJK_TERMINATORS:
            self._ended = True
        elif char in LATIN_TERMINATORS and not (char == "." and _abbreviation(self._sentence)):
            self._maybe_ended = True

    def _close(self, out: list[str | Closed]) -> None:
        text = "".join(self._sentence)
        if text.strip():
            out.append(Closed(text, tuple(dict.fromkeys(self._markers))))
        self._sentence, self._markers, self._space = [], [], ""
        self._ended = self._maybe_ended = False


_MARKER_START = re.compile(r"\[[\d ,;]*")
ABBREVIATIONS = frozenset(
    (
        "mr",
        "mrs",
        "ms",
        "dr",
        "prof",
        "sr",
        "jr",
        "st",
        "mt",
        "ft",
        "no",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "inc",
        "ltd",
        "co",
        "corp",
        "dept",
        "gen",
        "gov",
        "col",
        "lt",
        "sgt",
        "capt",
        "rev",
        "fig",
        "approx",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "u.s",
    )
)
"""Words whose full stop ends no sentence (``Dr. Callahan``); a single capital letter
(an initial, ``G. Stanley Hall``) is one too."""


def _abbreviation(sentence: list[str]) -> bool:
    """Whether the word just written before a full stop is an abbreviation."""
    text = "".join(sentence[-12:])
    word = text[:-1].rsplit(" ", 1)[-1].strip("(\"'")
    if len(word) == 1 and word.isupper():
        return True
    return word.casefold() in ABBREVIATIONS


def _marker_end(text: str, start: int) -> int | None:
    """Where the marker at ``start`` ends (its ``]``), ``start`` when ``[`` begins no
    marker, ``None`` when the text so far cannot tell."""
    for j in range(start + 1, min(len(text), start + _MAX_MARKER_LENGTH)):
        if text[j] == "]":
            return j if _MARKER.fullmatch(text[start : j + 1]) else start
        if text[j] not in _MARKER_CHARS and not text[j].isspace():
            return start
    if len(text) - start >= _MAX_MARKER_LENGTH:
        return start
    return None


def _numbers(marker: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", marker)]


def _merged(out: list[str | Closed]) -> list[str | Closed]:
    """Adjacent text pieces joined."""
    merged: list[str | Closed] = []
    for item in out:
        if isinstance(item, str) and merged and isinstance(merged[-1], str):
            merged[-1] += item
        else:
            merged.append(item)
    return merged


# -- support ----------------------------------------------------------------------------


def support_score(sentence: str, passage: str) -> float:
    """The share of ``sentence``'s terms that ``passage`` holds (0 for a sentence
    without terms)."""
    wanted = term_set(sentence)
    if not wanted:
        return 0.0
    return len(wanted & term_set(passage)) / len(wanted)


@dataclass(frozen=True, slots=True)
class Support:
    passage: int
    """0-based index into the passages given to the model."""
    score: float


@dataclass(frozen=True, slots=True)
class CheckedSentence:
    text: str
    citations: tuple[Support, ...]
    """The passages cited, checked; empty when ``supported`` is false."""
    supported: bool
    supporting: tuple[Support, ...]
    """Every passage that supports the sentence, best first."""
    dropped: tuple[int, ...] = ()
    """Markers the model wrote that were removed (1-based, as written)."""


def check_sentence(
    text: str,
    passages: Sequence[str],
    *,
    markers: Sequence[int] = (),
    threshold: float,
    similarity: Callable[[str, int], float] | None = None,
    similarity_threshold: float = 1.0,
    max_citations: int = 3,
    fill: bool = False,
    by_rank: bool = False,
) -> CheckedSentence:
    """The citations of one sentence (see the module docstring). ``similarity(text, i)``
    is an optional second signal: a passage whose similarity reaches
    ``similarity_threshold`` supports the sentence as well. With ``fill``, the other
    supporting passages (best first) are cited too, up to ``max_citations``. With
    ``by_rank``, "best" among the supporting passages is the one the retrieval ranked
    higher (the lower number), not the higher support score."""
    scores = [support_score(text, p) for p in passages]
    if similarity is not None:
        for i in range(len(passages)):
            if scores[i] < threshold and similarity(text, i) >= similarity_threshold:
                scores[i] = max(scores[i], threshold)
    supporting = sorted(
        (Support(i, s) for i, s in enumerate(scores) if s >= threshold),
        key=(lambda sup: sup.passage) if by_rank else (lambda sup: (-sup.score, sup.passage)),
    )
    by_passage = {sup.passage: sup for sup in supporting}
    kept = [by_passage[n - 1] for n in dict.fromkeys(markers) if (n - 1) in by_passage]
    dropped = tuple(n for n in dict.fromkeys(markers) if (n - 1) not in by_passage)
    if fill:
        kept += [sup for sup in supporting if sup not in kept]
    elif not kept and supporting:
        kept = [supporting[0]]
    return CheckedSentence(
        text=text,
        citations=tuple(kept[:max_citations]),
        supported=bool(supporting),
        supporting=tuple(supporting),
        dropped=dropped,
    )


def marker_suffix(citations: Sequence[Support]) -> str:
    """``[1][3]`` for the passages at 0 and 2."""
    return "".join(f"[{c.passage + 1}]" for c in citations)


def best_quote(sentence: str, passage: str) -> tuple[int, int]:
    """The span (start, end) in ``passage`` of its sentence that best supports
    ``sentence``: the most of its terms; the whole passage when it has one sentence."""
    spans = sentence_spans(passage)
    best, best_score = (0, len(passage)), -1.0
    for start, end in spans:
        score = support_score(sentence, passage[start:end])
        if score > best_score:
            best, best_score = (start, end), score
    return best


def sentence_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        end = match.start()
        if text[start:end].strip():
            spans.append(_strip(text, start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(_strip(text, start, len(text)))
    return spans or [(0, len(text))]


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
