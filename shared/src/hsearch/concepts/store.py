"""Tenants' concept indexes in memory (:class:`~hsearch.concepts.index.ConceptIndex`):
built from the metadata database in the background, kept per data version.

As :mod:`hsearch.graph.store` keeps the document graph: a tenant's index is built on
first use, and again whenever the tenant's data version (``data_generation``, which
every write moves: an ingest, a delete, a reindex, a reconcile that repaired something)
is not the one it was built at; one build runs per tenant and version, however many
callers wait for it, in a worker thread; a caller that cannot wait (its deadline) gives
up waiting, not the build. While a newer version is being built, a caller past its
deadline is answered from the version before (logged); with none,
:class:`~hsearch.errors.ConceptsUnavailableError`. A build started later never loses to
an earlier one that finishes after it. Indexes are kept for ``cached_tenants`` tenants
per process (LRU); a purged tenant's is dropped (:meth:`ConceptStore.forget`).

A build's stage (``reading``, ``counting``, ``linking``, ``communities``) and the
fraction of it done are visible while it runs (:meth:`ConceptStore.status`, shown by
``GET /v1/stats``), as is the last build's failure.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import anyio.to_thread
from cachetools import LRUCache

from hsearch.cache.generations import GenerationReader
from hsearch.concepts.index import ConceptIndex, ConceptRow, IndexParams, Progress, build_index
from hsearch.db.engine import DATABASE_ERROR, DATABASE_UNAVAILABLE, SessionFactory
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.errors import ConceptsUnavailableError

__all__ = ["ConceptStatus", "ConceptStore", "ConceptsUnavailableError"]

logger = logging.getLogger(__name__)

Reader = Callable[[str, Progress], Sequence[ConceptRow]]
"""Reads a tenant's rows, telling ``progress`` how far it is."""


@dataclass(frozen=True, slots=True)
class ConceptStatus:
    """A tenant's Level 1 index in this process."""

    tenant_id: str
    state: str
    """``none`` (never built here), ``building`` (a build runs), ``ready`` (the index
    held is at the tenant's data version as last seen), ``stale`` (it is older)."""
    version: str | None = None
    """The version of the index held."""
    chunks: int = 0
    """Chunks with concepts."""
    concepts: int = 0
    """Concepts that are nodes of the graph."""
    links: int = 0
    """Co-occurrence links."""
    communities: dict[int, int] = field(default_factory=dict)
    """Communities per level."""
    build_s: float | None = None
    building: str | None = None
    """The version being built."""
    stage: str | None = None
    fraction: float | None = None
    error: str | None = None
    """Why the last build failed (until one succeeds)."""


@dataclass(slots=True)
class _Build:
    version: str
    stage: str = "queued"
    fraction: float = 0.0

    def report(self, stage: str, fraction: float) -> None:
        self.stage, self.fraction = stage, fraction


