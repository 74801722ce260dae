"""The model endpoint's readiness ping: a connection broken once (a kept-alive
connection the restarted server closed) is tried again; a timeout or a refusal is not."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import openai
import pytest

from hsearch.config import LlmSettings
from hsearch.errors import ModelError
from hsearch.llm.openai_compatible import OpenAICompatibleLLM

URL = "http://127.0.0.1:9/v1"
REQUEST = httpx.Request("GET", URL + "/models")


class Models:
    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def list(self, **_: Any) -> list[str]:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return ["smollm2"]


def llm_with(models: Models) -> OpenAICompatibleLLM:
    llm = OpenAICompatibleLLM(LlmSettings(base_url=URL, model="smollm2"))
    llm._client.models = models  # type: ignore[misc,assignment]
    return llm


async def test_a_connection_broken_once_is_tried_again() -> None:
    models = Models(openai.APIConnectionError(request=REQUEST))
    await llm_with(models).ping(timeout_s=1)
    assert models.calls == 2


async def test_a_connection_broken_twice_is_a_model_error() -> None:
    broken = [openai.APIConnectionError(request=REQUEST) for _ in range(2)]
    models = Models(*broken)
    with pytest.raises(ModelError, match="does not answer"):
        await llm_with(models).ping(timeout_s=1)
    assert models.calls == 2


@pytest.mark.parametrize(
    "failure",
    [
        openai.APITimeoutError(request=REQUEST),
        openai.APIStatusError(
            "unavailable", response=httpx.Response(503, request=REQUEST), body=None
        ),
    ],
)
async def test_a_timeout_or_a_refusal_is_not_tried_again(failure: Exception) -> None:
    models = Models(failure)
    with pytest.raises(ModelError):
        await llm_with(models).ping(timeout_s=1)
    assert models.calls == 1
