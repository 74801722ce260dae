"""The result cache: an identical search on unchanged data is answered from the cache.

Key
---
``hsearch:v1:<namespace>:result:<tenant>:<generation>.<tenant created µs>:<digest>``.
The digest covers the plan (:class:`~hsearch.search.planner.SearchPlan`: query, mode,
legs and their roles, filter (any mandatory filter a credential adds is part of it),
facets, page, sort, fusion method and weights, rerank, snippets; everything that shapes the
response except the time budget) and the server's identity: the encoder fingerprint and
the search and rerank settings. The tenant's ``data_generation`` (tenants table) is part of the key,
with the tenant's creation time (a tenant created again, or a database rebuilt, starts
its generations again at 0 and must not meet the old entries):
every committed ingest, update, metadata patch, delete or reindex bumps it once the
change is visible to searches, so the next search misses and computes afresh; stale
entries are never read again and lapse after ``cache.result_ttl_s``.

Reading the generation is a primary-key read of the metadata database per search
(``cache.generation_ttl_s`` > 0 reuses it in-process for that long, trading that much
staleness for the read). While the database is down, the generation last read within
``database.stale_s`` is used (nothing can change it meanwhile); with none, the search
is computed and not cached. A result is stored only if no leg failed (a degraded answer is
never served twice) and the generation is at least ``cache.settle_s`` old as this
process first saw it (for stores whose searches may lag writes).

Single flight
-------------
An identical miss that another request (of any API process sharing the Redis) is
computing waits for that result, polling, for at most ``cache.lock_wait_s``, then
computes itself. The lock is ``SET NX PX`` with ``cache.lock_ttl_s``, released once the
result is stored, so a holder that dies only delays others by the wait.

Stable pages
------------
A response whose window holds more hits than its page carries ``next_cursor``. With the
caches on, the whole window (every hit with its fields, the totals and facets; the
texts of the page served, a later page reading its own) is kept as a snapshot
(:class:`PageSnapshots`, ``cache.snapshot_ttl_s``, at most
``cache.snapshot_max_bytes``) and the cursor names it: the next pages are cut from that
same fused list, so they neither repeat nor skip hits whatever was written meanwhile.
A cursor whose snapshot is gone (expired, too large to keep, the store away) pages the
live list from its offset instead. The snapshot belongs to the tenant (its key holds it)
and to the search (the request must be the same apart from its page).

With the store away, searches are computed and not cached (:mod:`hsearch.cache.guard`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from pydantic import TypeAdapter, ValidationError

from hsearch.cache.generations import DataVersion, GenerationReader
from hsearch.cache.guard import CacheCounters, CacheKind, CacheOutcome, GuardedCache
from hsearch.cache.keys import cache_key, digest
from hsearch.cache.protocol import CacheBackend
from hsearch.config import CacheSettings
from hsearch.errors import BackendError, CacheUnavailableError, InvalidRequestError
from hsearch.search.models import SearchResult
from hsearch.search.planner import SearchPlan
from hsearch.search.timings import Stage, StageClock

__all__ = [
    "Cursor",
    "DataVersion",
    "GenerationReader",
    "PageSnapshots",
    "ResultCache",
    "result_codec",
]

logger = logging.getLogger(__name__)

result_codec: TypeAdapter[SearchResult] = TypeAdapter(SearchResult)
"""How results are stored: JSON, validated back into a :class:`SearchResult`
(never pickle: whoever can write to Redis must not be able to run code)."""


class ResultCache:
    """Serves searches from ``store`` (see the module docstring)."""

    def __init__(
        self,
        store: GuardedCache,
        *,
        generations: GenerationReader,
        settings: CacheSettings,
        identity: object,
        counters: CacheCounters | None = None,
    ) -> None:
        self._store = store
        self._generations = generations
        self._settings = settings
        self._identity = digest(identity)
        self._counters = counters

    async def serve(
        self,
        plan: SearchPlan,
        *,
        clock: StageClock,
        compute: Callable[[DataVersion | None], Awaitable[SearchResult]],
    ) -> SearchResult:
        """The cached result of ``plan`` (``cached`` true, this request's timings), or
        that of ``compute`` (given the tenant's data version, ``None`` when it could
        not be read), stored for the searches that follow."""
        try:
            generation, age = await self._generations.read(plan.tenant_id)
        except BackendError as exc:
            logger.warning("search.cache.generation_unavailable error=%s", type(exc).__name__)
            return await self._bypass(clock, compute)
        key = self.key(plan, generation)
        try:
            raw = await self._store.get(key)
        except CacheUnavailableError:
            return await self._bypass(clock, compute, DataVersion(generation, age))
        if raw is not None and (hit := self._decode(raw)) is not None:
            return self._hit(hit, plan=plan, clock=clock)
        lock = f"{key}:lock"
        grant = await self._store.acquire(lock, ttl_s=self._settings.lock_ttl_s)
        if grant.held_elsewhere:
            waited = await self._wait(key)
            if waited is not None:
                return self._hit(waited, plan=plan, clock=clock)
        self._count(CacheOutcome.MISS)
        clock.lap(Stage.CACHE)
        try:
            result = await compute(DataVersion(generation, age))
            if not result.degraded and age >= self._settings.settle_s:
                await self._store.set(
                    key,
                    result_codec.dump_json(result),
                    ttl_s=self._settings.result_ttl_s,
                )
        finally:
            if grant.token is not None:
                await self._store.release(lock, grant.token)
        return result

    def key(self, plan: SearchPlan, generation: str) -> str:
        """Where the result of ``plan`` on ``generation`` of its tenant's data is kept."""
        # The budget only decides whether legs answer in time; a degraded answer is
        # never stored, so equal plans with other budgets share their result.
        shape = replace(plan, budget_s=0.0)
        return cache_key(
            self._settings.namespace,
            "result",
            plan.tenant_id,
            generation,
            digest(self._identity, shape),
        )

    async def _wait(self, key: str) -> SearchResult | None:
        """Poll for the result another request is computing, until ``lock_wait_s``."""
        deadline = time.monotonic() + self._settings.lock_wait_s
        pause = 0.005
        while time.monotonic() < deadline:
            await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.05)
            try:
                raw = await self._store.get(key)
            except CacheUnavailableError:
                return None
            if raw is not None:
                return self._decode(raw)
        logger.info("search.cache.wait_expired: computing after %.1f s", self._settings.lock_wait_s)
        return None

    async def _bypass(
        self,
        clock: StageClock,
        compute: Callable[[DataVersion | None], Awaitable[SearchResult]],
        version: DataVersion | None = None,
    ) -> SearchResult:
        self._count(CacheOutcome.ERROR)
        clock.lap(Stage.CACHE)
        return await compute(version)

    def _hit(self, cached: SearchResult, *, plan: SearchPlan, clock: StageClock) -> SearchResult:
        self._count(CacheOutcome.HIT)
        clock.lap(Stage.CACHE)
        timings = clock.timings()
        return replace(
            cached,
            cached=True,
            embedding_cached=False,
            timings=timings,
            took_ms=timings.total_ms,
            rerank_ms=0.0 if plan.rerank else None,
        )

    def _decode(self, raw: bytes) -> SearchResult | None:
        try:
            return result_codec.validate_json(raw)
        except ValidationError as exc:  # another version's value: recomputed and replaced
            logger.warning("search.cache.undecodable errors=%d", exc.error_count())
            return None

    def _count(self, outcome: CacheOutcome) -> None:
        if self._counters is not None:
            self._counters.record(CacheKind.RESULT, outcome)