class ConceptStore:
    """The tenants' concept indexes of one process (module docstring)."""

    def __init__(
        self,
        sessions: SessionFactory,
        *,
        params: IndexParams | None = None,
        cached_tenants: int = 16,
        generations: GenerationReader | None = None,
        read: Reader | None = None,
    ) -> None:
        """``generations``: where :meth:`current` and :meth:`observe` read a tenant's
        data version; ``read``: reads a tenant's rows (default: from ``sessions``;
        tests give others)."""
        self._sessions = sessions
        self._params = params or IndexParams()
        self._generations = generations
        self._indexes: LRUCache[str, ConceptIndex] = LRUCache(maxsize=cached_tenants)
        self._started: dict[str, int] = {}
        self._building: dict[tuple[str, str], asyncio.Task[ConceptIndex]] = {}
        self._builds: dict[tuple[str, str], _Build] = {}
        self._seen: dict[str, str] = {}
        self._errors: dict[str, str] = {}
        self._order = itertools.count(1)
        self._read = read or self.read_rows

    async def index(self, tenant_id: str, version: str, *, timeout: float) -> ConceptIndex:
        """The tenant's index at ``version``, built if needed within ``timeout`` seconds
        (then the version before, if this process holds one); raises
        :class:`ConceptsUnavailableError`."""
        self._seen[tenant_id] = version
        held = self._indexes.get(tenant_id)
        if held is not None and held.version == version:
            return held
        task = self._start(tenant_id, version)
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            if held is not None:
                logger.info(
                    "concepts.stale tenant=%s version=%s building=%s",
                    tenant_id,
                    held.version,
                    version,
                )
                return held
            msg = f"the tenant's concept index is still being built (within {timeout:.3f}s)"
            raise ConceptsUnavailableError(msg) from None

    async def current(self, tenant_id: str, *, timeout: float) -> ConceptIndex:
        """The tenant's index at its current data version (:meth:`index`)."""
        version = await self._version(tenant_id)
        return await self.index(tenant_id, version, timeout=timeout)

    async def observe(self, tenant_id: str) -> ConceptStatus:
        """The tenant's :meth:`status` once its data version is read, a build of that
        version started in the background when the index held is older (not waited
        for)."""
        version = await self._version(tenant_id)
        self._seen[tenant_id] = version
        held = self._indexes.get(tenant_id)
        if held is None or held.version != version:
            self._start(tenant_id, version)
        return self.status(tenant_id)

    def status(self, tenant_id: str) -> ConceptStatus:
        """What this process holds of the tenant's index, and its build if one runs."""
        held = self._indexes.get(tenant_id)
        running = [build for (tenant, _), build in self._builds.items() if tenant == tenant_id]
        build = running[-1] if running else None
        if build is not None:
            state = "building"
        elif held is None:
            state = "none"
        elif self._seen.get(tenant_id, held.version) != held.version:
            state = "stale"
        else:
            state = "ready"
        status = ConceptStatus(
            tenant_id=tenant_id,
            state=state,
            building=None if build is None else build.version,
            stage=None if build is None else build.stage,
            fraction=None if build is None else round(build.fraction, 3),
            error=self._errors.get(tenant_id),
        )
        if held is None:
            return status
        return replace(
            status,
            version=held.version,
            chunks=held.chunk_count,
            concepts=held.concept_count,
            links=held.link_count,
            communities=held.communities_per_level(),
            build_s=round(held.build_s, 3),
        )

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's index (a purged tenant)."""
        self._indexes.pop(tenant_id, None)
        self._seen.pop(tenant_id, None)
        self._errors.pop(tenant_id, None)
        self._started.pop(tenant_id, None)

    # -- builds -------------------------------------------------------------------

    async def _version(self, tenant_id: str) -> str:
        if self._generations is None:
            raise ConceptsUnavailableError("no data versions to build concept indexes at")
        version, _ = await self._generations.read(tenant_id)
        return version

    def _start(self, tenant_id: str, version: str) -> asyncio.Task[ConceptIndex]:
        key = (tenant_id, version)
        task = self._building.get(key)
        if task is None:
            build = _Build(version)
            self._builds[key] = build
            task = asyncio.ensure_future(self._built(tenant_id, build, next(self._order)))
            self._building[key] = task

            def done(finished: asyncio.Task[ConceptIndex]) -> None:
                self._building.pop(key, None)
                self._builds.pop(key, None)
                if not finished.cancelled() and finished.exception() is not None:
                    self._errors[tenant_id] = str(finished.exception())

            task.add_done_callback(done)
        return task

    async def _built(self, tenant_id: str, build: _Build, order: int) -> ConceptIndex:
        started = time.perf_counter()
        try:
            index = await anyio.to_thread.run_sync(
                partial(self._build_now, tenant_id, build.version, build.report)
            )
        except ConceptsUnavailableError:
            raise
        except Exception as exc:
            logger.exception("concepts.build_failed tenant=%s version=%s", tenant_id, build.version)
            msg = f"the tenant's concept index could not be built ({type(exc).__name__}: {exc})"
            raise ConceptsUnavailableError(msg) from exc
        index.build_s = time.perf_counter() - started
        if self._started.get(tenant_id, 0) < order:
            self._started[tenant_id] = order
            self._indexes[tenant_id] = index
        self._errors.pop(tenant_id, None)
        logger.info(
            "concepts.built tenant=%s version=%s chunks=%d concepts=%d links=%d "
            "communities=%s seconds=%.3f",
            tenant_id,
            build.version,
            index.chunk_count,
            index.concept_count,
            index.link_count,
            index.communities_per_level(),
            index.build_s,
        )
        return index

    def _build_now(self, tenant_id: str, version: str, progress: Progress) -> ConceptIndex:
        rows = self._read(tenant_id, progress)
        return build_index(tenant_id, version, rows, params=self._params, progress=progress)

    def read_rows(self, tenant_id: str, progress: Progress) -> list[ConceptRow]:
        """The tenant's documents with their chunks' concepts, from the database."""
        progress("reading", 0.0)
        rows: list[ConceptRow] = []
        try:
            with self._sessions() as session:
                repo = DocumentRepository(session)
                total = max(repo.count(tenant_id), 1)
                for source in repo.concept_sources(tenant_id):
                    value = source.concepts or {}
                    chunks = value.get("chunks") or []
                    if len(chunks) != len(source.chunk_ids):
                        chunks = []  # of another cut of the text: none until repaired
                    rows.append(
                        ConceptRow(
                            document_id=str(source.id),
                            external_id=source.external_id,
                            title=source.title,
                            chunk_ids=tuple(source.chunk_ids[: len(chunks)]),
                            concepts=tuple(tuple(c) for c in chunks),
                        )
                    )
                    if len(rows) % 1000 == 0:
                        progress("reading", min(1.0, len(rows) / total))
        except (*DATABASE_UNAVAILABLE, *DATABASE_ERROR) as exc:
            msg = f"the concepts could not be read ({type(exc).__name__})"
            raise ConceptsUnavailableError(msg) from exc
        return rows
