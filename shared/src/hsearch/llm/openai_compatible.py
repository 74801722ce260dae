"""Any OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp's server, a
hosted API), through the ``openai`` client: the product's only import of it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import openai

from hsearch.config import LlmSettings
from hsearch.errors import ConfigurationError, ModelError, ModelTimeoutError
from hsearch.llm.protocol import ChatMessage, Usage

__all__ = ["OpenAICompatibleLLM"]


class OpenAICompatibleLLM:
    """Streams chat completions from ``settings.base_url``. A request that fails before
    its first token is retried (``max_retries``) by the client; one that breaks off
    mid-stream is not (the caller has shown part of it)."""

    def __init__(self, settings: LlmSettings, *, base_url: str | None = None) -> None:
        url = base_url or settings.base_url
        if not url:
            raise ConfigurationError("llm.base_url: no model endpoint is configured")
        self._settings = settings
        key = settings.api_key.get_secret_value() if settings.api_key else "unused"
        self._client = openai.AsyncOpenAI(
            base_url=url,
            api_key=key,
            max_retries=settings.max_retries,
            timeout=openai.Timeout(settings.timeout_s, connect=settings.connect_timeout_s),
        )
        self._url = url

    @property
    def model(self) -> str:
        return self._settings.model

    @property
    def settings(self) -> LlmSettings:
        return self._settings

    @property
    def base_url(self) -> str:
        return self._url

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        first_token_timeout_s: float,
    ) -> AsyncGenerator[str | Usage, None]:
        started = time.monotonic()
        deadline = started + timeout_s
        first_deadline = min(deadline, started + first_token_timeout_s)
        response = await self._open(
            messages,
            max_tokens=max_tokens,
            temperature=temperature,
            timeout_s=timeout_s,
            until=first_deadline,
        )
        try:
            async for item in self._items(response, first=first_deadline, last=deadline):
                yield item
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                await close()

    async def _open(
        self,
        messages: Sequence[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        timeout_s: float,
        until: float,
    ) -> Any:
        """The streamed response, once the endpoint has accepted the request."""
        # The client's parameter is a union of TypedDicts; ours are plain role/content.
        payload: Any = [{"role": m.role.value, "content": m.content} for m in messages]
        try:
            return await asyncio.wait_for(
                self._client.chat.completions.create(
                    model=self.model,
                    messages=payload,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    stream=True,
                    stream_options={"include_usage": True},
                    timeout=timeout_s,
                ),
                timeout=max(until - time.monotonic(), 0.001),
            )
        except TimeoutError as exc:
            raise ModelTimeoutError("no answer from the model in time") from exc
        except openai.APITimeoutError as exc:
            raise ModelTimeoutError(f"the model timed out ({exc})") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"the model failed: {_describe(exc)}") from exc

    async def _items(
        self, response: Any, *, first: float, last: float
    ) -> AsyncGenerator[str | Usage, None]:
        """The deltas and usage of ``response``: its first delta by ``first``, its end
        by ``last``."""
        iterator = response.__aiter__()
        written = False
        while True:
            limit = last if written else first
            try:
                chunk = await asyncio.wait_for(
                    iterator.__anext__(), timeout=max(limit - time.monotonic(), 0.001)
                )
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                what = "the end of its answer" if written else "its first token"
                raise ModelTimeoutError(f"the model did not send {what} in time") from exc
            except openai.OpenAIError as exc:
                raise ModelError(f"the model broke off: {_describe(exc)}") from exc
            except (OSError, RuntimeError, ValueError) as exc:  # the transport, mid-stream
                raise ModelError(f"the model broke off: {type(exc).__name__}: {exc}") from exc
            usage = getattr(chunk, "usage", None)
            if usage is not None:
                yield Usage(
                    prompt_tokens=getattr(usage, "prompt_tokens", None),
                    completion_tokens=getattr(usage, "completion_tokens", None),
                )
            for choice in getattr(chunk, "choices", None) or ():
                delta = getattr(getattr(choice, "delta", None), "content", None)
                if delta:
                    written = True
                    yield str(delta)

    async def ping(self, *, timeout_s: float) -> None:
        """Whether the endpoint answers (readiness). A connection that breaks is tried
        once more: after the server restarted, the pool may hand out a kept-alive
        connection the old server closed, and the next one is new. A timeout is not
        tried again (the probe's time is spent)."""
        for attempt in (1, 2):
            try:
                await self._client.models.list(timeout=timeout_s)
            except openai.OpenAIError as exc:
                broken = isinstance(exc, openai.APIConnectionError) and not isinstance(
                    exc, openai.APITimeoutError
                )
                if not (broken and attempt == 1):
                    msg = f"the model's endpoint does not answer: {_describe(exc)}"
                    raise ModelError(msg) from exc
            else:
                return

    async def aclose(self) -> None:
        await self._client.close()


def _describe(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__} {status}: {text}" if status else f"{type(exc).__name__}: {text}"
