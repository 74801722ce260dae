"""Claims from relevant chunks, and whether the claims suffice.

* :class:`ExtractiveClaims` takes a relevant chunk's sentences that bear on the question
  (the most of its terms, or of the terms of the claims of the chunk it was reached
  from), at most ``per_chunk``, and its first sentence when none does (the sentence that
  names what a passage is about). A claim is a verbatim span of the chunk, so what the
  model is given, and every citation of it, points into the document.
* :class:`CheapSufficiency` says the claims suffice when they fill the context the
  answer is given (more would only push some out) and hold nearly all the question's
  terms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hsearch.compositions.answers.citations import sentence_spans
from hsearch.compositions.answers.packing import estimate_tokens
from hsearch.compositions.lazy.models import Candidate, Claim, Judgement
from hsearch.compositions.lazy.terms import coverage, terms

__all__ = ["CheapSufficiency", "ClaimExtractor", "ExtractiveClaims", "Sufficiency"]


class ClaimExtractor(Protocol):
    async def claims(
        self,
        candidate: Candidate,
        judgement: Judgement,
        *,
        question: str,
        earlier: Mapping[str, tuple[Claim, ...]],
    ) -> tuple[Claim, ...]:
        """The claims of a relevant ``candidate`` (its text read), best first."""
        ...


@dataclass(frozen=True, slots=True)
class ExtractiveClaims:
    per_chunk: int = 1
    max_chars: int = 600
    """A longer sentence is not a claim (a table, a list run together)."""

    async def claims(
        self,
        candidate: Candidate,
        judgement: Judgement,
        *,
        question: str,
        earlier: Mapping[str, tuple[Claim, ...]],
    ) -> tuple[Claim, ...]:
        text = candidate.text or ""
        if not text.strip():
            return ()
        wanted = terms(question)
        said = frozenset().union(*(terms(c.text) for c in earlier.get(candidate.parent or "", ())))
        scored: list[tuple[float, int, int, int]] = []
        for position, (start, end) in enumerate(sentence_spans(text)):
            if end - start > self.max_chars:
                continue
            held = terms(text[start:end])
            share = coverage(wanted, held) + 0.5 * coverage(said - wanted, held)
            scored.append((share, position, start, end))
        if not scored:
            return ()
        bearing = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        if not bearing:  # nothing says which sentence matters (another language): all
            whole = text.strip()
            start = text.index(whole)
            return (Claim(whole, candidate.chunk_id, start, start + len(whole), judgement.score),)
        chosen = bearing[: self.per_chunk]
        chosen.sort(key=lambda s: s[1])  # in the chunk's order
        return tuple(
            Claim(
                text=text[start:end],
                chunk_id=candidate.chunk_id,
                start=start,
                end=end,
                score=round(judgement.score * (0.5 + 0.5 * min(1.0, share)), 4),
            )
            for share, _, start, end in chosen
        )


class Sufficiency(Protocol):
    def sufficient(
        self, question: str, claims: Sequence[Claim], *, context_tokens: int
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class CheapSufficiency:
    coverage: float = 0.9

    def sufficient(self, question: str, claims: Sequence[Claim], *, context_tokens: int) -> bool:
        if sum(estimate_tokens(c.text) for c in claims) < context_tokens:
            return False
        held = frozenset().union(*(terms(c.text) for c in claims))
        return coverage(terms(question), held) >= self.coverage
