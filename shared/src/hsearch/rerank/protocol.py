"""The reranker contract: passages in, one relevance score each out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Reranker", "check_passages"]


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a query; higher means more relevant."""

    @property
    def name(self) -> str:
        """Identifies the scorer: the model and its weights (changes when scores would)."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, in order (batched inside); ``[]`` for ``[]``."""
        ...


def check_passages(passages: Sequence[str]) -> None:
    """Refuse one string given as ``passages``: a ``str`` is a ``Sequence[str]`` too, and
    scoring it would score each of its characters. Raises :class:`TypeError`."""
    if isinstance(passages, str):
        msg = "passages must be a sequence of strings, not one string"
        raise TypeError(msg)
