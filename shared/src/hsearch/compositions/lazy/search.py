"""The lazy search's loop: best-first over a queue of candidates, under one budget.

1. **Start** (:meth:`Neighbourhood.start`): the question's candidates, Level 0 (its
   hybrid retrieval) and Level 1 (chunks holding its concepts, chunks of the
   communities they fall in), each with a prior.
2. **Test** the best untested candidates, a batch at a time (relevance tests are
   taken from the budget first: a batch the budget cannot pay for in full is cut to
   what is left).
3. **Claims** from each relevant one.
4. **Stop** when the claims suffice, the budget is spent or nothing is left to test.
5. Otherwise **deepen** from the relevant ones (:meth:`Neighbourhood.expand`: the
   documents linked to and from theirs, chunks sharing their concepts, their
   communities), each new candidate's prior its parent's score, decayed; back to 2.

The loop yields a :class:`~.models.LazyProgress` after each batch and a
:class:`~.models.Gathered` last.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import AsyncGenerator, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from hsearch.compositions.lazy.budget import LazySpend
from hsearch.compositions.lazy.claims import ClaimExtractor, Sufficiency
from hsearch.compositions.lazy.models import (
    Candidate,
    Claim,
    Gathered,
    Judgement,
    LazyProgress,
    LazyReport,
    Origin,
    Stage,
)
from hsearch.compositions.lazy.testers import JudgeContext, RelevanceTester

__all__ = ["LazyLoop", "Neighbourhood"]


class Neighbourhood(Protocol):
    """Where candidates come from, for one question of one tenant (under its filter)."""

    @property
    def degraded(self) -> Sequence[str]:
        """What it went without so far (``level1_unavailable: ...``)."""
        ...

    async def start(self, spend: LazySpend) -> list[Candidate]:
        """The question's candidates (Level 0 and Level 1), texts read where known."""
        ...

    async def read(self, candidates: Sequence[Candidate], spend: LazySpend) -> list[Candidate]:
        """``candidates`` with their texts and fields, those the search may show only (a
        chunk gone, or outside the filter, is left out)."""
        ...

    async def expand(
        self, candidate: Candidate, judgement: Judgement, spend: LazySpend
    ) -> list[Candidate]:
        """Candidates reached from the relevant ``candidate``."""
        ...


class _Frontier:
    """The loop's state: the queue (best prior first), what was queued and tested, the
    relevant chunks and their claims.

    A chunk is tested once, with one exception: a chunk judged irrelevant is queued
    once more when another relevant chunk leads to it, since the claim that leads there
    is evidence its first test did not have (the second hop of a question). A chunk
    still waiting that a relevant chunk leads to keeps its place, or takes the better
    prior it arrives with; either way it is tested with that chunk as its parent.

    What is counted (``levels``, ``tested``) is what was tested: read from the store
    under the request's filter first, so the counts say nothing of chunks a filter or a
    search token hides."""

    def __init__(self) -> None:
        self.queue: list[tuple[float, int, Candidate]] = []
        self._order = itertools.count()
        self._queued: dict[str, Candidate] = {}
        self._tested: set[str] = set()
        self._retested: set[str] = set()
        self._relevant: set[str] = set()
        self._counted: set[str] = set()
        self.levels = {origin.value: 0 for origin in Origin}
        self.tested = 0
        self.depth = 0
        self.relevant: list[tuple[Candidate, Judgement, tuple[Claim, ...]]] = []
        self.claims: dict[str, tuple[Claim, ...]] = {}

    def push(self, found: Sequence[Candidate]) -> None:
        for c in found:
            if self._takes(c):
                self._queued[c.chunk_id] = c
                heapq.heappush(self.queue, (-c.prior, next(self._order), c))

    def _takes(self, c: Candidate) -> bool:
        before = self._queued.get(c.chunk_id)
        if before is None:
            return True
        if c.chunk_id in self._relevant or c.parent is None or c.parent == before.parent:
            return False
        if c.chunk_id in self._tested:
            if c.chunk_id in self._retested:
                return False
            self._tested.discard(c.chunk_id)
            self._retested.add(c.chunk_id)
            return True
        if c.prior > before.prior:
            return True
        if before.parent is None:
            before.parent = c.parent  # tested with the claim that leads to it
        return False

    def visited(self, chunks: Iterable[tuple[str, str | None]]) -> None:
        """Chunks an earlier turn tested, each with the chunk that led to it: not tested
        again unless another relevant chunk of this turn leads to them."""
        for chunk_id, parent in chunks:
            if chunk_id not in self._queued:
                self._queued[chunk_id] = Candidate(chunk_id, Origin.MEMORY, 0.0, parent=parent)
                self._tested.add(chunk_id)

    def pop(self, count: int) -> list[Candidate]:
        popped: list[Candidate] = []
        while self.queue and len(popped) < count:
            c = heapq.heappop(self.queue)[2]
            if self._live(c):
                popped.append(c)
        return popped

    def judged(self, candidate: Candidate, judgement: Judgement) -> None:
        self._tested.add(candidate.chunk_id)
        self.tested += 1
        if candidate.chunk_id not in self._counted:
            self._counted.add(candidate.chunk_id)
            self.levels[candidate.origin.value] += 1
        if judgement.relevant:
            self._relevant.add(candidate.chunk_id)

    def _live(self, c: Candidate) -> bool:
        return self._queued.get(c.chunk_id) is c and c.chunk_id not in self._tested

    @property
    def waiting(self) -> bool:
        return any(self._live(c) for _, _, c in self.queue)

    def found(self, candidate: Candidate, judgement: Judgement, claims: tuple[Claim, ...]) -> None:
        self.claims[candidate.chunk_id] = claims
        self.relevant.append((candidate, judgement, claims))
        self.depth = max(self.depth, candidate.depth)

    def all_claims(self) -> list[Claim]:
        return [c for taken in self.claims.values() for c in taken]

    def progress(self, stage: Stage) -> LazyProgress:
        return LazyProgress(
            stage=stage,
            tested=self.tested,
            relevant=len(self.relevant),
            claims=sum(len(v) for v in self.claims.values()),
        )

    def gathered(
        self, stopped: Stage, spend: LazySpend, *, tester: str, degraded: Sequence[str]
    ) -> Gathered:
        """The relevant chunks in the order the search reached them (best-first by
        prior: the question's retrieval order, a chunk reached from a relevant one after
        it as its prior says), not by their test scores: a cheap score is a gate, not a
        ranking (docs/lazy.md, measured)."""
        ordered = list(self.relevant)
        return Gathered(
            report=LazyReport(
                budget=spend.lines(),
                stopped=stopped,
                levels=dict(self.levels),
                depth=self.depth,
                tested=self.tested,
                relevant=len(self.relevant),
                claims=tuple(c for _, _, taken in ordered for c in taken),
                tester=tester,
                degraded=tuple(degraded),
            ),
            chunks=tuple(ordered),
            visited=tuple(
                (chunk_id, self._queued[chunk_id].parent)
                for chunk_id in sorted(self._tested | self._relevant)
            ),
        )


