"""``POST /v1/chat/completions``: OpenAI's chat completions shape over the answers path,
so OpenAI SDKs and chat front ends can ask a tenant's documents."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt


class ChatMessageWrite(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: Literal["system", "user", "assistant", "developer", "tool"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        """The message's text (the text parts of a list of parts)."""
        if isinstance(self.content, str):
            return self.content
        if not self.content:
            return ""
        return "".join(str(p.get("text", "")) for p in self.content if p.get("type") == "text")


class RetrievalOptions(BaseModel):
    """hsearch's own options, sent as ``hsearch`` (``extra_body`` in OpenAI's SDKs)."""

    model_config = ConfigDict(extra="forbid")
    passages: StrictInt = Field(default=5, ge=1, le=50)
    filter: dict[str, Any] | None = None
    mode: Literal["hybrid", "semantic", "keyword"] = "hybrid"


class ChatCompletionRequest(BaseModel):
    """OpenAI's fields that apply here; the others an SDK sends (``top_p``, ``n``, ...)
    are accepted and have no effect (docs/answers.md, Chat clients)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)
    model: str | None = Field(
        default=None, description="Ignored: the server's model answers (named in the response)."
    )
    messages: list[ChatMessageWrite] = Field(min_length=1, max_length=41)
    stream: StrictBool = False
    max_tokens: StrictInt | None = Field(default=None, ge=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1)
    hsearch: RetrievalOptions = Field(default_factory=RetrievalOptions)
