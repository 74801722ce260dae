"""Context packing (pure): which passages a model is given, in what order, within a
token budget.

* duplicates go: a passage whose normalised text another one above it already holds
  (the same chunk under two ids, an overlap that covers it) is dropped;
* documents stay diverse: at most ``per_document`` passages of one document, so one
  long document cannot fill the context;
* the order is stable: the retrieval's rank, whatever the budget, so the same request
  gives the same prompt (and the same cache key);
* the budget is in the model's tokens (:func:`estimate_tokens` when the tokenizer is
  unknown, an estimate that errs high): passages are taken in order while they fit; the
  first one is cut to fit rather than dropped, so a question always gets some context.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Packed", "estimate_tokens", "pack"]

_SPACES = re.compile(r"\s+")


def estimate_tokens(text: str) -> int:
    """An estimate of ``text``'s tokens that errs high for the BPE tokenizers of
    small models: a token per 3 characters of ASCII, 2 per other character (CJK text
    takes one to three tokens a character)."""
    ascii_chars = sum(1 for c in text if ord(c) < 128)
    return math.ceil(ascii_chars / 3) + 2 * (len(text) - ascii_chars)


@dataclass(frozen=True, slots=True)
class Packed:
    index: int
    """Where the passage was in the list given to :func:`pack`."""
    text: str
    """Its text as given to the model (cut to fit when it is the first and too long)."""
    tokens: int
    truncated: bool = False


def _key(text: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def pack(
    passages: Sequence[tuple[str, str]],
    *,
    budget_tokens: int,
    per_document: int = 3,
    count_tokens: Callable[[str], int] = estimate_tokens,
) -> list[Packed]:
    """The passages (``(document id, text)``, best first) the model is given."""
    kept: list[Packed] = []
    seen: list[str] = []
    per: dict[str, int] = {}
    used = 0
    for index, (document, text) in enumerate(passages):
        key = _key(text)
        if not key or any(key in other for other in seen):
            continue
        if per.get(document, 0) >= per_document:
            continue
        tokens = count_tokens(text)
        given, truncated = text, False
        if used + tokens > budget_tokens:
            if kept:
                continue  # a later, shorter passage may still fit
            given, tokens = _cut(text, budget_tokens, count_tokens)
            if not given:
                break
            truncated = True
        kept.append(Packed(index, given, tokens, truncated=truncated))
        used += tokens
        seen.append(key)
        per[document] = per.get(document, 0) + 1
    return kept


def _cut(text: str, budget: int, count: Callable[[str], int]) -> tuple[str, int]:
    """The longest prefix of ``text`` (at a space when there is one) within ``budget``."""
    low, high = 0, len(text)
    while low < high:
        mid = (low + high + 1) // 2
        if count(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    cut = text[:low]
    if low < len(text) and " " in cut:
        cut = cut[: cut.rindex(" ")]
    return cut, count(cut)
