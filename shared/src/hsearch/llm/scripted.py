"""A scripted model for tests: it writes what it is told, in pieces, and can fail."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence

from hsearch.errors import ModelError
from hsearch.llm.protocol import ChatMessage, Usage

__all__ = ["ScriptedLLM"]


class ScriptedLLM:
    """Answers every request with ``reply(messages)`` (or a fixed text), split into
    deltas of ``chunk`` characters; ``fail_after`` deltas it raises ``ModelError``
    (a model that dies mid-stream); ``down`` fails before the first token."""

    def __init__(
        self,
        reply: str | Callable[[Sequence[ChatMessage]], str] = "",
        *,
        chunk: int = 7,
        fail_after: int | None = None,
        down: bool = False,
        delay_s: float = 0.0,
        model: str = "scripted",
    ) -> None:
        self._reply = reply
        self._chunk = chunk
        self.fail_after = fail_after
        self.down = down
        self.delay_s = delay_s
        self._model = model
        self.requests: list[list[ChatMessage]] = []
        self.cancelled = 0

    @property
    def model(self) -> str:
        return self._model

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        first_token_timeout_s: float,
    ) -> AsyncGenerator[str | Usage, None]:
        self.requests.append(list(messages))
        if self.down:
            raise ModelError("the scripted model is down")
        text = self._reply(messages) if callable(self._reply) else self._reply
        pieces = [text[i : i + self._chunk] for i in range(0, len(text), self._chunk)]
        try:
            for n, piece in enumerate(pieces):
                if self.fail_after is not None and n >= self.fail_after:
                    raise ModelError("the scripted model broke off")
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                yield piece
        except GeneratorExit:
            self.cancelled += 1
            raise
        prompt = sum(len(m.content) for m in messages) // 4
        yield Usage(prompt_tokens=prompt, completion_tokens=max(1, len(text) // 4))

    async def ping(self, *, timeout_s: float) -> None:
        if self.down:
            raise ModelError("the scripted model is down")

    async def aclose(self) -> None:
        """Nothing to release."""
