"""Model calls paid for from a lazy search's budget (:mod:`.budget`).

A call is reserved at the most it can cost (its prompt's tokens, estimated high, plus
the tokens it may write) before it is made, and not made when that does not fit; it is
settled at what the endpoint counted. A call that fails or times out costs what was
reserved (the endpoint may have read the prompt) and gives ``None``: the caller goes
on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from hsearch.compositions.answers.prompts import helper_messages, prompt_cost
from hsearch.compositions.lazy.budget import LazySpend, usage_tokens
from hsearch.errors import ModelError
from hsearch.llm.protocol import LLM, ChatMessage, Usage, whole_reply

__all__ = ["ModelCalls"]

logger = logging.getLogger(__name__)


class ModelCalls:
    """One lazy search's model calls (module docstring)."""

    def __init__(
        self,
        llm: LLM,
        spend: LazySpend,
        *,
        timeout_s: float,
        record: Callable[[Usage | None], None] | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        """``record``: told of each call made (its usage; ``None`` when it failed);
        ``slots``: a call takes one (none free: no call)."""
        self._llm = llm
        self._spend = spend
        self._timeout_s = timeout_s
        self._record = record
        self._slots = slots

    async def complete(self, name: str, *, max_tokens: int, **fields: str) -> str | None:
        """The model's reply to prompt ``name`` with ``fields`` filled in; ``None`` when
        the budget cannot pay for it, no generation slot is free, or the call fails."""
        messages = helper_messages(name, fields)
        cost = prompt_cost(messages) + max_tokens
        if self._slots is not None and self._slots.locked():
            return None
        if not self._spend.reserve_call(cost):
            return None
        if self._slots is None:
            return await self._call(name, messages, cost, max_tokens)
        async with self._slots:
            return await self._call(name, messages, cost, max_tokens)

    async def _call(
        self, name: str, messages: list[ChatMessage], cost: int, max_tokens: int
    ) -> str | None:
        remaining = max(0.1, self._spend.deadline.remaining_s())
        try:
            written, usage = await whole_reply(
                self._llm,
                messages,
                max_tokens=max_tokens,
                timeout_s=min(self._timeout_s, remaining),
                first_token_timeout_s=min(self._timeout_s, remaining),
            )
        except Exception as exc:  # a failed call only goes without its reply
            error = exc.message if isinstance(exc, ModelError) else type(exc).__name__
            logger.info("lazy.%s.failed error=%s", name, error)
            self._spend.settle_call(cost, None)
            if self._record is not None:
                self._record(None)
            return None
        self._spend.settle_call(cost, usage_tokens(usage))
        if self._record is not None:
            self._record(usage)
        return written
