"""Model calls paid for from a lazy search's budget (:mod:`.budget`).

A call is reserved at the most it can cost (its prompt's tokens, estimated high, plus
the tokens it may write) before it is made, and not made when that does not fit; it is
settled at what the endpoint counted. A call that fails or times out costs what was
reserved (the endpoint may have read the prompt) and gives ``None``: the caller goes
on without it.
"""

from __future__ import annotations

import contextlib
import logging

from hsearch.compositions.answers.packing import estimate_tokens
from hsearch.compositions.answers.prompts import prompt
from hsearch.compositions.lazy.budget import LazySpend
from hsearch.errors import ModelError
from hsearch.llm.protocol import LLM, ChatMessage, Role, Usage

__all__ = ["ModelCalls"]

logger = logging.getLogger(__name__)


class ModelCalls:
    """One lazy search's model calls (module docstring)."""

    def __init__(self, llm: LLM, spend: LazySpend, *, timeout_s: float) -> None:
        self._llm = llm
        self._spend = spend
        self._timeout_s = timeout_s

    def affordable(self, name: str, *, max_tokens: int, **fields: str) -> bool:
        return self._spend.can_call(self._cost(self._messages(name, fields), max_tokens))

    async def complete(self, name: str, *, max_tokens: int, **fields: str) -> str | None:
        """The model's reply to prompt ``name`` with ``fields`` filled in; ``None`` when
        the budget cannot pay for it or the call fails."""
        messages = self._messages(name, fields)
        cost = self._cost(messages, max_tokens)
        if not self._spend.reserve_call(cost):
            return None
        remaining = self._spend.deadline.remaining_s()
        written = ""
        usage: int | None = None
        try:
            async with contextlib.aclosing(
                self._llm.stream(
                    messages,
                    max_tokens=max_tokens,
                    temperature=0.0,
                    timeout_s=max(0.1, min(self._timeout_s, remaining)),
                    first_token_timeout_s=max(0.1, min(self._timeout_s, remaining)),
                )
            ) as items:
                async for item in items:
                    if isinstance(item, Usage):
                        if item.prompt_tokens is not None or item.completion_tokens is not None:
                            usage = (item.prompt_tokens or 0) + (item.completion_tokens or 0)
                    else:
                        written += item
        except Exception as exc:  # a failed call only goes without its reply
            error = exc.message if isinstance(exc, ModelError) else type(exc).__name__
            logger.info("lazy.%s.failed error=%s", name, error)
            self._spend.settle_call(cost, None)
            return None
        self._spend.settle_call(cost, usage)
        return written

    @staticmethod
    def _messages(name: str, fields: dict[str, str]) -> list[ChatMessage]:
        chosen = prompt(name, 1, "en")
        user = chosen.user
        for key, value in fields.items():
            user = user.replace("{" + key + "}", value)
        return [ChatMessage(Role.SYSTEM, chosen.system), ChatMessage(Role.USER, user)]

    @staticmethod
    def _cost(messages: list[ChatMessage], max_tokens: int) -> int:
        # A few tokens a message for the chat template's markup, as the estimate errs high.
        return sum(estimate_tokens(m.content) + 8 for m in messages) + max_tokens
