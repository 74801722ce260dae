"""Tenants' document graphs in memory: built from the metadata database, kept per data
version.

A tenant's graph (:class:`~hsearch.graph.csr.LinkGraph`: compressed sparse rows both
ways) holds its resolved links, both ends indexed documents. It is built on first use
and again whenever the tenant's data version (``data_generation``, which every write
moves) is not the one it was built at: a search never follows a link that is no longer
there, nor misses one a write added (its cache key carries the version too). One build
runs per tenant and version, however many searches wait for it; a search that cannot
wait (its deadline) gives up waiting, not the build, so the next search finds it done.
While a new version is being built, a search past its deadline is answered from the
version before (at most one write behind), logged; with none, the leg is degraded.

A tenant with more than ``max_links`` links gets no graph (the leg is degraded, naming
the limit): memory is bounded per tenant, and by ``cached_tenants`` per process.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial

import anyio.to_thread
import numpy as np
from cachetools import LRUCache

from hsearch.db.engine import DATABASE_ERROR, DATABASE_UNAVAILABLE, SessionFactory
from hsearch.db.repositories.links import LinkRepository
from hsearch.errors import GraphUnavailableError
from hsearch.graph.csr import LinkGraph
from hsearch.graph.links import LinkedPage
from hsearch.vectorstore.filters import FilterNode, matches

__all__ = ["GraphStore", "LinkedPage", "LinkedPages", "TenantGraph"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TenantGraph:
    tenant_id: str
    version: str
    graph: LinkGraph
    """Nodes keyed by document id (the chunks' ``document_id``)."""
    external_ids: tuple[str, ...]
    """Each node's external id."""
    build_s: float
    started: int = 0
    """The order its build started in (this process's): a build started later read the
    database later, so an earlier one finishing after it never replaces it."""


class GraphStore:
    """The tenants' graphs of one process (module docstring)."""

    def __init__(
        self,
        sessions: SessionFactory,
        *,
        max_links: int,
        cached_tenants: int = 64,
        build: Callable[[str], tuple[LinkGraph, tuple[str, ...]]] | None = None,
    ) -> None:
        """``build``: reads a tenant's graph (default: from ``sessions``; tests give
        others)."""
        self._sessions = sessions
        self._max_links = max_links
        self._graphs: LRUCache[str, TenantGraph] = LRUCache(maxsize=cached_tenants)
        self._building: dict[tuple[str, str], asyncio.Task[TenantGraph]] = {}
        self._builds = itertools.count(1)
        self._build = build or self.read_graph

    async def graph(self, tenant_id: str, version: str, *, timeout: float) -> TenantGraph:
        """The tenant's graph at ``version``, built if needed within ``timeout``
        seconds (then the version before, if this process holds one); raises
        :class:`GraphUnavailableError`."""
        held = self._graphs.get(tenant_id)
        if held is not None and held.version == version:
            return held
        key = (tenant_id, version)
        task = self._building.get(key)
        if task is None:
            task = asyncio.ensure_future(self._built(tenant_id, version, next(self._builds)))
            self._building[key] = task
            task.add_done_callback(lambda _: self._building.pop(key, None))
        try:
            return await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            if held is not None:
                logger.info(
                    "graph.stale tenant=%s version=%s building=%s", tenant_id, held.version, version
                )
                return held
            msg = f"the tenant's document graph is still being built (within {timeout:.3f}s)"
            raise GraphUnavailableError(msg) from None

    def forget(self, tenant_id: str) -> None:
        """Drop the tenant's graph (a purged tenant)."""
        self._graphs.pop(tenant_id, None)

    async def _built(self, tenant_id: str, version: str, order: int) -> TenantGraph:
        started = time.perf_counter()
        graph, external_ids = await anyio.to_thread.run_sync(self._build, tenant_id)
        built = TenantGraph(
            tenant_id=tenant_id,
            version=version,
            graph=graph,
            external_ids=external_ids,
            build_s=time.perf_counter() - started,
            started=order,
        )
        held = self._graphs.get(tenant_id)
        if held is None or held.started < order:
            self._graphs[tenant_id] = built
        logger.info(
            "graph.built tenant=%s nodes=%d links=%d seconds=%.3f",
            tenant_id,
            graph.n,
            graph.links,
            built.build_s,
        )
        return built

    def read_graph(self, tenant_id: str) -> tuple[LinkGraph, tuple[str, ...]]:
        """The tenant's resolved links as a graph, from the database."""
        index: dict[str, int] = {}
        external: list[str] = []
        sources: list[int] = []
        targets: list[int] = []
        type_ids: list[int] = []
        types: dict[str, int] = {}
        weights: list[float] = []
        try:
            with self._sessions() as session:
                for edge in LinkRepository(session).graph_edges(tenant_id):
                    if len(sources) >= self._max_links:
                        msg = (
                            f"the tenant has more than {self._max_links} links "
                            "(graph.max_links): no graph leg"
                        )
                        raise GraphUnavailableError(msg)
                    for key, name in (
                        (edge.source, edge.source_external_id),
                        (edge.target, edge.target_external_id),
                    ):
                        if key not in index:
                            index[key] = len(external)
                            external.append(name)
                    sources.append(index[edge.source])
                    targets.append(index[edge.target])
                    type_ids.append(types.setdefault(edge.type, len(types)))
                    weights.append(edge.weight)
        except (*DATABASE_UNAVAILABLE, *DATABASE_ERROR) as exc:
            msg = f"the document graph could not be read ({type(exc).__name__})"
            raise GraphUnavailableError(msg) from exc
        keys = list(index)
        graph = LinkGraph.from_arrays(
            len(keys),
            np.asarray(sources, dtype=np.int64),
            np.asarray(targets, dtype=np.int64),
            np.asarray(type_ids, dtype=np.int64),
            np.asarray(weights, dtype=np.float32),
            types=list(types),
            keys=keys,
        )
        return graph, tuple(external)


class LinkedPages:
    """The documents search hits link to and from (``include_linked``)."""

    def __init__(self, sessions: SessionFactory, *, per_document: int = 50) -> None:
        self._sessions = sessions
        self._per_document = per_document

    async def read(
        self, tenant_id: str, document_ids: Collection[str], *, filter: FilterNode | None
    ) -> dict[str, tuple[LinkedPage, ...]]:
        """Per document id, its linked pages passing ``filter`` (the search's, a
        token's included), at most ``per_document`` each; raises
        :class:`GraphUnavailableError` when the database cannot be read."""
        return await anyio.to_thread.run_sync(
            partial(self._read, tenant_id, document_ids, filter=filter)
        )

    def _read(
        self, tenant_id: str, document_ids: Collection[str], *, filter: FilterNode | None
    ) -> dict[str, tuple[LinkedPage, ...]]:
        wanted = [uuid.UUID(d) for d in document_ids]
        try:
            with self._sessions() as session:
                rows = LinkRepository(session).linked(tenant_id, wanted)
                pages: dict[str, tuple[LinkedPage, ...]] = {}
                for document_id, linked in rows.items():
                    kept = [
                        LinkedPage(doc.external_id, doc.title, type_, direction)
                        for direction, type_, _, doc in linked
                        if filter is None or matches(filter, doc.filter_fields())
                    ]
                    pages[str(document_id)] = tuple(kept[: self._per_document])
        except (*DATABASE_UNAVAILABLE, *DATABASE_ERROR) as exc:
            msg = f"the linked pages could not be read ({type(exc).__name__})"
            raise GraphUnavailableError(msg) from exc
        return pages
