"""Answers with citations: retrieve → pack → generate → check citations → stream.

:meth:`AnswerService.events` is the one code path: the streamed answer is its events as
they come; :meth:`AnswerService.answer` runs the same events and returns the last one's
answer, so the two forms carry the same text and citations.

* **Retrieval** is the search's (:class:`~hsearch.search.passages.RetrievalService`):
  the same tenancy, filters (a search token's included) and degraded legs; a search
  that fails raises as ``/v1/search`` does.
* **Packing** (:mod:`.packing`) fits the passages to ``llm.context_tokens``.
* **Generation** streams from the configured model; the model never causes a 5xx: one
  that is down, too slow, busy (``llm.max_concurrent``) or absent gives the passages
  with ``answer: null`` and the reason in ``degraded``; one that breaks off mid-stream
  gives a ``Failed`` event, then the same.
* **Citations** are decided by code as sentences complete (:mod:`.citations`): markers
  the passages do not support never reach the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field, replace

import anyio

from hsearch.compositions.answers.caching import AnswerCache
from hsearch.compositions.answers.citations import (
    Closed,
    SentenceAssembler,
    best_quote,
    check_sentence,
    marker_suffix,
)
from hsearch.compositions.answers.models import (
    Answer,
    AnswerEvent,
    AnswerRequest,
    AnswerSentence,
    AnswerStrategy,
    AnswerTimings,
    AnswerTokens,
    Citation,
    ContextPassage,
    Delta,
    Failed,
    Finished,
    Retrieved,
    SentenceChecked,
    Speaker,
)
from hsearch.compositions.answers.packing import estimate_tokens, pack
from hsearch.compositions.answers.prompts import (
    ANSWER_PROMPT_VERSION,
    answer_messages,
    helper_messages,
    prompt_cost,
    query_language,
    quote,
)
from hsearch.compositions.answers.repetition import looping
from hsearch.compositions.answers.shaping import parse_order, parse_queries
from hsearch.compositions.lazy.budget import LazyLimits, LazySpend, usage_tokens
from hsearch.compositions.lazy.models import Gathered, LazyProgress, LazyReport
from hsearch.compositions.lazy.service import LazyGatherer, claim_passages
from hsearch.config import LlmSettings
from hsearch.errors import InvalidRequestError, ModelError
from hsearch.llm.protocol import LLM, ChatMessage, Usage, whole_reply
from hsearch.metrics import instruments
from hsearch.ratelimit.tokens import TokenQuota
from hsearch.search.fusion import LegHit, reciprocal_rank_fusion
from hsearch.search.passages import Passage, Passages, RetrievalRequest, RetrievalService

__all__ = ["AnswerService", "CitationSettings"]

logger = logging.getLogger(__name__)

REWRITE_PROMPT = "rewrite"
EXPAND_PROMPT = "expand"
RERANK_PROMPT = "rerank"
MAX_TURNS = 20
MAX_TURN_CHARS = 4000


@dataclass(frozen=True, slots=True)
class CitationSettings:
    """How support is decided (docs/answers.md says how the values were chosen)."""

    threshold: float = 0.5
    """The share of a sentence's terms a passage must hold to support it."""
    max_citations: int = 3
    fill: bool = False
    """Cite every supporting passage (up to ``max_citations``), not only the model's
    supported markers (or the best one when none holds)."""
    by_rank: bool = False
    """Among supporting passages, the retrieval's rank decides which is best."""


