"""What a lazy search leaves for the next turn of the conversation (as DRIFT search
does): its relevant chunks, with their texts and scores, and every chunk it tested.

A follow-up question names the turn it follows (``follow_up``: the ``session`` of the
previous answer's report); its search then starts with the previous relevant chunks in
its queue (tested again against the new question, without reading the store) and does
not test again a chunk the previous turn reached by deepening and found irrelevant,
unless another relevant chunk than the one that led there then leads to it (the new
question's own candidates are always tested).

Kept in the search cache (Redis, or in-process) under the tenant and its data version,
for ``ttl_s``: a key of another tenant never finds it, and after any write of the
tenant's data (a document changed or deleted, a purge) it is no longer found, so a
follow-up never reuses what is no longer there. The request's filter is part of it: a
follow-up with another filter starts afresh.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from hsearch.cache.generations import GenerationReader
from hsearch.cache.guard import GuardedCache
from hsearch.cache.keys import cache_key, digest
from hsearch.compositions.lazy.models import Candidate, Gathered, Origin
from hsearch.errors import BackendError

__all__ = ["Remembered", "TurnMemory"]

logger = logging.getLogger(__name__)

LAZY_KIND = "lazy"
MAX_VISITED = 5000


@dataclass(frozen=True, slots=True)
class RememberedChunk:
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    char_start: int | None
    char_end: int | None
    score: float


@dataclass(frozen=True, slots=True)
class Remembered:
    """One turn's search, as the next one reads it."""

    scope: str
    """The request's filter (a search token's included), as a digest."""
    relevant: tuple[RememberedChunk, ...]
    visited: tuple[tuple[str, str | None], ...]
    """Each chunk it tested, with the chunk that led to it."""

    def candidates(self) -> list[Candidate]:
        """The relevant chunks, as candidates of the new turn (texts known)."""
        return [
            Candidate(
                chunk_id=c.chunk_id,
                origin=Origin.MEMORY,
                prior=min(1.0, max(0.0, c.score)),
                document_id=c.document_id,
                external_id=c.external_id,
                title=c.title,
                text=c.text,
                char_start=c.char_start,
                char_end=c.char_end,
            )
            for c in self.relevant
        ]


_codec: TypeAdapter[Remembered] = TypeAdapter(Remembered)


class TurnMemory:
    """Lazy searches' turns in the cache (module docstring)."""

    def __init__(
        self, store: GuardedCache, *, generations: GenerationReader, namespace: str, ttl_s: float
    ) -> None:
        self._store = store
        self._generations = generations
        self._namespace = namespace
        self._ttl_s = ttl_s

    @staticmethod
    def scope(filter: object) -> str:
        return digest(filter)

    async def recall(self, tenant_id: str, session: str, *, scope: str) -> Remembered | None:
        """The turn ``session`` of the tenant, on its current data and under ``scope``;
        ``None`` when there is none (another tenant's, expired, the data changed since,
        another filter) or the cache is away."""
        key = await self._key(tenant_id, session)
        if key is None:
            return None
        try:
            raw = await self._store.get(key)
            found = None if raw is None else _codec.validate_json(raw)
        except (BackendError, ValidationError) as exc:
            logger.info("lazy.memory.unreadable error=%s", type(exc).__name__)
            return None
        if found is None or found.scope != scope:
            return None
        return found

    async def keep(
        self,
        tenant_id: str,
        gathered: Gathered,
        *,
        scope: str,
        visited: tuple[tuple[str, str | None], ...],
        before: Remembered | None,
    ) -> str | None:
        """Keep this turn (with what the turn before it kept); its session, or ``None``
        when it could not be kept."""
        session = secrets.token_urlsafe(12)
        key = await self._key(tenant_id, session)
        if key is None:
            return None
        relevant = {
            candidate.chunk_id: RememberedChunk(
                chunk_id=candidate.chunk_id,
                document_id=candidate.document_id,
                external_id=candidate.external_id,
                title=candidate.title,
                text=candidate.text or "",
                char_start=candidate.char_start,
                char_end=candidate.char_end,
                score=judgement.score,
            )
            for candidate, judgement, _ in gathered.chunks
        }
        for chunk in before.relevant if before is not None else ():
            relevant.setdefault(chunk.chunk_id, chunk)
        seen = dict((*(before.visited if before else ()), *visited))
        value = Remembered(
            scope, tuple(relevant.values()), tuple(list(seen.items())[-MAX_VISITED:])
        )
        try:
            await self._store.set(key, _codec.dump_json(value), ttl_s=self._ttl_s)
        except BackendError as exc:
            logger.info("lazy.memory.unwritable error=%s", type(exc).__name__)
            return None
        return session

    async def _key(self, tenant_id: str, session: str) -> str | None:
        try:
            generation, _ = await self._generations.read(tenant_id)
        except BackendError:
            return None
        return cache_key(self._namespace, LAZY_KIND, tenant_id, generation, session)