@dataclass(frozen=True, slots=True)
class LazyLoop:
    tester: RelevanceTester
    extractor: ClaimExtractor
    sufficiency: Sufficiency
    batch: int = 8
    decay: float = 0.8
    """A candidate reached from a relevant one starts at that one's score times this."""
    max_depth: int = 3

    async def run(
        self,
        question: str,
        neighbourhood: Neighbourhood,
        spend: LazySpend,
        *,
        context_tokens: int,
        earlier: Sequence[Candidate] = (),
        visited: Iterable[tuple[str, str | None]] = (),
    ) -> AsyncGenerator[LazyProgress | Gathered, None]:
        """``earlier``: the relevant chunks of the turn a follow-up follows (queued with
        their texts); ``visited``: the chunks it tested, each with the chunk that led to
        it."""
        state = _Frontier()
        state.push(earlier)
        state.push(await neighbourhood.start(spend))  # a search that fails raises here
        # What the new question's own candidates hold is tested afresh; the rest of what
        # the earlier turn tested only when this turn's relevant chunks lead to it.
        state.visited(visited)
        yield state.progress(Stage.STARTING)
        while True:
            if not state.waiting:
                stopped = Stage.EXHAUSTED
                break
            if spend.out_of_time() or spend.tests_left() == 0:
                stopped = Stage.BUDGET_SPENT
                break
            found = await self._test(question, neighbourhood, spend, state)
            if found is None:
                continue
            yield state.progress(Stage.TESTING)
            if self.sufficiency.sufficient(
                question, state.all_claims(), context_tokens=context_tokens
            ):
                stopped = Stage.SUFFICIENT
                break
            if found:
                await self._deepen(found, neighbourhood, spend, state)
                yield state.progress(Stage.DEEPENING)
        yield state.progress(stopped)
        yield state.gathered(
            stopped, spend, tester=self.tester.name, degraded=neighbourhood.degraded
        )

    async def _test(
        self, question: str, neighbourhood: Neighbourhood, spend: LazySpend, state: _Frontier
    ) -> list[tuple[Candidate, Judgement]] | None:
        """Test the next batch (its tests taken from the budget first); the relevant
        ones, their claims taken; ``None`` when nothing of the batch could be tested. A
        candidate whose parent is in the same batch (an earlier turn's chunks) is judged
        after it, with its claims known."""
        batch = (await neighbourhood.read(state.pop(self.batch), spend))[: spend.tests_left()]
        batch = batch[: spend.take_tests(len(batch))]
        if not batch:
            return None
        here = {c.chunk_id for c in batch}
        first = [c for c in batch if c.parent not in here]
        after = [c for c in batch if c.parent in here]
        found: list[tuple[Candidate, Judgement]] = []
        for part in (first, after):
            if not part:
                continue
            judgements = await self.tester.judge(part, JudgeContext(question, state.claims))
            for candidate, judgement in zip(part, judgements, strict=True):
                state.judged(candidate, judgement)
                if judgement.relevant:
                    taken = await self.extractor.claims(
                        candidate, judgement, question=question, earlier=state.claims
                    )
                    state.found(candidate, judgement, taken)
                    found.append((candidate, judgement))
        return found

    async def _deepen(
        self,
        found: Sequence[tuple[Candidate, Judgement]],
        neighbourhood: Neighbourhood,
        spend: LazySpend,
        state: _Frontier,
    ) -> None:
        for candidate, judgement in sorted(found, key=lambda f: -f[1].score):
            if candidate.depth >= self.max_depth or spend.out_of_time():
                continue
            reached = await neighbourhood.expand(candidate, judgement, spend)
            for c in reached:
                c.depth = candidate.depth + 1
                c.parent = candidate.chunk_id
                c.prior = judgement.score * self.decay * min(1.0, max(0.0, c.prior))
            state.push(reached)
