"""Answers cached like search results: an identical question on unchanged data, to the
same model with the same prompt, is answered from the cache.

Key: ``hsearch:v1:<namespace>:answer:<tenant>:<generation>:<digest>``; the digest covers
the request (question, earlier turns, retrieval fields, a search token's filter, the
limits), the model's name, the prompt version and the server's identity (the encoder,
the search and model settings, the citation rule). Every committed write of the
tenant's data changes its generation, so the next question misses
(:mod:`hsearch.cache.generations`); stale entries lapse after the TTL. Only whole
answers are kept: none that degraded (a model down, a search leg failed).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pydantic import TypeAdapter, ValidationError

from hsearch.cache.generations import GenerationReader
from hsearch.cache.guard import GuardedCache
from hsearch.cache.keys import cache_key, digest
from hsearch.compositions.answers.models import Answer, AnswerRequest
from hsearch.errors import BackendError, CacheUnavailableError

__all__ = ["ANSWER_KIND", "AnswerCache"]

logger = logging.getLogger(__name__)

ANSWER_KIND = "answer"
answer_codec: TypeAdapter[Answer] = TypeAdapter(Answer)


class AnswerCache:
    def __init__(
        self,
        store: GuardedCache,
        *,
        generations: GenerationReader,
        namespace: str,
        ttl_s: float,
        identity: object,
        settle_s: float = 0.0,
    ) -> None:
        self._store = store
        self._generations = generations
        self._namespace = namespace
        self._ttl_s = ttl_s
        self._settle_s = settle_s
        self._identity = digest(identity)
        self._settled: dict[str, bool] = {}

    async def key(self, request: AnswerRequest, *, model: str, prompt_version: int) -> str | None:
        """Where ``request``'s answer is kept on the tenant's current data; ``None``
        when the data version cannot be read (nothing is then cached)."""
        try:
            generation, age = await self._generations.read(request.tenant_id)
        except BackendError as exc:
            logger.info("answer.cache.version_unavailable error=%s", type(exc).__name__)
            return None
        key = cache_key(
            self._namespace,
            ANSWER_KIND,
            request.tenant_id,
            generation,
            digest(self._identity, request, model, prompt_version),
        )
        # What was answered on data younger than settle_s may miss writes the store does
        # not show yet (as for search results): it is served, not kept.
        if len(self._settled) > 10_000:
            self._settled.clear()
        self._settled[key] = age >= self._settle_s
        return key

    async def get(self, key: str) -> Answer | None:
        try:
            raw = await self._store.get(key)
        except CacheUnavailableError:
            return None
        if raw is None:
            return None
        try:
            return replace(answer_codec.validate_json(raw), cached=True)
        except ValidationError:  # another version's value: answered afresh and replaced
            return None

    async def put(self, key: str, answer: Answer) -> None:
        if answer.answer is None or answer.degraded or not self._settled.pop(key, False):
            return
        await self._store.set(key, answer_codec.dump_json(answer), ttl_s=self._ttl_s)
