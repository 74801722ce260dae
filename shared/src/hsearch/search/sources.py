"""Retrieval sources: a leg of a search is a registered source, not a branch of code.

A :class:`Source` has a name (the leg's name in requests, explanations, timings and
metrics), says what it reads (:class:`Need`: the query's dense vector, its sparse
weights, or the candidates the first round of legs returned), at which level it answers
(:class:`Level`: chunks, or whole documents) and which search modes it takes part in,
and searches under a deadline. The retriever runs whatever the registry holds: the
dense and sparse legs are two registrations over the vector store
(:class:`DenseSource`, :class:`SparseSource`), and a third signal (a document graph) is
a third registration, with no edit to the retriever, the planner, ranking or the
response models.

A source returns :class:`~hsearch.vectorstore.protocol.StoredHit` values, best first:
for a chunk-level source the chunk's id (with its stored fields when it has them; the
retriever reads them by id otherwise, under the search's filter), for a document-level
source the document's id (the retriever then brings the document's best chunk,
:mod:`hsearch.search.retrieval`).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from hsearch.types import DenseVector, Leg, SearchMode, SparseVector
from hsearch.vectorstore.filters import FilterNode
from hsearch.vectorstore.protocol import StoredHit, VectorStore

__all__ = [
    "BUILTIN_SOURCES",
    "DenseSource",
    "Level",
    "Need",
    "ParameterisedSource",
    "Source",
    "SourceQuery",
    "SourceRegistry",
    "SparseSource",
    "store_sources",
]


class Need(StrEnum):
    """What a source reads from the query."""

    DENSE = "dense"
    """The query's dense vector."""
    SPARSE = "sparse"
    """The query's sparse weights (with the tenant's statistics applied)."""
    HITS = "hits"
    """The candidates of the legs of the first round: the source runs after them."""


class Level(StrEnum):
    """What a source's candidates are."""

    CHUNK = "chunk"
    DOCUMENT = "document"


@dataclass(frozen=True, slots=True)
class SourceQuery:
    """What one source is asked: the tenant (every source searches one tenant only), the
    query text and what the source reads of its encoding, the search's whole filter (a
    search token's included), and how many candidates to return at most."""

    tenant_id: str
    text: str
    filter: FilterNode | None
    limit: int
    dense: DenseVector | None = None
    sparse: SparseVector | None = None
    earlier: Mapping[str, tuple[StoredHit, ...]] = field(
        default_factory=lambda: MappingProxyType({}), compare=False
    )
    """For a source that needs :attr:`Need.HITS`: each first-round leg's candidates
    (what they were given, not part of the query's identity)."""
    params: object = None
    """What the request asks of this source in particular (the plan's
    ``leg_params[name]``, checked by the planner: the graph leg's
    :class:`~hsearch.graph.params.GraphParams`); ``None``: its defaults."""


@runtime_checkable
class ParameterisedSource(Protocol):
    """A source a request can pass parameters to (``"graph": {...}``)."""

    def parse_params(self, raw: Mapping[str, Any] | None) -> Hashable:
        """The request's parameters, checked (a frozen value, part of the plan);
        raises :class:`~hsearch.errors.InvalidRequestError` naming the field."""
        ...


class Source(Protocol):
    """One retrieval signal whose ranked candidates are fused with the others'."""

    @property
    def name(self) -> str:
        """The leg's name: a request's ``weights`` key, a hit's ``explanation.legs`` key."""
        ...

    @property
    def needs(self) -> frozenset[Need]: ...

    @property
    def level(self) -> Level: ...

    @property
    def modes(self) -> frozenset[SearchMode]:
        """The search modes whose requests run it."""
        ...

    @property
    def default_weight(self) -> float:
        """Its fusion weight when neither the request nor the encoder's fusion default
        names it (0: it runs only when a request weighs it)."""
        ...

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        """The best candidates for ``query``, best first, at most ``query.limit``, within
        ``timeout`` seconds; raises :class:`~hsearch.errors.BackendError` (or a
        subclass) when the backend fails: the leg is then degraded, not the search."""
        ...


@dataclass(frozen=True, slots=True)
class _StoreSource:
    store: VectorStore
    name: str
    needs: frozenset[Need]
    modes: frozenset[SearchMode]
    level: Level = Level.CHUNK
    default_weight: float = 0.0


class DenseSource(_StoreSource):
    """The dense leg: nearest chunks by the query's dense vector (HNSW, inner product)."""

    def __init__(self, store: VectorStore) -> None:
        super().__init__(
            store,
            Leg.DENSE.value,
            frozenset({Need.DENSE}),
            frozenset({SearchMode.HYBRID, SearchMode.SEMANTIC}),
        )

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        if query.dense is None:
            msg = "the dense leg needs the query's dense vector"
            raise TypeError(msg)
        return await self.store.search_dense(
            query.dense,
            tenant_id=query.tenant_id,
            filter=query.filter,
            limit=query.limit,
            timeout=timeout,
        )


class SparseSource(_StoreSource):
    """The sparse (keyword) leg: chunks sharing the query's terms (inverted index)."""

    def __init__(self, store: VectorStore) -> None:
        super().__init__(
            store,
            Leg.SPARSE.value,
            frozenset({Need.SPARSE}),
            frozenset({SearchMode.HYBRID, SearchMode.KEYWORD}),
        )

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        if query.sparse is None:
            msg = "the sparse leg needs the query's sparse weights"
            raise TypeError(msg)
        return await self.store.search_sparse(
            query.sparse,
            tenant_id=query.tenant_id,
            filter=query.filter,
            limit=query.limit,
            timeout=timeout,
        )


class SourceRegistry:
    """The sources a server searches, by name, in registration order (the order of
    ``legs`` in responses and of the weights)."""

    def __init__(self, sources: Iterable[Source]) -> None:
        by_name: dict[str, Source] = {}
        for source in sources:
            name = source.name
            if not name or not name.isidentifier():
                msg = f"a source's name must be a non-empty identifier, got {name!r}"
                raise ValueError(msg)
            if name in by_name:
                msg = f"two sources are named {name!r}"
                raise ValueError(msg)
            if not 0.0 <= source.default_weight <= 1.0:
                msg = f"{name}: default_weight must be between 0 and 1"
                raise ValueError(msg)
            by_name[name] = source
        if not by_name:
            msg = "a search needs at least one source"
            raise ValueError(msg)
        self._by_name = MappingProxyType(by_name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __getitem__(self, name: str) -> Source:
        return self._by_name[name]

    def get(self, name: str) -> Source | None:
        return self._by_name.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Source]:
        return iter(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)

    def legs_of(self, mode: SearchMode) -> tuple[str, ...]:
        """The names of the sources a search of ``mode`` runs, in registration order."""
        return tuple(s.name for s in self if mode in s.modes)

    def default_weights(self) -> dict[str, float]:
        """Each source's own default weight."""
        return {s.name: s.default_weight for s in self}


BUILTIN_SOURCES: tuple[str, ...] = (Leg.DENSE.value, Leg.SPARSE.value)
"""The names of the sources every server registers (:func:`store_sources`)."""


def store_sources(store: VectorStore, *extra: Source) -> SourceRegistry:
    """The dense and sparse legs over ``store`` (:data:`BUILTIN_SOURCES`), then
    ``extra`` sources."""
    return SourceRegistry([DenseSource(store), SparseSource(store), *extra])
