"""Where a lazy search's candidates come from, on the tenant's stores.

* **Level 0**: the question's hybrid retrieval (the search's own, with its filter and
  a search token's), each passage a candidate whose prior falls with its rank.
* **Level 1**: the tenant's concept index (:class:`ConceptSource`, built without a
  model): the chunks holding the question's concepts, and the best chunks of the
  communities those concepts fall in; from a relevant chunk, the chunks sharing its
  concepts and its community's.
* **Links**: from a relevant chunk's document, the documents it links to and those
  linking to it (the tenant's document graph at its current data version), each
  brought to its first chunk under the filter.

A candidate reached by concepts or communities is read from the vector store by id,
with its fields, and is kept only when the search's filter (a search token's included)
passes them: no chunk the question's own search could not return is tested. Level 1
or the links that cannot be had in time are gone without, and the report says so.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hsearch.cache.generations import GenerationReader
from hsearch.compositions.lazy.budget import LazySpend
from hsearch.compositions.lazy.models import Candidate, Judgement, Origin
from hsearch.errors import BackendError, HsearchError
from hsearch.graph.csr import Direction
from hsearch.graph.store import GraphStore
from hsearch.search.passages import Passages, RetrievalRequest, RetrievalService, stored_fields
from hsearch.search.planner import SearchPlan
from hsearch.vectorstore.filters import FilterNode, matches
from hsearch.vectorstore.protocol import VectorStore

__all__ = [
    "CommunityView",
    "ConceptSource",
    "ConceptView",
    "Reach",
    "StoreNeighbourhood",
]

logger = logging.getLogger(__name__)


class CommunityView(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def chunk_ids(self) -> tuple[str, ...]: ...


class ConceptView(Protocol):
    """A tenant's Level 1 index at one data version (what the lazy search reads)."""

    def chunk_concepts(self, chunk_id: str) -> tuple[str, ...]: ...

    def chunks_with(self, concepts: Iterable[str], *, limit: int) -> list[tuple[str, float]]: ...

    def communities_for(
        self, concepts: Iterable[str], *, limit: int, level: int | None = None
    ) -> Sequence[tuple[CommunityView, float]]: ...

    def match(self, phrases: Iterable[str]) -> tuple[str, ...]: ...


class ConceptSource(Protocol):
    async def index(self, tenant_id: str, version: str, *, timeout: float) -> ConceptView: ...

    async def query_concepts(self, query: str) -> tuple[str, ...]:
        """The concepts of a question, as the index keys them."""
        ...


@dataclass(frozen=True, slots=True)
class Reach:
    """How far each step reaches (docs/lazy.md)."""

    retrieval: int = 20
    """Level 0 candidates."""
    concept_chunks: int = 10
    """Chunks holding the question's concepts."""
    communities: int = 2
    community_chunks: int = 5
    links: int = 10
    """Linked documents from one relevant chunk."""
    neighbours: int = 5
    """Chunks sharing a relevant chunk's concepts."""
    concepts_per_chunk: int = 8


