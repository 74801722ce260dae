"""A lazy search for one answer: its budget checked against the server's limits, its
tester chosen, its loop run on the tenant's stores (:mod:`.neighbourhood`), its claims
turned into the passages the model is given."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, replace

import anyio.to_thread

from hsearch.cache.generations import GenerationReader
from hsearch.compositions.answers.citations import sentence_spans
from hsearch.compositions.answers.packing import pack
from hsearch.compositions.lazy.budget import BudgetAsk, LazyLimits, LazySpend
from hsearch.compositions.lazy.calls import ModelCalls
from hsearch.compositions.lazy.claims import CheapSufficiency, ExtractiveClaims
from hsearch.compositions.lazy.memory import Remembered, TurnMemory
from hsearch.compositions.lazy.models import Candidate, Claim, Gathered, LazyProgress
from hsearch.compositions.lazy.neighbourhood import ConceptSource, Reach, StoreNeighbourhood
from hsearch.compositions.lazy.search import LazyLoop
from hsearch.compositions.lazy.terms import coverage, terms
from hsearch.compositions.lazy.testers import CheapTester, ModelTester, RelevanceTester
from hsearch.concepts.extract import ConceptExtractor
from hsearch.concepts.index import ConceptIndex
from hsearch.concepts.store import ConceptStore
from hsearch.config import LazySettings
from hsearch.errors import InvalidRequestError
from hsearch.graph.store import GraphStore
from hsearch.llm.protocol import LLM, Usage
from hsearch.search.passages import Passages, RetrievalRequest, RetrievalService
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["TESTERS", "ClaimPassage", "LazyGatherer", "StoreConcepts", "claim_passages"]

TESTERS = ("cheap", "model")


@dataclass(frozen=True, slots=True)
class ClaimPassage:
    """A claim as the model is given it: a verbatim span of a relevant chunk."""

    claim: Claim
    candidate: Candidate
    text: str
    """The claim's text (cut when it had to be to fit the context)."""
    truncated: bool


def claim_passages(
    gathered: Gathered,
    *,
    question: str,
    context_tokens: int,
    max_sources: int | None = None,
    whole: int = 1,
) -> list[ClaimPassage]:
    """What the model is given, within ``context_tokens`` (as passages are packed), of
    the first ``max_sources`` relevant chunks at most: the first ``whole`` chunks whole
    (their claims first), then every other chunk's claims, in the order the search
    reached the chunks; then, while room is left, the rest of each chunk's sentences,
    chunk by chunk (those holding the most of the question's terms first). So the best
    chunk is read in full (a question one passage answers), the others by their claims
    (a question several answer), and a search that found few chunks still fills the
    context. A chunk's passages are given in its order, adjacent sentences joined into
    one span (docs/lazy.md, measured)."""
    chunks = gathered.chunks[:max_sources] if max_sources is not None else gathered.chunks
    wanted = terms(question)
    first: list[tuple[int, Claim]] = []
    more: list[list[Claim]] = []
    for n, (candidate, judgement, claims) in enumerate(chunks):
        first += [(n, claim) for claim in claims]
        taken = {(c.start, c.end) for c in claims}
        text = candidate.text or ""
        rest = [
            Claim(text[a:b], candidate.chunk_id, a, b, round(judgement.score / 2, 4))
            for a, b in sentence_spans(text)
            if (a, b) not in taken and text[a:b].strip()
        ]
        rest.sort(key=lambda c: (-coverage(wanted, terms(c.text)), c.start))
        more.append(rest)
    lead = [(n, claim) for n in range(min(whole, len(more))) for claim in more[n]]
    extra = [(n, claim) for n, rest in enumerate(more) for claim in rest if n >= whole]
    head = [(n, c) for n, c in first if n < whole]
    offered = head + lead + [(n, c) for n, c in first if n >= whole] + extra
    packed = pack(
        [(chunks[n][0].document_id or chunks[n][0].chunk_id, c.text) for n, c in offered],
        budget_tokens=context_tokens,
        per_document=len(offered),
    )
    chosen = sorted(
        ((offered[p.index][0], offered[p.index][1], p) for p in packed),
        key=lambda x: (x[0], x[1].start),
    )
    out: list[ClaimPassage] = []
    for n, claim, p in chosen:
        candidate = chunks[n][0]
        last = out[-1] if out else None
        text = candidate.text or ""
        if (
            last is not None
            and last.candidate is candidate
            and not last.truncated
            and not p.truncated
            and not text[last.claim.end : claim.start].strip()
        ):
            joined = Claim(
                text[last.claim.start : claim.end],
                claim.chunk_id,
                last.claim.start,
                claim.end,
                max(last.claim.score, claim.score),
            )
            out[-1] = ClaimPassage(joined, candidate, joined.text, False)
            continue
        out.append(ClaimPassage(claim, candidate, p.text, p.truncated))
    return out


class StoreConcepts:
    """The Level 1 index as the lazy search reads it: the tenant's concept index (held
    per data version by the store) and a question's concepts (extracted off the event
    loop)."""

    def __init__(self, store: ConceptStore, extractor: ConceptExtractor | None = None) -> None:
        self._store = store
        self._extractor = extractor or ConceptExtractor()

    async def index(self, tenant_id: str, version: str, *, timeout: float) -> ConceptIndex:
        return await self._store.index(tenant_id, version, timeout=timeout)

    async def query_concepts(self, query: str) -> tuple[str, ...]:
        return await anyio.to_thread.run_sync(self._extractor.query_concepts, query)


