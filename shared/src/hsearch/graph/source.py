"""The graph leg: documents the links lead to from the other legs' best documents.

A registered source (:mod:`hsearch.search.sources`) that reads the first round's
candidates (:attr:`~hsearch.search.sources.Need.HITS`) and answers documents
(:attr:`~hsearch.search.sources.Level.DOCUMENT`; the retriever brings each to its best
chunk under the search's filter, so a document the filter or a search token excludes
never comes back through a link). The seeds are the documents of each other leg's
``seeds`` best candidates, a document weighing ``1 / rank`` in each leg that holds it
(summed); they are scored over the tenant's graph at the tenant's current data version
(:mod:`hsearch.graph.store`) by 1/hops proximity, personalised PageRank or the bridge
from the heaviest seed the graph holds (one with links) to the linked documents the
legs found too, weighed by the same
sum of ``1 / rank`` over all their candidates (:mod:`hsearch.graph.scoring`), in a
worker thread, under the leg's deadline. Each hit
carries the path that explains it: from which seed, through which links.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import anyio.to_thread

from hsearch.cache.generations import GenerationReader
from hsearch.errors import GraphUnavailableError
from hsearch.graph.params import GraphParams, GraphScoring, parse_graph_params
from hsearch.graph.scoring import Reached, bridge, personalized_pagerank, proximity
from hsearch.graph.store import GraphStore, TenantGraph
from hsearch.search.sources import Level, Need, SourceQuery
from hsearch.types import SearchMode
from hsearch.vectorstore.protocol import StoredHit

__all__ = ["GRAPH_LEG", "GraphSource", "seed_weights"]

GRAPH_LEG = "graph"


def seed_weights(
    earlier: Mapping[str, Sequence[StoredHit]], *, per_leg: int | None
) -> dict[str, float]:
    """Each seed document's weight: ``1 / rank`` of its best chunk among the first
    ``per_leg`` documents of each leg (every document for None), summed over the legs."""
    weights: dict[str, float] = {}
    for hits in earlier.values():
        seen: set[str] = set()
        for hit in hits:
            document = hit.fields.get("document_id")
            if document is None or str(document) in seen:
                continue
            seen.add(str(document))
            weights[str(document)] = weights.get(str(document), 0.0) + 1.0 / len(seen)
            if len(seen) == per_leg:
                break
    return weights


class GraphSource:
    """The graph leg (module docstring)."""

    name = GRAPH_LEG
    needs = frozenset({Need.HITS})
    level = Level.DOCUMENT
    modes = frozenset({SearchMode.HYBRID, SearchMode.SEMANTIC, SearchMode.KEYWORD})

    def __init__(
        self,
        graphs: GraphStore,
        generations: GenerationReader,
        *,
        defaults: GraphParams,
        default_weight: float = 0.0,
    ) -> None:
        self._graphs = graphs
        self._generations = generations
        self.defaults = defaults
        self.default_weight = default_weight

    def parse_params(self, raw: Mapping[str, Any] | None) -> GraphParams:
        return parse_graph_params(raw, defaults=self.defaults)

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        params = query.params if isinstance(query.params, GraphParams) else self.defaults
        started = time.perf_counter()
        seeds = seed_weights(query.earlier, per_leg=params.seeds)
        if not seeds:
            return []
        matches = (
            seed_weights(query.earlier, per_leg=None)
            if params.scoring is GraphScoring.BRIDGE
            else {}
        )
        version, _ = await self._generations.read(query.tenant_id)
        left = timeout - (time.perf_counter() - started)
        if left <= 0:
            raise GraphUnavailableError("no time left to read the document graph")
        held = await self._graphs.graph(query.tenant_id, version, timeout=left)
        return await anyio.to_thread.run_sync(
            partial(_ranked, held, seeds, matches, params=params, limit=query.limit)
        )


def _nodes(held: TenantGraph, weights: Mapping[str, float]) -> dict[int, float]:
    """``weights`` by the graph's node index, documents it does not hold left out."""
    nodes: dict[int, float] = {}
    for document, weight in weights.items():
        node = held.graph.index_of(document)
        if node is not None:
            nodes[node] = weight
    return nodes


def _ranked(
    held: TenantGraph,
    seeds: Mapping[str, float],
    matches: Mapping[str, float],
    *,
    params: GraphParams,
    limit: int,
) -> list[StoredHit]:
    graph = held.graph
    nodes = _nodes(held, seeds)
    if not nodes:
        return []
    reached: list[Reached]
    if params.scoring is GraphScoring.BRIDGE:
        reached = bridge(
            graph,
            nodes,
            _nodes(held, matches),
            types=params.types,
            direction=params.direction,
            limit=limit,
            include_seeds=params.include_seeds,
        )
    elif params.scoring is GraphScoring.PAGERANK:
        reached = personalized_pagerank(
            graph,
            nodes,
            alpha=params.alpha,
            types=params.types,
            direction=params.direction,
            limit=limit,
            include_seeds=params.include_seeds,
        )
    else:
        reached = proximity(
            graph,
            nodes,
            depth=params.depth,
            types=params.types,
            direction=params.direction,
            limit=limit,
            include_seeds=params.include_seeds,
        )
    names = held.external_ids
    return [
        StoredHit(
            graph.key_of(r.node),
            r.score,
            {},
            detail={
                "hops": r.hops,
                "seed": names[r.seed],
                "path": [names[n] for n in r.path],
                "via": list(r.via),
                "directions": [str(d) for d in r.directions],
            },
        )
        for r in reached
    ]
