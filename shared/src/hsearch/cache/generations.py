"""A tenant's data version, as searches read it to key what they reuse.

The tenant's ``data_generation`` (tenants table) changes with every committed write of
its data; results, counts and page snapshots computed on one generation are reused only
on it (:mod:`hsearch.search.caching`). This reader is the query path's one read of the
metadata database: the search service reaches it through here, never through
SQLAlchemy, and sees its failures as :class:`~hsearch.errors.MetadataUnavailableError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio.to_thread
from cachetools import LRUCache

from hsearch.db.engine import DATABASE_ERROR, DATABASE_UNAVAILABLE, SessionFactory, transaction
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import MetadataUnavailableError

__all__ = ["DataVersion", "GenerationReader"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A tenant's data version as a search read it: ``generation`` (changed by every
    committed write of its data) and ``age_s``, how long this process has seen it (0
    the first time). What was computed on a version younger than ``cache.settle_s`` may
    miss writes Milvus does not show yet, and is not kept for other requests."""

    generation: str
    age_s: float


class GenerationReader:
    """Reads a tenant's ``data_generation``, optionally reusing it for ``ttl_s``, and
    remembers when this process first saw each tenant's current generation. While the
    database is down, the one read at most ``stale_s`` ago is used."""

    def __init__(
        self,
        sessions: SessionFactory,
        *,
        ttl_s: float = 0.0,
        stale_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._sessions = sessions
        self._ttl_s = ttl_s
        self._stale_s = stale_s
        self._clock = clock
        self._read_at: LRUCache[str, tuple[str, float]] = LRUCache(maxsize=100_000)
        self._first_seen: LRUCache[str, tuple[str, float]] = LRUCache(maxsize=100_000)

    async def read(self, tenant_id: str) -> tuple[str, float]:
        """The tenant's data version (its generation, qualified by the tenant's creation:
        :meth:`TenantRepository.data_version`) and how long ago this process first saw
        it (0 the first time: a process that just started cannot know when it changed).

        Raises:
            MetadataUnavailableError: the database failed and no generation of the
                tenant was read within ``stale_s`` (or failed otherwise).
        """
        now = self._clock()
        known = self._read_at.get(tenant_id)
        if known is not None and self._ttl_s > 0 and now - known[1] < self._ttl_s:
            generation = known[0]
        else:
            try:
                generation = await anyio.to_thread.run_sync(self._read, tenant_id)
            except DATABASE_UNAVAILABLE as exc:
                if known is None or now - known[1] >= self._stale_s:
                    msg = f"the tenant's data version could not be read ({type(exc).__name__})"
                    raise MetadataUnavailableError(msg) from exc
                logger.info(
                    "search.cache.generation_stale tenant=%s age_s=%.1f error=%s",
                    tenant_id,
                    now - known[1],
                    type(exc).__name__,
                )
                generation = known[0]
            else:
                self._read_at[tenant_id] = (generation, now)
        seen = self._first_seen.get(tenant_id)
        if seen is None or seen[0] != generation:
            seen = (generation, now)
            self._first_seen[tenant_id] = seen
        return generation, now - seen[1]

    def _read(self, tenant_id: str) -> str:
        try:
            with transaction(self._sessions) as session:
                return TenantRepository(session).data_version(tenant_id)
        except DATABASE_UNAVAILABLE:
            raise
        except DATABASE_ERROR as exc:
            msg = f"the tenant's data version could not be read ({type(exc).__name__})"
            raise MetadataUnavailableError(msg) from exc
