"""What a lazy search leaves for the next turn of the conversation (as DRIFT search
does): its relevant chunks (ids, scores and what led to them; no text) and every chunk
it tested.

A follow-up question names the turn it follows (``follow_up``: the ``session`` of the
previous answer's report); its search then starts with the previous relevant chunks in
its queue (read again from the store under the request's filter, so a chunk deleted
since is never reused, and tested again against the new question) and does
not test again a chunk the previous turn reached by deepening and found irrelevant,
unless another relevant chunk than the one that led there then leads to it (the new
question's own candidates are always tested).

Kept in the search cache (Redis, or in-process) under the tenant and its data version
as the turn started, for ``ttl_s``: a key of another tenant never finds it, and after
any write of the tenant's data (a document changed or deleted, a purge; during the turn
too) it is no longer found. The request's filter is part of it: a
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
MAX_RELEVANT = 50


@dataclass(frozen=True, slots=True)
class RememberedChunk:
    chunk_id: str
    parent: str | None
    """The relevant chunk that led to it (``None``: the question's own candidate)."""
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
        """The relevant chunks, as candidates of the new turn: read again from the
        store (a chunk gone, or outside the filter, is left out then)."""
        return [
            Candidate(
                chunk_id=c.chunk_id,
                origin=Origin.MEMORY,
                prior=min(1.0, max(0.0, c.score)),
                parent=c.parent,
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

    async def version(self, tenant_id: str) -> str | None:
        """The tenant's data version, read once when a turn starts: the turn is recalled
        and kept under it, so a write during the turn makes what it keeps unreachable
        rather than filed under the data after the write."""
        try:
            generation, _ = await self._generations.read(tenant_id)
        except BackendError:
            return None
        return generation

    async def recall(
        self, tenant_id: str, session: str, *, version: str | None, scope: str
    ) -> Remembered | None:
        """The turn ``session`` of the tenant, at ``version`` and under ``scope``;
        ``None`` when there is none (another tenant's, expired, the data changed since,
        another filter) or the cache is away."""
        if version is None:
            return None
        try:
            raw = await self._store.get(self._key(tenant_id, version, session))
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
        version: str | None,
        scope: str,
        before: Remembered | None,
    ) -> str | None:
        """Keep this turn: its relevant chunks (at most :data:`MAX_RELEVANT`, best
        first) and what it and the turns before it tested; its session, or ``None``
        when it could not be kept."""
        if version is None:
            return None
        session = secrets.token_urlsafe(12)
        ranked = sorted(gathered.chunks, key=lambda found: -found[1].score)[:MAX_RELEVANT]
        relevant = tuple(
            RememberedChunk(candidate.chunk_id, candidate.parent, judgement.score)
            for candidate, judgement, _ in ranked
        )
        seen = dict((*(before.visited if before else ()), *gathered.visited))
        value = Remembered(scope, relevant, tuple(list(seen.items())[-MAX_VISITED:]))
        try:
            await self._store.set(
                self._key(tenant_id, version, session), _codec.dump_json(value), ttl_s=self._ttl_s
            )
        except BackendError as exc:
            logger.info("lazy.memory.unwritable error=%s", type(exc).__name__)
            return None
        return session

    def _key(self, tenant_id: str, version: str, session: str) -> str:
        return cache_key(self._namespace, LAZY_KIND, tenant_id, version, session)
