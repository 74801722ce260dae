"""Relevance tests: does a candidate help answer the question? One protocol, two
testers.

* :class:`CheapTester` decides by code, from what the search already knows: the share
  of the question's terms the candidate holds, its prior (its retrieval rank, or the
  concept, community or link score it was reached with), and, for a candidate reached
  from a relevant chunk, its *bridge*: the share of its title's terms that the claims of
  the chunk it was reached from hold (the second hop of a multi-hop question shares few
  terms with the question, but its subject is named in the first hop's claim).
* :class:`ModelTester` asks the model, a batch of candidates per call (``relevance``
  prompt), paid for from the budget. Its reply is untrusted input: only ``n: yes`` /
  ``n: no`` lines naming a candidate it was shown count, each once; a candidate the
  reply does not judge (or a call the budget cannot pay for, or that fails) is judged
  by the cheap tester, and says so (``by``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from hsearch.compositions.answers.prompts import quote
from hsearch.compositions.lazy.calls import ModelCalls
from hsearch.compositions.lazy.models import Candidate, Claim, Judgement
from hsearch.compositions.lazy.terms import coverage, terms

__all__ = ["CheapTester", "JudgeContext", "ModelTester", "RelevanceTester", "parse_judgements"]

RELEVANCE_PROMPT = "relevance"
_VERDICT = re.compile(r"^\s*\[?(\d{1,3})\]?\s*[:.)\-]\s*(yes|no)\b", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True, slots=True)
class JudgeContext:
    question: str
    claims: Mapping[str, tuple[Claim, ...]]
    """The claims taken so far, by the chunk they come from."""


class RelevanceTester(Protocol):
    @property
    def name(self) -> str: ...

    async def judge(self, batch: Sequence[Candidate], context: JudgeContext) -> list[Judgement]:
        """One judgement per candidate of ``batch`` (their texts read), in order."""
        ...


@dataclass(frozen=True, slots=True)
class CheapTester:
    """Relevance by code (module docstring); ``threshold``: the score a relevant
    candidate reaches (docs/lazy.md says how it was chosen)."""

    threshold: float = 0.4
    question_weight: float = 0.5
    prior_weight: float = 0.5
    name: str = "cheap"

    def score(self, candidate: Candidate, context: JudgeContext) -> float:
        wanted = terms(context.question)
        held = terms(f"{candidate.title} {candidate.text or ''}")
        direct = self.question_weight * coverage(wanted, held) + self.prior_weight * min(
            1.0, max(0.0, candidate.prior)
        )
        if candidate.parent is None:
            return direct
        said = frozenset().union(*(terms(c.text) for c in context.claims.get(candidate.parent, ())))
        bridge = coverage(terms(candidate.title), said) if candidate.title else 0.0
        return max(direct, 0.5 * coverage(wanted, held) + 0.5 * bridge)

    async def judge(self, batch: Sequence[Candidate], context: JudgeContext) -> list[Judgement]:
        return [self.judgement(c, context) for c in batch]

    def judgement(self, candidate: Candidate, context: JudgeContext) -> Judgement:
        score = round(self.score(candidate, context), 4)
        return Judgement(candidate.chunk_id, score >= self.threshold, score, "cheap")


def parse_judgements(reply: str, *, count: int) -> dict[int, bool]:
    """The verdicts a model's ``reply`` gives for candidates ``1..count`` (0-based keys):
    the first verdict on each number counts; numbers out of range are ignored."""
    verdicts: dict[int, bool] = {}
    for match in _VERDICT.finditer(reply):
        n = int(match.group(1)) - 1
        if 0 <= n < count and n not in verdicts:
            verdicts[n] = match.group(2).lower() == "yes"
    return verdicts


class ModelTester:
    """Relevance by the model, the cheap tester where it does not judge (module
    docstring)."""

    name = "model"

    def __init__(
        self, calls: ModelCalls, *, fallback: CheapTester | None = None, chars: int = 400
    ) -> None:
        self._calls = calls
        self._fallback = fallback or CheapTester()
        self._chars = chars

    def _shown(self, candidate: Candidate) -> str:
        title = f"{candidate.title}: " if candidate.title else ""
        return title + (candidate.text or "")[: self._chars]

    async def judge(self, batch: Sequence[Candidate], context: JudgeContext) -> list[Judgement]:
        cheap = [self._fallback.judgement(c, context) for c in batch]
        listed = "\n".join(
            f'<passage id="{i}">{quote(self._shown(c))}</passage>' for i, c in enumerate(batch, 1)
        )
        reply = await self._calls.complete(
            RELEVANCE_PROMPT,
            max_tokens=6 * len(batch) + 8,
            question=context.question,
            passages=listed,
        )
        if reply is None:
            return cheap
        verdicts = parse_judgements(reply, count=len(batch))
        return [
            Judgement(
                c.chunk_id, verdicts[i], max(cheap[i].score, 0.5) if verdicts[i] else 0.0, "model"
            )
            if i in verdicts
            else cheap[i]
            for i, c in enumerate(batch)
        ]
