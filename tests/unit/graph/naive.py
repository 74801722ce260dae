"""Naive references for the graph tests: the same definitions as ``hsearch.graph``,
written the slow, obvious way (dicts, Python breadth-first search, a dense power
iteration), and hypothesis strategies for small random graphs."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from hypothesis import strategies as st

from hsearch.graph.csr import Direction, LinkGraph

TYPES = ("link", "mention", "title_mention")
# Dyadic weights: exact in float32, so products and sums match the numpy code exactly.
WEIGHTS = (0.25, 0.5, 1.0, 2.0)
SEED_WEIGHTS = (0.5, 1.0, 1.5, 3.0)

Edge = tuple[int, int, str, float]


@dataclass(frozen=True)
class Naive:
    """A graph as a dict of links: (source, target, type) -> weight, after the graph's
    rules (no self-loops, the largest weight of a repeated link)."""

    n: int
    links: dict[tuple[int, int, str], float]

    @classmethod
    def of(cls, n: int, edges: Sequence[Edge]) -> Naive:
        links: dict[tuple[int, int, str], float] = {}
        for s, t, kind, w in edges:
            if s != t:
                links[s, t, kind] = max(w, links.get((s, t, kind), 0.0))
        return cls(n, links)

    def graph(self, edges: Sequence[Edge]) -> LinkGraph:
        """The LinkGraph of the same raw edges (repeats and loops included)."""
        return LinkGraph.from_arrays(
            self.n,
            np.array([e[0] for e in edges], dtype=np.int64),
            np.array([e[1] for e in edges], dtype=np.int64),
            np.array([TYPES.index(e[2]) for e in edges], dtype=np.int64),
            np.array([e[3] for e in edges], dtype=np.float64),
            types=TYPES,
        )

    def followed(
        self, node: int, direction: Direction, types: Collection[str] | None
    ) -> list[tuple[int, str, float, Direction]]:
        """(neighbour, type, weight, way) of every link a walk follows from ``node``."""
        out: list[tuple[int, str, float, Direction]] = []
        for (s, t, kind), w in sorted(self.links.items()):
            if types is not None and kind not in types:
                continue
            if s == node and direction in (Direction.OUT, Direction.BOTH):
                out.append((t, kind, w, Direction.OUT))
            if t == node and direction in (Direction.IN, Direction.BOTH):
                out.append((s, kind, w, Direction.IN))
        return out

    def distances(
        self, seed: int, direction: Direction, types: Collection[str] | None, depth: int
    ) -> dict[int, int]:
        dist = {seed: 0}
        queue = deque([seed])
        while queue:
            u = queue.popleft()
            if dist[u] == depth:
                continue
            for v, _, _, _ in self.followed(u, direction, types):
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        return dist

    def factors(
        self, seed: int, direction: Direction, types: Collection[str] | None, depth: int
    ) -> dict[int, float]:
        """The largest product of weights along a shortest path from ``seed``."""
        dist = self.distances(seed, direction, types, depth)
        factor = {seed: 1.0}
        for u in sorted(dist, key=lambda x: dist[x]):
            for v, _, w, _ in self.followed(u, direction, types):
                if dist.get(v) == dist[u] + 1:
                    factor[v] = max(factor.get(v, 0.0), factor[u] * w)
        return factor

    def proximity(
        self,
        seeds: Mapping[int, float],
        *,
        depth: int,
        direction: Direction,
        types: Collection[str] | None,
        include_seeds: bool,
    ) -> dict[int, float]:
        score: dict[int, float] = {}
        for seed in sorted(seeds):
            dist = self.distances(seed, direction, types, depth)
            factor = self.factors(seed, direction, types, depth)
            # The same operations in the same order as the numpy code, layer by layer.
            for hop in range(1, depth + 1):
                for v in sorted(v for v, d in dist.items() if d == hop):
                    score[v] = score.get(v, 0.0) + seeds[seed] * factor[v] / hop
        if include_seeds:
            for seed in sorted(seeds):
                score[seed] = score.get(seed, 0.0) + seeds[seed]
        else:
            for seed in seeds:
                score.pop(seed, None)
        return score

    def pagerank(
        self,
        seeds: Mapping[int, float],
        *,
        alpha: float,
        direction: Direction,
        types: Collection[str] | None,
    ) -> npt.NDArray[np.float64]:
        """Exact personalised PageRank by dense power iteration (dangling nodes restart
        at the seeds)."""
        transition = np.zeros((self.n, self.n))
        for u in range(self.n):
            for v, _, w, _ in self.followed(u, direction, types):
                transition[u, v] += w
        strength = transition.sum(axis=1)
        dangling = strength == 0
        transition[~dangling] /= strength[~dangling, None]
        start = np.zeros(self.n)
        for seed, w in seeds.items():
            start[seed] = w
        start /= start.sum()
        p = start.copy()
        for _ in range(10_000):
            following = p @ transition + p[dangling].sum() * start
            updated = np.asarray(alpha * start + (1 - alpha) * following, dtype=np.float64)
            if np.abs(updated - p).sum() < 1e-15:
                break
            p = updated
        return updated

    def degree(self, node: int, direction: Direction, types: Collection[str] | None) -> int:
        return len(self.followed(node, direction, types))


def ranking(scores: Mapping[int, float], limit: int) -> list[tuple[int, float]]:
    """Score descending, node ascending, the first ``limit``."""
    return sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]


@st.composite
def graphs(draw: st.DrawFn, *, max_nodes: int = 12, max_edges: int = 40) -> tuple[int, list[Edge]]:
    n = draw(st.integers(1, max_nodes))
    edge = st.tuples(
        st.integers(0, n - 1),
        st.integers(0, n - 1),
        st.sampled_from(TYPES),
        st.sampled_from(WEIGHTS),
    )
    return n, draw(st.lists(edge, max_size=max_edges))


def seed_maps(n: int) -> st.SearchStrategy[dict[int, float]]:
    return st.dictionaries(
        st.integers(0, n - 1), st.sampled_from(SEED_WEIGHTS), min_size=1, max_size=min(n, 4)
    )


type_filters = st.one_of(st.none(), st.sets(st.sampled_from(TYPES), min_size=1).map(sorted))
directions = st.sampled_from(list(Direction))
