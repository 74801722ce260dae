"""``POST /v1/chat/completions``: the answers path in OpenAI's chat completions shape.

The last user message is the question, earlier user and assistant messages the
conversation (a follow-up is rewritten to stand alone); system messages are ignored
(the server's prompt is versioned and quotes passages as data). The answer's checked
citations travel in the text (``[n]``) and as structured fields: ``citations`` and
``hsearch`` (the whole ``/v1/answer`` response) on the completion, and on the last chunk
of a stream.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from hsearch.compositions.answers.models import (
    Answer,
    AnswerEvent,
    AnswerRequest,
    Delta,
    Failed,
    Finished,
    Speaker,
    Turn,
)
from hsearch.errors import InvalidRequestError
from hsearch.types import SearchMode
from hsearch_api.deps import AnswerServiceDep, Caller, SearchCallerDep
from hsearch_api.routers.answers import answer_response
from hsearch_api.schemas.chat import ChatCompletionRequest
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses

router = APIRouter(prefix="/v1", tags=["answers"], responses=COMMON_ERRORS)


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        **error_responses(413),
        200: {
            "description": "A chat completion, or its chunks as server-sent events "
            "(`stream: true`).",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/event-stream": {
                    "schema": {
                        "description": "One chunk: `data` is a chat.completion.chunk as "
                        "JSON, or `[DONE]`.",
                        "type": "object",
                        "properties": {"data": {"type": "string"}},
                        "required": ["data"],
                    }
                },
            },
        },
    },
)
async def chat_completions(
    body: ChatCompletionRequest, caller: SearchCallerDep, service: AnswerServiceDep
) -> Any:
    """OpenAI-compatible chat completions over the tenant's documents, with citations."""
    request = _answer_request(body, caller)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if not body.stream:
        answer = await service.answer(request)
        return _completion(answer, completion_id=completion_id, created=created)
    events = service.events(request)
    try:
        first = await anext(events)
    except BaseException:
        await events.aclose()
        raise
    return StreamingResponse(
        _chunks(first, events, completion_id=completion_id, created=created, model=service.model),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


def _answer_request(body: ChatCompletionRequest, caller: Caller) -> AnswerRequest:
    turns = [m for m in body.messages if m.role in ("user", "assistant") and m.text().strip()]
    if not turns or turns[-1].role != "user":
        raise InvalidRequestError("messages: the last user or assistant message must be the user's")
    options = body.hsearch
    if caller.max_top_k is not None and options.passages > caller.max_top_k:
        msg = f"hsearch.passages: this search token allows at most {caller.max_top_k}"
        raise InvalidRequestError(msg)
    return AnswerRequest(
        tenant_id=caller.tenant_id,
        required_filter=caller.restriction,
        query=turns[-1].text().strip(),
        passages=options.passages,
        filter=options.filter,
        mode=SearchMode(options.mode),
        messages=tuple(Turn(Speaker(t.role), t.text()) for t in turns[:-1]),
        max_tokens=body.max_completion_tokens or body.max_tokens,
    )


def _content(answer: Answer) -> str:
    """The message a chat client shows: the answer, or why there is none and what was
    found."""
    if answer.answer is not None:
        return answer.answer
    found = "; ".join(f"[{p.number}] {p.title or p.external_id}" for p in answer.passages)
    return f"No answer could be written ({'; '.join(answer.degraded)}). Passages found: {found}"


def _usage(answer: Answer) -> dict[str, int]:
    prompt = answer.tokens.prompt or 0
    completion = answer.tokens.completion or 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _structured(answer: Answer) -> dict[str, Any]:
    full = answer_response(answer).model_dump()
    return {"citations": full["citations"], "hsearch": full}


def _completion(answer: Answer, *, completion_id: str, created: int) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": answer.model or "none",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": _content(answer)},
                "finish_reason": "stop",
            }
        ],
        "usage": _usage(answer),
        **_structured(answer),
    }


async def _chunks(
    first: AnswerEvent,
    rest: AsyncIterator[AnswerEvent],
    *,
    completion_id: str,
    created: int,
    model: str | None,
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model or "none",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"

    state = {"wrote": False}

    def encode(event: AnswerEvent) -> str | None:
        if isinstance(event, Delta):
            state["wrote"] = True
            return chunk({"content": event.text})
        if isinstance(event, Failed):
            error = {"message": event.detail, "type": event.code, "code": event.code}
            return f"data: {json.dumps({'error': error})}\n\n"
        if isinstance(event, Finished):
            answer = event.answer
            if answer.answer is not None and state["wrote"]:
                tail: dict[str, Any] = {}
            elif state["wrote"]:
                tail = {"content": "\n\n" + _content(answer)}
            else:
                tail = {"content": _content(answer)}
            return chunk(tail, "stop", usage=_usage(answer), **_structured(answer))
        return None  # the passages retrieved, a sentence checked: in the last chunk

    async with contextlib.aclosing(rest) as events:  # type: ignore[type-var]  # an async generator
        yield chunk({"role": "assistant", "content": ""})
        encoded = encode(first)
        if encoded is not None:
            yield encoded
        async for event in events:
            encoded = encode(event)
            if encoded is not None:
                yield encoded
    yield "data: [DONE]\n\n"
