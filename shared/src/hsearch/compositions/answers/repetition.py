"""A model that loops: the same few characters written again and again.

Small models degenerate this way (SmolLM2-135M in Japanese: "カリブ・ドルのカリブ・ドルの…"
until the token cap), and a loop costs the whole generation budget for nothing. The
answer's stream is watched as it is written: when its end is one unit of 1 to
``max_unit`` characters written ``min_repeats`` times in a row or more, covering
``min_span`` characters or more, the model is looping and generation stops there.

Pure; the thresholds keep ordinary text clear of it: a unit repeated four times over 24
characters or more is not prose in any language (a word doubled for emphasis, "ha ha
ha", a short run of dots or dashes stay under it).
"""

from __future__ import annotations

__all__ = ["MAX_UNIT", "MIN_REPEATS", "MIN_SPAN", "looping"]

MAX_UNIT = 40
MIN_REPEATS = 4
MIN_SPAN = 24


def looping(
    text: str,
    *,
    max_unit: int = MAX_UNIT,
    min_repeats: int = MIN_REPEATS,
    min_span: int = MIN_SPAN,
) -> bool:
    """Whether ``text`` ends in a loop (module docstring): a unit of 1 to ``max_unit``
    characters, other than white space alone, repeated ``min_repeats`` times or more at
    its end over ``min_span`` characters or more."""
    n = len(text)
    for unit in range(1, min(max_unit, n // min_repeats) + 1):
        tail = text[n - unit :]
        if not tail.strip():
            continue
        repeats = 1
        while (repeats + 1) * unit <= n and text[
            n - (repeats + 1) * unit : n - repeats * unit
        ] == tail:
            repeats += 1
        if repeats >= min_repeats and repeats * unit >= min_span:
            return True
    return False