@dataclass
class StoreNeighbourhood:
    """The candidates of one question (module docstring)."""

    request: RetrievalRequest
    retrieval: RetrievalService
    store: VectorStore
    generations: GenerationReader
    graphs: GraphStore | None = None
    concepts: ConceptSource | None = None
    reach: Reach = field(default_factory=Reach)
    retrieved: Passages | None = None
    """The Level 0 :class:`~hsearch.search.passages.Passages` (for the answer's legs)."""
    _degraded: list[str] = field(default_factory=list)
    _plan: SearchPlan | None = None
    _index: ConceptView | None = None
    _version: str | None = None

    @property
    def degraded(self) -> Sequence[str]:
        return tuple(self._degraded)

    async def start(self, spend: LazySpend) -> list[Candidate]:
        self._plan = self.retrieval.plan(self.request)
        passages = await self.retrieval.retrieve(self.request, budget=spend.deadline)
        self.retrieved = passages
        count = max(1, len(passages.passages))
        found = [
            Candidate(
                chunk_id=p.chunk_id,
                origin=Origin.RETRIEVAL,
                prior=1.0 - (p.rank - 1) / (count + 1),
                rank=p.rank,
                document_id=p.document_id,
                external_id=p.external_id,
                title=p.title,
                text=p.text,
                char_start=p.char_start,
                char_end=p.char_end,
            )
            for p in passages.passages
        ]
        index = await self._concept_index(spend)
        if index is None or self.concepts is None:
            return found
        try:
            asked = await self.concepts.query_concepts(self.request.query)
        except Exception as exc:  # Level 1 is gone without, never a failed answer
            logger.warning("lazy.query_concepts.failed error=%s", type(exc).__name__, exc_info=exc)
            self._note(f"level1_unavailable: the question's concepts ({type(exc).__name__})")
            return found
        wanted = index.match(asked)
        if not wanted:
            return found
        found += _scored(
            index.chunks_with(wanted, limit=self.reach.concept_chunks),
            Origin.CONCEPTS,
            top=0.6,
            via=",".join(wanted[:3]),
        )
        for community, score in index.communities_for(wanted, limit=self.reach.communities):
            found += _scored(
                [(c, score) for c in community.chunk_ids[: self.reach.community_chunks]],
                Origin.COMMUNITIES,
                top=0.4,
                via=community.id,
            )
        return found

    async def read(self, candidates: Sequence[Candidate], spend: LazySpend) -> list[Candidate]:
        missing = [c.chunk_id for c in candidates if c.text is None]
        if not missing:
            return list(candidates)
        timeout = max(0.05, spend.deadline.remaining_s())
        tenant = self.request.tenant_id
        try:
            fields = await self.store.chunk_fields(missing, tenant_id=tenant, timeout=timeout)
            allowed = [
                i for i in missing if i in fields and matches(self.search_filter(), dict(fields[i]))
            ]
            texts = (
                await self.store.texts(allowed, tenant_id=tenant, timeout=timeout)
                if allowed
                else {}
            )
        except BackendError as exc:
            self._note(f"store_unavailable: {exc.message}")
            return [c for c in candidates if c.text is not None]
        kept: list[Candidate] = []
        for c in candidates:
            if c.text is None:
                if c.chunk_id not in texts:
                    continue
                stored = stored_fields(fields[c.chunk_id])
                c.text = texts[c.chunk_id]
                c.document_id = stored["document_id"]
                c.external_id = stored["external_id"]
                c.title = stored["title"]
                c.char_start = stored["char_start"]
                c.char_end = stored["char_end"]
            kept.append(c)
        return kept

    async def expand(
        self, candidate: Candidate, judgement: Judgement, spend: LazySpend
    ) -> list[Candidate]:
        found = await self._linked(candidate, spend)
        index = await self._concept_index(spend)
        if index is None:
            return found
        own = index.chunk_concepts(candidate.chunk_id)[: self.reach.concepts_per_chunk]
        if not own:
            return found
        neighbours = [
            (c, s)
            for c, s in index.chunks_with(own, limit=self.reach.neighbours + 1)
            if c != candidate.chunk_id
        ]
        found += _scored(neighbours, Origin.CONCEPTS, top=0.6, via=",".join(own[:3]))
        for community, score in index.communities_for(own, limit=1):
            found += _scored(
                [
                    (c, score)
                    for c in community.chunk_ids[: self.reach.community_chunks + 1]
                    if c != candidate.chunk_id
                ],
                Origin.COMMUNITIES,
                top=0.4,
                via=community.id,
            )
        return found

    async def _linked(self, candidate: Candidate, spend: LazySpend) -> list[Candidate]:
        linked = await self._linked_documents(candidate, spend)
        if not linked:
            return []
        try:
            best = await self.store.best_chunks(
                list(linked),
                tenant_id=self.request.tenant_id,
                filter=self.search_filter(),
                vector=None,
                timeout=max(0.05, spend.deadline.remaining_s()),
            )
        except BackendError as exc:
            self._note(f"store_unavailable: {exc.message}")
            return []
        top = max((linked[d][0] for d in best), default=1.0) or 1.0
        return [
            Candidate(
                chunk_id=hit.chunk_id,
                origin=Origin.LINKS,
                prior=linked[document][0] / top,
                via=linked[document][1],
            )
            for document, hit in best.items()
        ]

    async def _linked_documents(
        self, candidate: Candidate, spend: LazySpend
    ) -> dict[str, tuple[float, str]]:
        """The documents linked to and from ``candidate``'s, the heaviest links first:
        each with its link's weight and type."""
        timeout = spend.deadline.remaining_s()
        if self.graphs is None or not candidate.document_id or timeout <= 0:
            return {}
        try:
            held = await self.graphs.graph(
                self.request.tenant_id, await self._data_version(), timeout=timeout
            )
        except HsearchError as exc:
            self._note(f"links_unavailable: {exc.message}")
            return {}
        graph = held.graph
        node = graph.index_of(candidate.document_id)
        if node is None:
            return {}
        linked: dict[str, tuple[float, str]] = {}
        for adjacency in graph.adjacencies(Direction.BOTH):
            targets, types, weights = adjacency.row(node)
            for target, type_id, weight in zip(targets, types, weights, strict=True):
                key = graph.key_of(int(target))
                if key != candidate.document_id and key not in linked:
                    linked[key] = (float(weight), graph.types[int(type_id)])
        chosen = sorted(linked, key=lambda k: -linked[k][0])[: self.reach.links]
        return {key: linked[key] for key in chosen}

    async def _concept_index(self, spend: LazySpend) -> ConceptView | None:
        if self.concepts is None:
            return None
        if self._index is not None:
            return self._index
        if any(d.startswith("level1_unavailable") for d in self._degraded):
            return None
        timeout = spend.deadline.remaining_s()
        try:
            if timeout <= 0:
                raise BackendError("no time left to read the concept index")
            self._index = await self.concepts.index(
                self.request.tenant_id, await self._data_version(), timeout=timeout
            )
        except HsearchError as exc:
            self._note(f"level1_unavailable: {exc.message}")
            return None
        return self._index

    async def _data_version(self) -> str:
        if self._version is None:
            self._version, _ = await self.generations.read(self.request.tenant_id)
        return self._version

    def search_filter(self) -> FilterNode | None:
        """The filter the request searches under (its own and its search token's), as
        the search planner resolves it; planned once."""
        if self._plan is None:
            self._plan = self.retrieval.plan(self.request)
        return self._plan.filter

    def _note(self, reason: str) -> None:
        if reason not in self._degraded:
            logger.info("lazy.degraded tenant=%s %s", self.request.tenant_id, reason)
            self._degraded.append(reason)


def _scored(
    found: Sequence[tuple[str, float]], origin: Origin, *, top: float, via: str
) -> list[Candidate]:
    """Chunks with scores as candidates whose priors run up to ``top``."""
    best = max((s for _, s in found), default=0.0) or 1.0
    return [
        Candidate(chunk_id=chunk, origin=origin, prior=top * score / best, via=via)
        for chunk, score in found
    ]