class LazyGatherer:
    """Runs lazy searches (module docstring)."""

    def __init__(
        self,
        *,
        retrieval: RetrievalService,
        store: VectorStore,
        generations: GenerationReader,
        settings: LazySettings,
        graphs: GraphStore | None = None,
        concepts: ConceptSource | None = None,
        llm: LLM | None = None,
        llm_timeout_s: float = 30.0,
        memory: TurnMemory | None = None,
    ) -> None:
        self._retrieval = retrieval
        self._store = store
        self._generations = generations
        self._settings = settings
        self._graphs = graphs
        self._concepts = concepts
        self._llm = llm
        self._llm_timeout_s = llm_timeout_s
        self._memory = memory

    def limits(self, asked: BudgetAsk | LazyLimits | None) -> LazyLimits:
        """The request's budget: what it asked for (each within the server's maxima),
        the server's default for what it left out; raises InvalidRequestError naming the
        field."""
        s = self._settings
        if isinstance(asked, LazyLimits):
            asked = BudgetAsk(asked.relevance_tests, asked.llm_calls, asked.tokens, asked.seconds)
        asked = asked or BudgetAsk()
        limits = LazyLimits(
            relevance_tests=s.relevance_tests
            if asked.relevance_tests is None
            else asked.relevance_tests,
            llm_calls=s.llm_calls if asked.llm_calls is None else asked.llm_calls,
            tokens=s.tokens if asked.tokens is None else asked.tokens,
            seconds=s.seconds if asked.seconds is None else asked.seconds,
        )
        for name, value, low, most in (
            ("relevance_tests", limits.relevance_tests, 1, s.max_relevance_tests),
            ("llm_calls", limits.llm_calls, 0, s.max_llm_calls),
            ("tokens", limits.tokens, 0, s.max_tokens),
        ):
            if not low <= value <= most:
                msg = f"budget.{name}: must be at least {low} and at most {most}"
                raise InvalidRequestError(msg)
        if not 0 < limits.seconds <= s.max_seconds:
            raise InvalidRequestError(
                f"budget.seconds: must be above 0 and at most {s.max_seconds}"
            )
        return limits

    def tester_name(self, asked: str | None) -> str:
        name = asked or self._settings.tester
        if name not in TESTERS:
            raise InvalidRequestError(f"tester: must be one of {', '.join(TESTERS)}")
        return name

    async def gather(
        self,
        request: RetrievalRequest,
        spend: LazySpend,
        *,
        tester: str,
        context_tokens: int,
        follow_up: str | None = None,
        max_sources: int | None = None,
        record: Callable[[Usage | None], None] | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> AsyncGenerator[LazyProgress | Gathered | Passages, None]:
        """The loop's progress, then what it gathered, then the question's Level 0
        passages (the answer's legs and degraded legs). ``follow_up``: the session of
        the turn this question follows (:mod:`.memory`); ``max_sources``: the most
        chunks its context may come from (and its Level 0 depth); ``record``: told of
        every model call made (its usage, ``None`` when it failed); ``slots``: the
        generation slots a model call takes one of (none free: the cheap tester
        judges)."""
        neighbourhood = StoreNeighbourhood(
            request=RetrievalRequest(
                tenant_id=request.tenant_id,
                query=request.query,
                limit=min(self._settings.candidates, max_sources or self._settings.candidates),
                mode=request.mode,
                filter=request.filter,
                required_filter=request.required_filter,
                weights=request.weights,
                fusion=request.fusion,
                candidates=request.candidates,
            ),
            retrieval=self._retrieval,
            store=self._store,
            generations=self._generations,
            graphs=self._graphs,
            concepts=self._concepts,
            reach=Reach(retrieval=self._settings.candidates),
        )
        loop = LazyLoop(
            tester=self._tester(tester, spend, record=record, slots=slots),
            extractor=ExtractiveClaims(),
            sufficiency=CheapSufficiency(),
            batch=self._settings.batch,
        )
        scope = TurnMemory.scope(neighbourhood.search_filter())
        version = None
        before = None
        if self._memory is not None:
            version = await self._memory.version(request.tenant_id)
            if follow_up is not None:
                before = await self._memory.recall(
                    request.tenant_id, follow_up, version=version, scope=scope
                )
        run = loop.run(
            request.query,
            neighbourhood,
            spend,
            context_tokens=context_tokens,
            earlier=before.candidates() if before is not None else (),
            visited=before.visited if before is not None else (),
        )
        async with contextlib.aclosing(run) as events:
            async for event in events:
                if isinstance(event, Gathered):
                    yield await self._kept(request.tenant_id, event, version, scope, before)
                else:
                    yield event
        if neighbourhood.retrieved is not None:
            yield neighbourhood.retrieved

    async def _kept(
        self,
        tenant_id: str,
        gathered: Gathered,
        version: str | None,
        scope: str,
        before: Remembered | None,
    ) -> Gathered:
        """``gathered`` with the session a follow-up can name (when it could be kept)."""
        session = None
        if self._memory is not None:
            session = await self._memory.keep(
                tenant_id, gathered, version=version, scope=scope, before=before
            )
        report = replace(gathered.report, session=session, followed=before is not None)
        return replace(gathered, report=report)

    def _tester(
        self,
        name: str,
        spend: LazySpend,
        *,
        record: Callable[[Usage | None], None] | None,
        slots: asyncio.Semaphore | None,
    ) -> RelevanceTester:
        cheap = CheapTester(threshold=self._settings.threshold)
        if name == "model" and self._llm is not None:
            calls = ModelCalls(
                self._llm, spend, timeout_s=self._llm_timeout_s, record=record, slots=slots
            )
            return ModelTester(calls, fallback=cheap)
        return cheap
