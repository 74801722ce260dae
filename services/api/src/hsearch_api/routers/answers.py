"""``POST /v1/answer``: an answer with citations, whole or streamed.

No ``from __future__ import annotations`` here: the route is defined in
:func:`create_router` with the request model built there, and FastAPI resolves string
annotations in the module's globals, where that model is not.
"""

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from hsearch.compositions.answers.models import (
    Answer,
    AnswerEvent,
    AnswerRequest,
    AnswerStrategy,
    Delta,
    Failed,
    Finished,
    Retrieved,
    SentenceChecked,
    Speaker,
    Turn,
)
from hsearch.compositions.lazy.budget import BudgetAsk
from hsearch.compositions.lazy.models import LazyProgress
from hsearch.errors import InvalidRequestError
from hsearch_api.deps import AnswerServiceDep, Caller, SearchCallerDep
from hsearch_api.schemas.answers import (
    AnswerLegRead,
    AnswerRequestBody,
    AnswerResponse,
    AnswerTimingsRead,
    AnswerTokensRead,
    CitationRead,
    ContextPassageRead,
    LazyReportRead,
    SentenceRead,
    SupportRead,
    answer_request_model,
)
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses

SSE = "text/event-stream"
SSE_EVENT_SCHEMA = {
    "description": "One server-sent event of the stream (`stream: true`): `data` is JSON. "
    "`progress` (lazy search, before `retrieval`): `{stage, tested, relevant, claims}`, "
    "`stage` one of `starting`, `testing`, `deepening`, then why it stopped: `sufficient`, "
    "`budget_spent`, `exhausted`. `retrieval`: `{standalone_query, passages}`. `delta`: "
    "`{text}`. `citation`: `{sentence, citations}`. `error`: `{error, detail}`. `done`: "
    "the whole answer.",
    "type": "object",
    "properties": {
        "event": {
            "type": "string",
            "enum": ["progress", "retrieval", "delta", "citation", "error", "done"],
        },
        "data": {"type": "string"},
    },
    "required": ["event", "data"],
}


def create_router(*, legs: Sequence[str]) -> APIRouter:
    request_model = answer_request_model(legs)
    router = APIRouter(prefix="/v1", tags=["answers"], responses=COMMON_ERRORS)

    @router.post(
        "/answer",
        response_model=AnswerResponse,
        responses={
            **error_responses(413),
            200: {"content": {SSE: {"schema": SSE_EVENT_SCHEMA}}},
        },
    )
    async def answer(
        body: request_model,  # type: ignore[valid-type]  # a model built at run time
        caller: SearchCallerDep,
        service: AnswerServiceDep,
    ) -> Any:
        """An answer with citations checked by the server: retrieval, then the model;
        `stream: true` for server-sent events. The model never causes a 5xx."""
        payload: AnswerRequestBody = body
        request = answer_request(payload, caller)
        if not payload.stream:
            return answer_response(await service.answer(request))
        events = service.events(request)
        try:
            first = await anext(events)  # a refused request or a failed search: an error body
        except BaseException:
            await events.aclose()
            raise
        return StreamingResponse(
            _sse(first, events),
            media_type=SSE,
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    return router


def answer_request(body: AnswerRequestBody, caller: Caller) -> AnswerRequest:
    lazy = body.strategy == "lazy"
    if not lazy and caller.max_top_k is not None and body.passages > caller.max_top_k:
        raise InvalidRequestError(f"passages: this search token allows at most {caller.max_top_k}")
    if lazy and "passages" in body.model_fields_set:
        raise InvalidRequestError(
            "passages: not with strategy lazy (its context is the claims that fit context_tokens)"
        )
    return AnswerRequest(
        tenant_id=caller.tenant_id,
        required_filter=caller.restriction,
        query=body.query,
        passages=body.passages,
        mode=body.mode,
        filter=body.filter,
        weights=body.weights,
        fusion=body.fusion,
        candidates=body.candidates,
        messages=tuple(Turn(Speaker(t.role), t.content) for t in body.messages),
        max_tokens=body.max_tokens,
        context_tokens=body.context_tokens,
        expand=body.expand,
        llm_rerank=body.llm_rerank,
        strategy=AnswerStrategy(body.strategy),
        generate=body.generate,
        budget=None
        if body.budget is None
        else BudgetAsk(
            relevance_tests=body.budget.relevance_tests,
            llm_calls=body.budget.llm_calls,
            tokens=body.budget.tokens,
            seconds=None if body.budget.seconds is None else float(body.budget.seconds),
        ),
        tester=body.tester,
        follow_up=body.follow_up,
        max_sources=caller.max_top_k if lazy else None,
    )


async def _sse(first: AnswerEvent, rest: AsyncIterator[AnswerEvent]) -> AsyncIterator[str]:
    """The events as server-sent events; a client that goes away closes ``rest``, which
    cancels the model's request."""
    async with contextlib.aclosing(rest) as events:  # type: ignore[type-var]  # an async generator
        yield _event(first)
        async for event in events:
            yield _event(event)


def _event(event: AnswerEvent) -> str:
    name, data = _encode(event)
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _encode(event: AnswerEvent) -> tuple[str, Any]:
    if isinstance(event, LazyProgress):
        return "progress", asdict(event)
    if isinstance(event, Retrieved):
        passages = [
            ContextPassageRead.model_validate(asdict(p)).model_dump() for p in event.passages
        ]
        return "retrieval", {"standalone_query": event.standalone_query, "passages": passages}
    if isinstance(event, Delta):
        return "delta", {"text": event.text}
    if isinstance(event, SentenceChecked):
        return "citation", {
            "sentence": _sentence(event.sentence).model_dump(),
            "citations": [
                CitationRead.model_validate(asdict(c)).model_dump() for c in event.citations
            ],
        }
    if isinstance(event, Failed):
        return "error", {"error": event.code, "detail": event.detail}
    if isinstance(event, Finished):
        return "done", answer_response(event.answer).model_dump()
    msg = f"no server-sent event for {type(event).__name__}"
    raise TypeError(msg)


def _sentence(sentence: Any) -> SentenceRead:
    return SentenceRead(
        index=sentence.index,
        text=sentence.text,
        start=sentence.start,
        end=sentence.end,
        citations=list(sentence.citations),
        supported=sentence.supported,
        support=[SupportRead(passage=n, score=s) for n, s in sentence.support],
    )


def answer_response(answer: Answer) -> AnswerResponse:
    return AnswerResponse(
        query=answer.query,
        standalone_query=answer.standalone_query,
        answer=answer.answer,
        sentences=[_sentence(s) for s in answer.sentences],
        citations=[CitationRead.model_validate(asdict(c)) for c in answer.citations],
        unsupported_sentences=answer.unsupported,
        passages=[ContextPassageRead.model_validate(asdict(p)) for p in answer.passages],
        legs=[
            AnswerLegRead(
                leg=r.leg,
                status=r.status,
                took_ms=r.took_ms,
                candidates=r.candidates,
                error=r.error,
            )
            for r in answer.legs
        ],
        degraded=list(answer.degraded),
        model=answer.model,
        prompt_version=answer.prompt_version,
        timings=AnswerTimingsRead.model_validate(asdict(answer.timings)),
        tokens=AnswerTokensRead.model_validate(asdict(answer.tokens)),
        cached=answer.cached,
        strategy=answer.strategy.value,
        lazy=None if answer.lazy is None else LazyReportRead.model_validate(asdict(answer.lazy)),
    )
