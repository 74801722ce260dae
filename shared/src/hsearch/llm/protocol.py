"""What answers need of a language model: a chat completion, streamed.

A model is an endpoint, never a library call in the API process: the real adapter is
:class:`~hsearch.llm.openai_compatible.OpenAICompatibleLLM`; tests use
:class:`~hsearch.llm.scripted.ScriptedLLM`. What a model writes is untrusted input:
the caller parses and checks it (citations, judgements) before a client sees it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

__all__ = ["LLM", "ChatMessage", "Role", "Usage", "whole_reply"]


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens the endpoint counted (``None`` where it did not say)."""

    prompt_tokens: int | None
    completion_tokens: int | None


class LLM(Protocol):
    @property
    def model(self) -> str:
        """The model's name, as the endpoint is asked for it."""
        ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        first_token_timeout_s: float,
    ) -> AsyncGenerator[str | Usage, None]:
        """The completion's text as it is written (deltas), then its :class:`Usage`
        when the endpoint reports one. Raises :class:`~hsearch.errors.ModelError`
        (:class:`~hsearch.errors.ModelTimeoutError` past ``first_token_timeout_s``
        before the first token, or ``timeout_s`` in all); closing the iterator cancels
        the request."""
        ...

    async def ping(self, *, timeout_s: float) -> None:
        """Return when the endpoint answers; raise :class:`~hsearch.errors.ModelError`
        when it does not (readiness)."""
        ...

    async def aclose(self) -> None: ...


async def whole_reply(
    llm: LLM,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    timeout_s: float,
    first_token_timeout_s: float,
    on_usage: Callable[[Usage], None] | None = None,
) -> tuple[str, Usage | None]:
    """The model's whole reply to ``messages`` at temperature 0, and its usage (told to
    ``on_usage`` as it arrives): for the short helper calls whose reply is read whole
    (a rewrite, an expansion, a judgement). Raises what :meth:`LLM.stream` raises."""
    written: list[str] = []
    usage: Usage | None = None
    async with contextlib.aclosing(
        llm.stream(
            messages,
            max_tokens=max_tokens,
            temperature=0.0,
            timeout_s=timeout_s,
            first_token_timeout_s=first_token_timeout_s,
        )
    ) as items:
        async for item in items:
            if isinstance(item, Usage):
                usage = item
                if on_usage is not None:
                    on_usage(item)
            else:
                written.append(item)
    return "".join(written), usage
