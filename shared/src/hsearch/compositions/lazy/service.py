"""A lazy search for one answer: its budget checked against the server's limits, its
tester chosen, its loop run on the tenant's stores (:mod:`.neighbourhood`), its claims
turned into the passages the model is given."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace

import anyio.to_thread

from hsearch.cache.generations import GenerationReader
from hsearch.compositions.answers.packing import pack
from hsearch.compositions.lazy.budget import LazyLimits, LazySpend
from hsearch.compositions.lazy.calls import ModelCalls
from hsearch.compositions.lazy.claims import CheapSufficiency, ExtractiveClaims
from hsearch.compositions.lazy.memory import Remembered, TurnMemory
from hsearch.compositions.lazy.models import Candidate, Claim, Gathered, LazyProgress
from hsearch.compositions.lazy.neighbourhood import ConceptSource, Reach, StoreNeighbourhood
from hsearch.compositions.lazy.search import LazyLoop
from hsearch.compositions.lazy.testers import CheapTester, ModelTester, RelevanceTester
from hsearch.concepts.extract import ConceptExtractor
from hsearch.concepts.index import ConceptIndex
from hsearch.concepts.store import ConceptStore
from hsearch.config import LazySettings
from hsearch.errors import InvalidRequestError
from hsearch.graph.store import GraphStore
from hsearch.llm.protocol import LLM
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


def claim_passages(gathered: Gathered, *, context_tokens: int) -> list[ClaimPassage]:
    """The claims that fit ``context_tokens`` (as passages are packed), best first; a
    chunk's claims next to each other, in its order."""
    by_chunk = {candidate.chunk_id: candidate for candidate, _, _ in gathered.chunks}
    ordered = [claim for _, _, claims in gathered.chunks for claim in claims]
    packed = pack(
        [(by_chunk[c.chunk_id].document_id or c.chunk_id, c.text) for c in ordered],
        budget_tokens=context_tokens,
    )
    return [
        ClaimPassage(ordered[p.index], by_chunk[ordered[p.index].chunk_id], p.text, p.truncated)
        for p in packed
    ]


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

    def limits(self, asked: LazyLimits | None) -> LazyLimits:
        """The request's budget: what it asked for (each within the server's maxima), or
        the defaults; raises InvalidRequestError naming the field."""
        s = self._settings
        if asked is None:
            return LazyLimits(s.relevance_tests, s.llm_calls, s.tokens, s.seconds)
        for name, value, most in (
            ("relevance_tests", asked.relevance_tests, s.max_relevance_tests),
            ("llm_calls", asked.llm_calls, s.max_llm_calls),
            ("tokens", asked.tokens, s.max_tokens),
            ("seconds", asked.seconds, s.max_seconds),
        ):
            low = 1 if name == "relevance_tests" else 0
            if not low <= value <= most or (name == "seconds" and value <= 0):
                least = "above 0" if name == "seconds" else f"at least {low}"
                raise InvalidRequestError(f"budget.{name}: must be {least} and at most {most}")
        return asked

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
    ) -> AsyncGenerator[LazyProgress | Gathered | Passages, None]:
        """The loop's progress, then what it gathered, then the question's Level 0
        passages (the answer's legs and degraded legs). ``follow_up``: the session of
        the turn this question follows (:mod:`.memory`)."""
        neighbourhood = StoreNeighbourhood(
            request=RetrievalRequest(
                tenant_id=request.tenant_id,
                query=request.query,
                limit=self._settings.candidates,
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
            tester=self._tester(tester, spend),
            extractor=ExtractiveClaims(),
            sufficiency=CheapSufficiency(),
            batch=self._settings.batch,
        )
        scope = TurnMemory.scope(self._retrieval.plan(neighbourhood.request).filter)
        before = None
        if follow_up is not None and self._memory is not None:
            before = await self._memory.recall(request.tenant_id, follow_up, scope=scope)
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
                    yield await self._kept(request.tenant_id, event, scope, before)
                else:
                    yield event
        if neighbourhood.retrieved is not None:
            yield neighbourhood.retrieved

    async def _kept(
        self, tenant_id: str, gathered: Gathered, scope: str, before: Remembered | None
    ) -> Gathered:
        """``gathered`` with the session a follow-up can name (when it could be kept)."""
        session = None
        if self._memory is not None:
            session = await self._memory.keep(
                tenant_id, gathered, scope=scope, visited=gathered.visited, before=before
            )
        report = replace(gathered.report, session=session, followed=before is not None)
        return replace(gathered, report=report)

    def _tester(self, name: str, spend: LazySpend) -> RelevanceTester:
        cheap = CheapTester(threshold=self._settings.threshold)
        if name == "model" and self._llm is not None:
            return ModelTester(
                ModelCalls(self._llm, spend, timeout_s=self._llm_timeout_s), fallback=cheap
            )
        return cheap
