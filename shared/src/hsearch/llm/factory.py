"""The model answers are written with, from the settings."""

from __future__ import annotations

from hsearch.config import LlmSettings
from hsearch.llm.openai_compatible import OpenAICompatibleLLM
from hsearch.llm.protocol import LLM

__all__ = ["create_llm"]


def create_llm(settings: LlmSettings) -> LLM | None:
    """The configured endpoint's client; ``None`` when no endpoint is set (answers then
    return their passages with ``answer: null``)."""
    if not settings.base_url:
        return None
    return OpenAICompatibleLLM(settings)