_SNAPSHOT_ID = re.compile(r"[0-9a-f]{32}")
_SEARCH_ID = re.compile(r"[0-9a-f]{16}")
_BAD_CURSOR = "cursor: not a cursor this server issued (send a response's next_cursor as it is)"
_OTHER_SEARCH = (
    "cursor: it belongs to another search; send it with the same query, "
    "filter and options as the search that returned it"
)


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a next page starts: an offset in the fused list, and the snapshot of that
    list (``None``: none was kept, the page is cut from the live list)."""

    offset: int
    snapshot: str | None = None
    search: str | None = None
    """The search it belongs to (:func:`search_id`; ``None`` in cursors of releases
    that did not record it): checked whether or not the snapshot is still kept."""

    def encode(self) -> str:
        data = {"o": self.offset, "s": self.snapshot, "h": self.search}
        raw = json.dumps(data, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    def check(self, plan: SearchPlan) -> None:
        """Raise InvalidRequestError (422) naming ``cursor`` if it was issued for
        another search than ``plan``'s (another query, filter, option or tenant)."""
        if self.search is not None and self.search != search_id(plan):
            raise InvalidRequestError(_OTHER_SEARCH)

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """Raises InvalidRequestError (422) naming ``cursor`` unless ``text`` is one."""
        if len(text) > 256:
            raise InvalidRequestError(_BAD_CURSOR)
        try:
            data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
            offset, snapshot, search = data["o"], data["s"], data.get("h")
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
            raise InvalidRequestError(_BAD_CURSOR) from None
        valid_offset = isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
        valid_snapshot = snapshot is None or (
            isinstance(snapshot, str) and _SNAPSHOT_ID.fullmatch(snapshot) is not None
        )
        valid_search = search is None or (
            isinstance(search, str) and _SEARCH_ID.fullmatch(search) is not None
        )
        if not (valid_offset and valid_snapshot and valid_search):
            raise InvalidRequestError(_BAD_CURSOR)
        return cls(offset, snapshot, search)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    shape: str
    """The digest of the search it belongs to, without its page."""
    result: SearchResult
    """Every hit of the window, from offset 0."""