class AnswerService:
    def __init__(
        self,
        *,
        retrieval: RetrievalService,
        llm: LLM | None,
        settings: LlmSettings,
        citations: CitationSettings | None = None,
        cache: AnswerCache | None = None,
        quota: TokenQuota | None = None,
        prompt_version: int = ANSWER_PROMPT_VERSION,
        lazy: LazyGatherer | None = None,
    ) -> None:
        self._retrieval = retrieval
        self._llm = llm
        self._settings = settings
        self._citations = citations or CitationSettings()
        self._cache = cache
        self._quota = quota
        self._prompt_version = prompt_version
        self._slots = asyncio.Semaphore(settings.max_concurrent)
        self._lazy = lazy

    @property
    def model(self) -> str | None:
        return self._llm.model if self._llm is not None else None

    async def answer(self, request: AnswerRequest) -> Answer:
        """The whole answer: the last event of :meth:`events`."""
        async with contextlib.aclosing(self.events(request)) as events:
            async for event in events:
                if isinstance(event, Finished):
                    return event.answer
        msg = "the answer's events ended without a final answer"  # a bug, never a request's
        raise RuntimeError(msg)

    async def events(self, request: AnswerRequest) -> AsyncGenerator[AnswerEvent, None]:
        """The answer as it is made: :class:`Retrieved`, then :class:`Delta` and
        :class:`SentenceChecked` as the model writes, a :class:`Failed` if it breaks off,
        and :class:`Finished` last. Raises InvalidRequestError (422) and
        SearchUnavailableError (503) before the first event, as a search does."""
        started = time.perf_counter()
        _check(request, self._settings)
        if request.strategy is AnswerStrategy.LAZY:
            if self._lazy is None:
                raise InvalidRequestError("strategy: lazy search is not available on this server")
            request = replace(
                request,
                budget=self._lazy.limits(request.budget),
                tester=self._lazy.tester_name(request.tester),
            )
        key = None
        if self._cache is not None and self._llm is not None:
            key = await self._cache.key(
                request, model=self._llm.model, prompt_version=self._prompt_version
            )
            cached = await self._cache.get(key) if key is not None else None
            if cached is not None:
                for event in replay(cached):
                    yield event
                return
        if self._quota is not None and self._llm is not None:
            await self._quota.check(request.tenant_id)  # 429 before any event
        spend = _Spend()
        charged = False
        try:
            async with contextlib.aclosing(self._fresh(request, started, spend)) as fresh:
                async for event in fresh:
                    if isinstance(event, Finished):
                        if key is not None and self._cache is not None:
                            await self._cache.put(key, event.answer)
                        charged = True
                        await self._charge(request.tenant_id, spend)
                    yield event
        finally:
            if not charged:  # a client that went away (or a failure) still pays what was used
                with anyio.CancelScope(shield=True):
                    await self._charge(request.tenant_id, spend)

    async def _charge(self, tenant_id: str, spend: _Spend) -> None:
        """The tenant's token quota, charged with every model call of one answer."""
        if self._quota is not None:
            await self._quota.charge(tenant_id, (spend.prompt or 0) + (spend.completion or 0))

    async def _fresh(
        self, request: AnswerRequest, started: float, spend: _Spend
    ) -> AsyncGenerator[AnswerEvent, None]:
        lazy: _Lazy | None = None
        if request.strategy is AnswerStrategy.LAZY and self._lazy is not None:
            lazy = _Lazy(self._lazy_spend(request))
            self._hold_answer(request, lazy)  # before any other call: the answer comes first
        standalone = await self._standalone(request, spend, lazy)
        if lazy is not None:
            async with contextlib.aclosing(
                self._gather(request, standalone, lazy, spend)
            ) as events:
                async for progress in events:
                    yield progress
            if lazy.passages is None:
                raise RuntimeError("the lazy search ended without its passages")  # a bug
            passages, context = lazy.passages, self._fit_answer(request, standalone, lazy)
            retrieved = time.perf_counter()
        else:
            passages = await self._retrieve(request, standalone, spend)
            if request.llm_rerank:
                passages = await self._rerank(standalone, passages, spend)
            retrieved = time.perf_counter()
            context = self._pack(passages, request)
        packed = time.perf_counter()
        yield Retrieved(context, standalone)
        run = _Run(
            request=request,
            standalone=standalone,
            passages=passages,
            context=context,
            started=started,
            retrieved=retrieved,
            packed=packed,
            spend=spend,
            lazy=lazy,
        )
        if not request.generate:
            yield Finished(run.finish(None, None))
            return
        if lazy is not None and not lazy.answer_held:
            yield Finished(
                run.finish(None, "budget_spent: the budget leaves no model call for the answer")
            )
            return
        if self._llm is None:
            yield Finished(run.finish(None, "model_unavailable: no model is configured"))
            return
        if self._slots.locked():
            yield Finished(run.finish(None, "model_busy: every generation slot is taken"))
            return
        async with self._slots, contextlib.aclosing(self._generate(self._llm, run)) as events:
            async for event in events:
                yield event

    async def _generate(self, llm: LLM, run: _Run) -> AsyncGenerator[AnswerEvent, None]:
        language = query_language(run.standalone)
        chosen, messages = answer_messages(
            run.standalone,
            [(p.title, p.text) for p in run.context],
            language=language,
            version=self._prompt_version,
        )
        run.model, run.prompt_version = llm.model, chosen.id
        run.spend.calls += 1
        assembler = SentenceAssembler()
        timeout_s, first_token_s = self._settings.timeout_s, self._settings.first_token_timeout_s
        if run.lazy is not None:  # the lazy search's deadline holds for its answer too
            left = max(0.1, run.lazy.spend.end.remaining_s())
            timeout_s, first_token_s = min(timeout_s, left), min(first_token_s, left)
        stream = llm.stream(
            messages,
            max_tokens=self._answer_tokens(run.request),
            temperature=self._settings.temperature,
            timeout_s=timeout_s,
            first_token_timeout_s=first_token_s,
        )
        written = ""
        try:
            try:
                async with contextlib.aclosing(stream) as items:
                    async for item in items:
                        if isinstance(item, Usage):
                            run.spend.add(item)
                            run.answer_usage = item
                            continue
                        if run.first_token is None:
                            run.first_token = time.perf_counter()
                        written += item  # before it is shown: a client may go away there
                        for event in self._pieces(assembler.feed(item), run):
                            yield event
                        if looping(written):  # closing the stream cancels the generation
                            run.cut = REPETITION
                            logger.info("answer.model.looping model=%s", llm.model)
                            break
            finally:  # however it ended (a loop cut, a failure, a client gone): charged
                _estimate_uncounted(run, messages, written)
        except Exception as exc:  # the model never causes a 5xx
            failure = exc if isinstance(exc, ModelError) else _unexpected(exc)
            logger.warning("answer.model.failed code=%s error=%s", failure.code, failure.message)
            if run.text:
                yield Failed(failure.code, failure.message)
            yield Finished(run.finish(None, f"{failure.code}: {failure.message}"))
            return
        for event in self._pieces(assembler.finish(), run):
            yield event
        if not run.text.strip():
            yield Finished(run.finish(None, "model_empty: the model wrote nothing"))
            return
        yield Finished(run.finish(run.text, None))

    def _answer_tokens(self, request: AnswerRequest) -> int:
        return min(request.max_tokens or self._settings.max_tokens, self._settings.max_tokens)

    def _context_budget(self, request: AnswerRequest) -> int:
        return min(
            request.context_tokens or self._settings.context_tokens, self._settings.context_tokens
        )

    def _lazy_spend(self, request: AnswerRequest) -> LazySpend:
        """The lazy search's budget, the answer's model call held from it first (at the
        most it can cost) so the gathering can never leave too little for it; the
        gathering gets half the wall time when an answer is to be written."""
        if not isinstance(request.budget, LazyLimits):  # set by events() for a lazy request
            raise RuntimeError("a lazy request without its budget")  # a bug
        answering = request.generate and self._llm is not None
        return LazySpend(request.budget, gather_share=0.5 if answering else 1.0)

    def _hold_answer(self, request: AnswerRequest, lazy: _Lazy) -> None:
        """Hold the answer's call from the budget at a generous guess (the context twice
        over for the passages' markup, the question and the turns, the instructions),
        so nothing before it can leave too little; settled at the real prompt's cost
        once the context is known (:meth:`_fit_answer`)."""
        if not request.generate or self._llm is None:
            return
        asked = request.query + "".join(t.content for t in request.messages[-2:])
        lazy.answer_cost = (
            2 * self._context_budget(request)
            + estimate_tokens(asked)
            + 600
            + self._answer_tokens(request)
        )
        lazy.answer_held = lazy.spend.reserve_call(lazy.answer_cost)

    async def _gather(
        self, request: AnswerRequest, standalone: str, lazy: _Lazy, spend: _Spend
    ) -> AsyncGenerator[LazyProgress, None]:
        if self._lazy is None:
            return
        budget = self._context_budget(request)

        def record(usage: Usage | None) -> None:
            spend.calls += 1
            if usage is not None:
                spend.add(usage)

        gathered: Gathered | None = None
        async with contextlib.aclosing(
            self._lazy.gather(
                _retrieval_request(request, standalone),
                lazy.spend,
                tester=request.tester or "cheap",
                context_tokens=budget,
                follow_up=request.follow_up,
                max_sources=request.max_sources,
                record=record,
                slots=self._slots,
            )
        ) as events:
            async for event in events:
                if isinstance(event, LazyProgress):
                    yield event
                elif isinstance(event, Gathered):
                    gathered = event
                else:
                    lazy.passages = event
        if gathered is None:
            msg = "the lazy search ended without its context"  # a bug, never a request's
            raise RuntimeError(msg)
        lazy.report = gathered.report
        lazy.context = tuple(
            ContextPassage(
                number=number,
                chunk_id=chosen.candidate.chunk_id,
                document_id=chosen.candidate.document_id,
                external_id=chosen.candidate.external_id,
                title=chosen.candidate.title,
                text=chosen.text,
                score=chosen.claim.score,
                rank=number,
                char_start=None
                if chosen.candidate.char_start is None
                else chosen.candidate.char_start + chosen.claim.start,
                char_end=None
                if chosen.candidate.char_start is None
                else chosen.candidate.char_start + chosen.claim.start + len(chosen.text),
                truncated=chosen.truncated,
            )
            for number, chosen in enumerate(
                claim_passages(
                    gathered,
                    question=standalone,
                    context_tokens=budget,
                    max_sources=request.max_sources,
                ),
                1,
            )
        )

    def _fit_answer(
        self, request: AnswerRequest, standalone: str, lazy: _Lazy
    ) -> tuple[ContextPassage, ...]:
        """The lazy context the answer's call can pay for: the hold is released and the
        real prompt's cost reserved (its passages dropped from the end while it does not
        fit); none fits: the context as gathered, and no call (``answer_held`` false)."""
        context = lazy.context
        if not lazy.answer_held:
            return context
        lazy.spend.release_call(lazy.answer_cost)
        lazy.answer_held = False
        language = query_language(standalone)
        for keep in range(len(context), -1, -1):
            _, messages = answer_messages(
                standalone,
                [(p.title, p.text) for p in context[:keep]],
                language=language,
                version=self._prompt_version,
            )
            cost = prompt_cost(messages) + self._answer_tokens(request)
            if keep and lazy.spend.reserve_call(cost):
                lazy.answer_cost, lazy.answer_held = cost, True
                return context[:keep]
        return context

    def _pieces(self, pieces: Sequence[str | Closed], run: _Run) -> list[AnswerEvent]:
        events: list[AnswerEvent] = []
        for piece in pieces:
            if isinstance(piece, str):
                run.text += piece
                events.append(Delta(piece))
                continue
            sentence, citations, suffix = self._check(piece, run)
            if suffix:
                run.text += suffix
                events.append(Delta(suffix))
            run.sentences.append(sentence)
            for citation in citations:
                run.citations.setdefault(citation.number, citation)
            events.append(SentenceChecked(sentence, citations))
        return events

    def _check(self, closed: Closed, run: _Run) -> tuple[AnswerSentence, tuple[Citation, ...], str]:
        texts = [p.text for p in run.context]
        checked = check_sentence(
            closed.text,
            texts,
            markers=closed.markers,
            threshold=self._citations.threshold,
            max_citations=self._citations.max_citations,
            fill=self._citations.fill,
            by_rank=self._citations.by_rank,
        )
        end = len(run.text)
        start = end - len(closed.text)
        sentence = AnswerSentence(
            index=len(run.sentences),
            text=closed.text,
            start=start,
            end=end,
            citations=tuple(c.passage + 1 for c in checked.citations),
            supported=checked.supported,
            support=tuple((s.passage + 1, round(s.score, 4)) for s in checked.supporting),
            written=closed.markers,
        )
        citations = tuple(_citation(run.context[c.passage], closed.text) for c in checked.citations)
        return sentence, citations, marker_suffix(checked.citations)

    def _pack(self, passages: Passages, request: AnswerRequest) -> tuple[ContextPassage, ...]:
        budget = min(
            request.context_tokens or self._settings.context_tokens, self._settings.context_tokens
        )
        found = passages.passages
        packed = pack([(p.document_id, p.text) for p in found], budget_tokens=budget)
        return tuple(
            _context(number, found[chosen.index], chosen.text, truncated=chosen.truncated)
            for number, chosen in enumerate(packed, start=1)
        )

    async def _standalone(
        self, request: AnswerRequest, spend: _Spend, lazy: _Lazy | None = None
    ) -> str:
        """The question to search for: a follow-up rewritten to stand alone by the
        model; without one (or when it fails, or writes nonsense) the earlier user
        turns and the question together."""
        if not request.messages:
            return request.query
        fallback = " ".join(
            [*[t.content for t in request.messages if t.role is Speaker.USER][-2:], request.query]
        )[-2000:]
        conversation = "\n".join(f"{t.role.value}: {t.content}" for t in request.messages[-6:])
        written = await self._complete(
            REWRITE_PROMPT,
            spend,
            budget=lazy.spend if lazy is not None else None,
            conversation=conversation,
            question=request.query,
        )
        line = written.strip().splitlines()[0].strip() if written and written.strip() else ""
        if not 3 <= len(line) <= 500:
            return fallback
        return line

    async def _retrieve(self, request: AnswerRequest, question: str, spend: _Spend) -> Passages:
        """The passages for ``question``; with ``expand``, fused with those of the
        model's other ways to ask it (:mod:`.shaping`)."""
        found = await self._retrieval.retrieve(_retrieval_request(request, question))
        if not request.expand:
            return found
        reply = await self._complete(EXPAND_PROMPT, spend, question=question, max_tokens=64)
        queries = parse_queries(reply or "", question=question)
        if not queries:
            return found
        lists = [found.passages]
        for query in queries:
            more = await self._retrieval.retrieve(_retrieval_request(request, query))
            lists.append(more.passages)
        return replace(found, passages=fuse_passages(lists, limit=request.passages))

    async def _rerank(self, question: str, passages: Passages, spend: _Spend) -> Passages:
        """``passages`` in the order the model gives them (listwise); as they were when
        its reply names none of them."""
        found = passages.passages
        if len(found) < 2:
            return passages
        listed = "\n".join(
            f'<passage id="{i}">{quote(p.text[:400])}</passage>' for i, p in enumerate(found, 1)
        )
        reply = await self._complete(
            RERANK_PROMPT, spend, question=question, passages=listed, max_tokens=32
        )
        order = parse_order(reply or "", count=len(found))
        if order is None:
            return passages
        reordered = tuple(replace(found[i], rank=n) for n, i in enumerate(order, 1))
        return replace(passages, passages=reordered)

    async def _complete(
        self,
        name: str,
        spend: _Spend,
        *,
        max_tokens: int = 64,
        budget: LazySpend | None = None,
        **fields: str,
    ) -> str | None:
        """The model's whole reply to prompt ``name`` with ``fields`` filled in; ``None``
        without a model, when it fails (the caller then goes on without it) or when
        ``budget`` (a lazy search's) cannot pay for it."""
        if self._llm is None:
            return None
        messages = helper_messages(name, fields)
        cost = prompt_cost(messages) + max_tokens
        if budget is not None and not budget.reserve_call(cost):
            return None
        spend.calls += 1
        try:
            written, usage = await whole_reply(
                self._llm,
                messages,
                max_tokens=max_tokens,
                timeout_s=min(self._settings.timeout_s, 10.0),
                first_token_timeout_s=min(self._settings.first_token_timeout_s, 10.0),
                on_usage=spend.add,
            )
        except Exception as exc:  # a helper call's failure only skips it
            failure = exc if isinstance(exc, ModelError) else _unexpected(exc)
            logger.info("answer.%s.failed error=%s", name, failure.message)
            if budget is not None:
                budget.settle_call(cost, None)
            return None
        if budget is not None:
            budget.settle_call(cost, usage_tokens(usage))
        return written


