"""The terms the cheap steps compare (the lexical analyzer's: stems for English,
character bigrams for Japanese and Chinese), read once per text."""

from __future__ import annotations

from hsearch.lexical.analyzer import term_set as terms

__all__ = ["coverage", "terms"]


def coverage(wanted: frozenset[str], held: frozenset[str]) -> float:
    """The share of ``wanted`` that ``held`` holds (0 when nothing is wanted)."""
    return len(wanted & held) / len(wanted) if wanted else 0.0