_snapshot_codec: TypeAdapter[_Snapshot] = TypeAdapter(_Snapshot)


class PageSnapshots:
    """The fused lists behind cursors (see the module docstring, Stable pages)."""

    def __init__(
        self, store: GuardedCache, *, namespace: str, ttl_s: float, max_bytes: int
    ) -> None:
        self._store = store
        self._namespace = namespace
        self._ttl_s = ttl_s
        self._max_bytes = max_bytes

    async def save(self, plan: SearchPlan, window: SearchResult) -> str | None:
        """Keep ``window`` (every hit of it) for ``plan``'s next pages; its id, or
        ``None`` when it was not kept (too large, the store away)."""
        snapshot = secrets.token_hex(16)
        raw = _snapshot_codec.dump_json(_Snapshot(_shape(plan), window))
        if len(raw) > self._max_bytes:
            logger.info("search.snapshot.too_large bytes=%d", len(raw))
            return None
        await self._store.set(self._key(plan, snapshot), raw, ttl_s=self._ttl_s)
        return snapshot if self._store.available else None

    async def load(self, plan: SearchPlan, snapshot: str) -> SearchResult | None:
        """The window kept as ``snapshot`` for ``plan``'s search, or ``None`` if it is
        gone; raises InvalidRequestError if it belongs to another search."""
        try:
            raw = await self._store.get(self._key(plan, snapshot))
        except CacheUnavailableError:
            return None
        if raw is None:
            return None
        try:
            kept = _snapshot_codec.validate_json(raw)
        except ValidationError:
            return None
        if kept.shape != _shape(plan):
            raise InvalidRequestError(_OTHER_SEARCH)
        return kept.result

    def _key(self, plan: SearchPlan, snapshot: str) -> str:
        # Under the caller's tenant: another tenant's cursor finds nothing here.
        return cache_key(self._namespace, "snapshot", plan.tenant_id, snapshot)


def _shape(plan: SearchPlan) -> str:
    """What a snapshot's search is, whatever its page (a cursor may change ``top_k``)."""
    ranking = replace(plan.ranking, offset=0, top_k=1)
    return digest(replace(plan, ranking=ranking, budget_s=0.0))


def search_id(plan: SearchPlan) -> str:
    """A short id of ``plan``'s search, whatever its page, that a cursor carries: its
    tenant is part of it, so another tenant's cursor is refused as another search's."""
    return _shape(plan)[:16]


async def purge_tenant(store: CacheBackend, *, namespace: str, tenant_id: str) -> int:
    """Delete what the caches hold of ``tenant_id`` (its results, page snapshots and answers;
    query embeddings belong to no tenant); how many entries there were. Raises
    CacheUnavailableError when the store is away."""
    deleted = 0
    for kind in ("result", "snapshot", "answer"):
        deleted += await store.delete_prefix(cache_key(namespace, kind, tenant_id) + ":")
    return deleted