def _estimate_uncounted(run: _Run, messages: Sequence[ChatMessage], written: str) -> None:
    """The answer's tokens, estimated high, when its call ended after the model wrote
    something but before the endpoint counted it (a loop cut, a stream that broke off):
    the tenant's quota is charged for what the model read and wrote, not for nothing."""
    if run.answer_usage is not None or not written:
        return
    usage = Usage(prompt_cost(messages), estimate_tokens(written))
    run.spend.add(usage)
    run.answer_usage = usage


REPETITION = "model_repetition: the model was repeating itself; its answer was cut there"


def _unexpected(exc: Exception) -> ModelError:
    """A model adapter's failure that is not a ModelError (a bug in an adapter, a reply
    it could not read), as one: logged with its traceback, never a 5xx."""
    logger.error("answer.model.unexpected error=%s", type(exc).__name__, exc_info=exc)
    return ModelError(f"the model's reply could not be read ({type(exc).__name__})")


def _retrieval_request(request: AnswerRequest, query: str) -> RetrievalRequest:
    return RetrievalRequest(
        tenant_id=request.tenant_id,
        query=query,
        limit=request.passages,
        mode=request.mode,
        filter=request.filter,
        required_filter=request.required_filter,
        weights=request.weights,
        fusion=request.fusion,
        candidates=request.candidates,
    )


def fuse_passages(lists: Sequence[Sequence[Passage]], *, limit: int) -> tuple[Passage, ...]:
    """Passage lists fused by reciprocal rank: the first (the question's) weighs as much
    as all the others together; each chunk once, renumbered."""
    weights = {"0": 1.0, **{str(i): 1.0 / (len(lists) - 1) for i in range(1, len(lists))}}
    by_id: dict[str, Passage] = {}
    legs: dict[str, list[LegHit]] = {}
    for i, passages in enumerate(lists):
        legs[str(i)] = [LegHit(p.chunk_id, p.score) for p in passages]
        for p in passages:
            by_id.setdefault(p.chunk_id, p)
    fused = reciprocal_rank_fusion(legs, weights=weights)
    return tuple(replace(by_id[f.id], rank=n) for n, f in enumerate(fused[:limit], 1))


@dataclass
class _Spend:
    """The model calls one answer made, and their tokens (as the endpoint counted)."""

    calls: int = 0
    prompt: int | None = None
    completion: int | None = None

    def add(self, usage: Usage) -> None:
        if usage.prompt_tokens is not None:
            self.prompt = (self.prompt or 0) + usage.prompt_tokens
        if usage.completion_tokens is not None:
            self.completion = (self.completion or 0) + usage.completion_tokens


@dataclass
class _Lazy:
    """A lazy search's share of one answer."""

    spend: LazySpend
    answer_cost: int = 0
    answer_held: bool = False
    """The answer's call is paid for (held from the budget before the gathering)."""
    passages: Passages | None = None
    context: tuple[ContextPassage, ...] = ()
    report: LazyReport | None = None

    def settle(self, usage: Usage | None, *, answered: bool) -> LazyReport | None:
        """The report with the answer's call settled: at what the endpoint counted for it
        when it was made, released when it was not."""
        if self.answer_held:
            self.answer_held = False
            if answered:
                self.spend.settle_call(self.answer_cost, usage_tokens(usage))
            else:
                self.spend.release_call(self.answer_cost)
        if self.report is None:
            return None
        return replace(self.report, budget=self.spend.lines())


@dataclass
class _Run:
    """What one answer has gathered so far."""

    request: AnswerRequest
    standalone: str
    passages: Passages
    context: tuple[ContextPassage, ...]
    started: float
    retrieved: float
    packed: float
    text: str = ""
    first_token: float | None = None
    spend: _Spend = field(default_factory=_Spend)
    model: str | None = None
    prompt_version: str | None = None
    lazy: _Lazy | None = None
    answer_usage: Usage | None = None
    """What the endpoint counted for the answer's own call."""
    cut: str | None = None
    """Why the answer's generation was stopped early (a reason for ``degraded``)."""

    def __post_init__(self) -> None:
        self.sentences: list[AnswerSentence] = []
        self.citations: dict[int, Citation] = {}

    def finish(self, text: str | None, reason: str | None) -> Answer:
        answer = self._answer(text, reason)
        instruments.record_answer(
            tenant=self.request.tenant_id,
            model=answer.model or "none",
            answered=answer.answer is not None,
            seconds=answer.timings.total_ms / 1000,
            first_token_s=None
            if answer.timings.first_token_ms is None
            else answer.timings.first_token_ms / 1000,
            tokens_in=answer.tokens.prompt,
            tokens_out=answer.tokens.completion,
            supported=len(answer.sentences) - answer.unsupported,
            unsupported=answer.unsupported,
        )
        logger.info(
            "answer.done tenant=%s model=%s answered=%s sentences=%d unsupported=%d took_ms=%.1f",
            self.request.tenant_id,
            answer.model,
            answer.answer is not None,
            len(answer.sentences),
            answer.unsupported,
            answer.timings.total_ms,
        )
        return answer

    def _answer(self, text: str | None, reason: str | None) -> Answer:
        now = time.perf_counter()
        degraded = [f"leg:{leg}" for leg in self.passages.degraded]
        lazy = None
        if self.lazy is not None:
            lazy = self.lazy.settle(self.answer_usage, answered=self.model is not None)
            degraded += list(lazy.degraded if lazy is not None else ())
        if reason is not None:
            degraded.insert(0, reason)
        if self.cut is not None and text is not None:
            degraded.insert(0, self.cut)
        answered = text is not None
        return Answer(
            query=self.request.query,
            standalone_query=self.standalone,
            answer=text,
            sentences=tuple(self.sentences) if answered else (),
            citations=tuple(self.citations[n] for n in sorted(self.citations)) if answered else (),
            passages=self.context,
            legs=self.passages.legs,
            degraded=tuple(degraded),
            model=self.model,
            prompt_version=self.prompt_version,
            timings=AnswerTimings(
                retrieval_ms=_ms(self.started, self.retrieved),
                packing_ms=_ms(self.retrieved, self.packed),
                first_token_ms=None
                if self.first_token is None
                else _ms(self.started, self.first_token),
                generation_ms=_ms(self.packed, now) if self.model else 0.0,
                total_ms=_ms(self.started, now),
            ),
            tokens=AnswerTokens(
                prompt=self.spend.prompt,
                completion=self.spend.completion,
                calls=self.spend.calls,
                context=sum(estimate_tokens(p.text) for p in self.context),
            ),
            mode=self.passages.mode,
            method=self.passages.method,
            strategy=self.request.strategy,
            lazy=lazy,
        )


def _ms(start: float, end: float) -> float:
    return round((end - start) * 1000, 3)


def _context(number: int, passage: Passage, text: str, *, truncated: bool) -> ContextPassage:
    return ContextPassage(
        number=number,
        chunk_id=passage.chunk_id,
        document_id=passage.document_id,
        external_id=passage.external_id,
        title=passage.title,
        text=text,
        score=passage.score,
        rank=passage.rank,
        char_start=passage.char_start,
        char_end=passage.char_end
        if not truncated or passage.char_start is None
        else passage.char_start + len(text),
        truncated=truncated,
        metadata=passage.metadata,
    )


def _citation(passage: ContextPassage, sentence: str) -> Citation:
    start, end = best_quote(sentence, passage.text)
    offset = passage.char_start
    return Citation(
        number=passage.number,
        chunk_id=passage.chunk_id,
        document_id=passage.document_id,
        external_id=passage.external_id,
        title=passage.title,
        quote=passage.text[start:end],
        char_start=None if offset is None else offset + start,
        char_end=None if offset is None else offset + end,
    )


def _check(request: AnswerRequest, settings: LlmSettings) -> None:
    if not 1 <= request.passages <= 50:
        raise InvalidRequestError("passages: must be between 1 and 50")
    if request.max_tokens is not None and not 1 <= request.max_tokens <= settings.max_tokens:
        raise InvalidRequestError(f"max_tokens: must be between 1 and {settings.max_tokens}")
    if (
        request.context_tokens is not None
        and not 64 <= request.context_tokens <= settings.context_tokens
    ):
        msg = f"context_tokens: must be between 64 and {settings.context_tokens}"
        raise InvalidRequestError(msg)
    lazy = request.strategy is AnswerStrategy.LAZY
    if lazy and (request.expand or request.llm_rerank):
        raise InvalidRequestError("expand, llm_rerank: not with strategy lazy")
    if not lazy and (
        request.budget is not None or request.tester is not None or request.follow_up is not None
    ):
        raise InvalidRequestError("budget, tester, follow_up: only with strategy lazy")
    if len(request.messages) > MAX_TURNS:
        raise InvalidRequestError(f"messages: at most {MAX_TURNS} earlier turns")
    for i, turn in enumerate(request.messages):
        if len(turn.content) > MAX_TURN_CHARS:
            raise InvalidRequestError(f"messages[{i}].content: at most {MAX_TURN_CHARS} characters")


def replay(answer: Answer) -> list[AnswerEvent]:
    """The events a cached ``answer`` is streamed as: the same text and citations as
    when it was written, a sentence at a time."""
    events: list[AnswerEvent] = [Retrieved(answer.passages, answer.standalone_query)]
    text = answer.answer or ""
    by_number = {c.number: c for c in answer.citations}
    at = 0
    for sentence in answer.sentences:
        events.append(Delta(text[at : sentence.end]))
        suffix = "".join(f"[{n}]" for n in sentence.citations)
        if suffix:
            events.append(Delta(suffix))
        at = sentence.end + len(suffix)
        cited = tuple(by_number[n] for n in sentence.citations if n in by_number)
        events.append(SentenceChecked(sentence, cited))
    if at < len(text):
        events.append(Delta(text[at:]))
    events.append(Finished(answer))
    return events
