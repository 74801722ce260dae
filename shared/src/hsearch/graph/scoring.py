"""Graph scores: documents ranked by how close they are to seed documents along links.

Pure: no I/O, no clock, no randomness. A search's graph leg passes its seeds, the nodes
of the best hits of the other legs with a weight each (for example ``1 / (rank + 1)``),
and gets back the nodes the links lead to, best first, each with the path that explains
it (:class:`Reached`: "reached from X through a ``mention`` link").

Which links a walk follows
--------------------------
``direction`` (:class:`~hsearch.graph.csr.Direction`): ``out`` from a link's source to
its target, ``in`` from its target to its source (back-links), ``both`` either way.
``types``, when given, keeps only links of those types; a name no link of the graph has
follows nothing (a query may name a type no document uses yet), and None follows every
type.

The three scores
----------------
:func:`proximity`: hop distance, breadth-first, up to ``depth`` hops::

    score(v) = sum over seeds s that reach v within depth of
               w_s * factor(s, v) / hops(s, v)

``hops(s, v)`` is the shortest number of followed links from ``s`` to ``v``;
``factor(s, v)`` is the largest product of link weights along a shortest path from ``s``
to ``v`` (1 when every link has the default weight 1.0; a path through a link of weight
0.5 counts half). A node one hop from two seeds of weight 1 scores 2; one hop from one
and two from the other, 1.5. A seed is left out of the results unless
``include_seeds``, in which case it scores its own weight (0 hops counted as proximity
1) plus what the other seeds give it. Cost: one bounded breadth-first search per seed,
``O(sum over seeds of the links within depth - 1 hops of it)`` (the links read to reach
the last layer), plus a sort of the nodes reached. Depth 3 on a graph with hubs reaches
a large share of the graph; depth 2 is the default.

:func:`personalized_pagerank`: the probability that a random walk is at a node, where the
walk starts at a seed chosen in proportion to the seed weights and at each step either
(with probability ``alpha``, the *teleport* or restart probability) jumps back to a seed
chosen the same way, or (with probability ``1 - alpha``) follows one of the current
node's followed links, chosen in proportion to the links' weights. A node with no link
to follow sends the walk back to the seeds (the usual convention for dangling nodes,
networkx's among them). The vector solves ``p = alpha * s + (1 - alpha) * p P``.

It is approximated locally by *forward push* (Andersen, Chung and Lang, 2006, in its
non-lazy form): each node holds an estimate ``p(u)`` and a residual ``r(u)``, starting
at ``r = s``; a node whose residual reaches ``epsilon * max(d(u), 1)`` (``d(u)``: its
number of followed links) is *pushed*: ``alpha * r(u)`` goes to ``p(u)`` and the rest of
``r(u)`` to its neighbours' residuals in proportion to the link weights (to the seeds
for a node with no link). Every node whose residual crossed the threshold in one round
is pushed in the next, together, in numpy. At the end every residual is below its
threshold, and a node scores ``p(v) + alpha * r(v)`` (a residual left at ``v`` is worth
at least that to ``v``: the walk stops there at once with probability ``alpha``):

* the score is a lower bound of the exact vector: ``0 <= exact(v) - score(v)`` for
  every ``v``, and the errors sum to ``(1 - alpha)`` times the residual left, at most
  ``(1 - alpha) * epsilon * sum_u max(d(u), 1)`` over the nodes holding one (for links
  followed both ways with symmetric weights, also at most ``epsilon * max(d(v), 1)``
  for each ``v``);
* the work is ``O(1 / (alpha * epsilon))`` link reads at most (each push of ``d`` links
  removes at least ``alpha * epsilon * d`` from the residuals, which start at 1): it
  depends on ``epsilon`` and ``alpha``, not on the size of the graph (a type filter
  adds, once per graph and type set, the ``O(n + m)`` of
  :meth:`~hsearch.graph.csr.LinkGraph.followed`).

``max_pushes`` caps the number of node pushes (a smaller vector, further below the
exact one, when reached). Hubs are what the push estimates worst: their many links keep
their residual below the threshold, so a hub's score is mostly ``alpha`` times the
residual it holds. At the default ``epsilon``, on the synthetic graphs of
``docs/benchmarks.md`` (Document graph), the top 10 held 98 % of a converged push's top
10 at 10k links and 76 % at 1M, in 7 to 24 ms.

:func:`bridge`: one hop from the heaviest seed (the document the other legs agree on
most), to the documents the query found as well::

    score(v) = w_top * factor(top, v) * match(v)    for v linked to top, match(v) > 0

where ``match(v)`` is what the caller gives for ``v`` (the search: the sum over the
other legs of ``1 / rank`` among their candidates). It is the second step of a
two-hop question: the best hit names a bridge entity, and the bridge's own passage is
the neighbour that answers the rest of the question. Other seeds (the best documents
the legs ranked already) are left out unless ``include_seeds``. Cost: the links of one
node.

Scores and ties
---------------
Proximity scores are sums of seed weights (their scale); PageRank scores are
probabilities (they sum to at most 1 over every node). Either way higher is closer.
Results come best first, ties broken by node index, at most ``limit`` of them, and only
nodes with a score above 0. Sums run over the seeds in node order, so the result does
not depend on the order of the ``seeds`` mapping.

Paths
-----
Each result's :attr:`Reached.hops`, :attr:`Reached.seed` and :attr:`Reached.path` come
from one breadth-first search from every seed at once over the same links, run after
scoring until the returned nodes are all reached: the nearest seed, and a shortest path
from it. Between equally near seeds the heavier wins (then the lower node index); among
equally short paths from one seed the choice is fixed (the first found, exploring each
layer in the order its nodes were reached and each node's links in row order). For
PageRank the nearest seed is not always the one that gave the most probability; the
path explains that the node is connected, not how much each seed contributed.

Arguments
---------
Seeds are node indices in ``0..n-1`` (the caller maps document ids with
:meth:`LinkGraph.index_of` and drops the ones the graph does not hold); one outside that
range is an error, as is a weight that is not a finite number ``> 0``. No seeds gives no
results. Invalid arguments raise :class:`~hsearch.errors.InvalidGraphError` with a
message naming what is allowed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from hsearch.errors import InvalidGraphError
from hsearch.graph.csr import BoolArray, Direction, FloatArray, Gathered, IntArray, LinkGraph

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_DEPTH",
    "DEFAULT_EPSILON",
    "MAX_DEPTH",
    "Direction",
    "Reached",
    "bridge",
    "personalized_pagerank",
    "proximity",
]

DEFAULT_DEPTH = 2
MAX_DEPTH = 4
"""Deepest proximity search: four hops from a seed already reach most of a graph with
hubs, and a document that far scores a quarter of a neighbour's proximity."""

DEFAULT_ALPHA = 0.15
"""Teleport (restart) probability: a walk follows about ``1 / alpha - 1`` links (5.7)
before it jumps back to a seed."""

DEFAULT_EPSILON = 3e-6
"""Push threshold per followed link (see the module's docstring for what it bounds):
at most ``1 / (alpha * epsilon)``, about 2.2 million, link reads a query; a p50 under 50 ms
at 10k to 1M links in ``bench.graph``, where 1e-6 took up to 62 ms and 1e-5 lost a
quarter of the top 10 at 100k links."""


@dataclass(frozen=True, slots=True)
class Reached:
    """One node a graph score reached, and how.

    ``score`` is the function's score (see the module's docstring). ``hops`` is the
    number of links from the nearest seed, ``seed`` that seed (``hops`` 0 and ``seed``
    the node itself for a seed in the results), ``path`` the nodes from ``seed`` to
    ``node`` inclusive, and ``via`` and ``directions`` the type of each link along it
    and which way it was followed (``out``: along the link, ``in``: against it, so
    ``path[i]`` is the target of a link from ``path[i + 1]``). ``len(path) == hops + 1``.
    """

    node: int
    score: float
    hops: int
    seed: int
    path: tuple[int, ...]
    via: tuple[str, ...]
    directions: tuple[Direction, ...]


@dataclass(frozen=True, slots=True)
class _Walk:
    """Validated arguments shared by the scores."""

    seeds: IntArray  # sorted by node index
    weights: FloatArray  # the seeds' weights, same order
    direction: Direction
    type_mask: BoolArray | None
    limit: int
    include_seeds: bool


# -- validation ---------------------------------------------------------------------------


def _check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        allowed = f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"
        msg = f"{name} must be {allowed} (got {value!r})"
        raise InvalidGraphError(msg)
    number = int(value)
    if number < low or (high is not None and number > high):
        allowed = f">= {low}" if high is None else f"in {low}..{high}"
        msg = f"{name} must be {allowed} (got {number})"
        raise InvalidGraphError(msg)
    return number


def _check_fraction(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        msg = f"{name} must be a number strictly between 0 and 1 (got {value!r})"
        raise InvalidGraphError(msg)
    number = float(value)
    if not 0 < number < 1:
        msg = f"{name} must be strictly between 0 and 1 (got {number!r})"
        raise InvalidGraphError(msg)
    return number


def _check_weighted_nodes(
    name: str, what: str, graph: LinkGraph, weighted: Mapping[int, float]
) -> tuple[IntArray, FloatArray]:
    """``weighted``'s nodes (indices of ``graph``) and weights (finite, ``> 0``), in
    node order."""
    nodes: list[int] = []
    weights: list[float] = []
    for node, weight in weighted.items():
        if isinstance(node, bool) or not isinstance(node, numbers.Integral):
            msg = f"{name}: a {what} must be a node index in 0..{graph.n - 1} (got {node!r})"
            raise InvalidGraphError(msg)
        if not 0 <= int(node) < graph.n:
            msg = f"{name}: a {what} must be a node index in 0..{graph.n - 1} (got {int(node)})"
            raise InvalidGraphError(msg)
        if (
            isinstance(weight, bool)
            or not isinstance(weight, numbers.Real)
            or not math.isfinite(weight)
            or weight <= 0
        ):
            msg = (
                f"{name}: the weight of {what} {int(node)} must be a finite number > 0 "
                f"(got {weight!r})"
            )
            raise InvalidGraphError(msg)
        nodes.append(int(node))
        weights.append(float(weight))
    order = np.argsort(np.asarray(nodes, dtype=np.int64), kind="stable")
    return (
        np.asarray(nodes, dtype=np.int64)[order],
        np.asarray(weights, dtype=np.float64)[order],
    )


def _check_walk(
    graph: LinkGraph,
    seeds: Mapping[int, float],
    *,
    types: Collection[str] | None,
    direction: Direction | str,
    limit: int,
    include_seeds: bool,
) -> _Walk:
    try:
        checked_direction = Direction(direction)
    except ValueError:
        allowed = ", ".join(d.value for d in Direction)
        msg = f"direction must be one of {allowed} (got {direction!r})"
        raise InvalidGraphError(msg) from None
    if types is not None:
        if isinstance(types, str) or not all(isinstance(t, str) for t in types):
            msg = f"types must be a collection of link type names, or None for all (got {types!r})"
            raise InvalidGraphError(msg)
        if not types:
            msg = "types must name at least one link type, or be None to follow every type"
            raise InvalidGraphError(msg)
    checked_limit = _check_int("limit", limit, 1)
    nodes, weights = _check_weighted_nodes("seeds", "seed", graph, seeds)
    return _Walk(
        seeds=nodes,
        weights=weights,
        direction=checked_direction,
        type_mask=graph.type_mask(types),
        limit=checked_limit,
        include_seeds=bool(include_seeds),
    )


# -- shared steps -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class _Step:
    """The followed links of a set of nodes: :class:`Gathered` with, per link, whether it
    was followed against its direction (a back-link)."""

    links: Gathered
    backward: BoolArray


def _step(graph: LinkGraph, nodes: IntArray, walk: _Walk) -> _Step:
    """The links a walk follows from ``nodes``: out-links, then back-links (for
    ``both``), each grouped by node, filtered by type."""
    parts: list[Gathered] = []
    backward: list[BoolArray] = []
    for rows in graph.adjacencies(walk.direction):
        links = rows.gather(nodes)
        if walk.type_mask is not None:
            links = links.take(walk.type_mask[links.type_ids])
        parts.append(links)
        backward.append(np.full(len(links), rows is graph.back_links))
    if len(parts) == 1:
        return _Step(parts[0], backward[0])
    return _Step(
        Gathered(
            np.concatenate([p.origin for p in parts]),
            np.concatenate([p.neighbour for p in parts]),
            np.concatenate([p.type_ids for p in parts]),
            np.concatenate([p.weights for p in parts]),
        ),
        np.concatenate(backward),
    )


def _top(nodes: IntArray, scores: FloatArray, limit: int) -> tuple[IntArray, FloatArray]:
    """The ``limit`` best of ``nodes``: score descending, then node index ascending."""
    if len(nodes) > limit:
        # Everything tied with the limit-th score stays in, so the tie-break is exact.
        kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        keep = scores >= kth
        nodes, scores = nodes[keep], scores[keep]
    order = np.lexsort((nodes, -scores))[:limit]
    return nodes[order], scores[order]


class _Scratch:
    """Dense per-call arrays over the graph's nodes, so that deduplicating a set of
    nodes costs ``O(its size)`` instead of a sort. ``np.zeros`` takes pages the OS
    zeroes on first touch, so a query pays for the nodes it reaches, not for ``n``;
    every helper leaves the arrays zeroed again."""

    def __init__(self, n: int) -> None:
        self._n = n
        self._slot: IntArray | None = None
        self._mark: BoolArray | None = None

    @property
    def slot(self) -> IntArray:
        if self._slot is None:
            self._slot = np.zeros(self._n, dtype=np.int64)
        return self._slot

    @property
    def mark(self) -> BoolArray:
        if self._mark is None:
            self._mark = np.zeros(self._n, dtype=bool)
        return self._mark

    def distinct(self, nodes: npt.NDArray[np.integer[Any]]) -> IntArray:
        """Positions in ``nodes`` holding each distinct node once (which of a node's
        occurrences is unspecified), ascending."""
        positions = np.arange(1, len(nodes) + 1, dtype=np.int64)
        slot = self.slot
        slot[nodes] = positions  # one of each node's positions is left in its slot
        kept = slot[nodes] == positions
        slot[nodes] = 0
        return np.flatnonzero(kept)

    def first(self, nodes: npt.NDArray[np.integer[Any]]) -> IntArray:
        """Positions in ``nodes`` of each distinct node's first occurrence, ascending."""
        size = len(nodes)
        slot = self.slot
        # The largest of size - position is the first position (ufunc.at is exact).
        np.maximum.at(slot, nodes, size - np.arange(size, dtype=np.int64))
        kept = size - slot[nodes] == np.arange(size)
        slot[nodes] = 0
        return np.flatnonzero(kept)


def _explain(
    graph: LinkGraph,
    walk: _Walk,
    nodes: IntArray,
    scores: FloatArray,
    *,
    max_hops: int | None,
    expandable: BoolArray | None = None,
) -> list[Reached]:
    """Each of ``nodes`` with its nearest seed and a shortest path from it: one
    breadth-first search from all seeds, heaviest first, stopped once every node is
    reached (or after ``max_hops``). With ``expandable``, only the nodes it marks are
    expanded (paths run through them; any node may end one)."""
    if not len(nodes):
        return []
    scratch = _Scratch(graph.n)
    # Frontier order is priority order: the heavier seed first, then the lower index.
    frontier = walk.seeds[np.lexsort((walk.seeds, -walk.weights))]
    claimed = np.zeros(graph.n, dtype=bool)
    parent = np.zeros(graph.n, dtype=np.int64)
    parent_type = np.zeros(graph.n, dtype=np.int64)
    parent_backward = np.zeros(graph.n, dtype=bool)
    hops = np.zeros(graph.n, dtype=np.int64)
    claimed[frontier] = True
    parent[frontier] = frontier
    hop = 0
    while frontier.size and not claimed[nodes].all() and (max_hops is None or hop < max_hops):
        hop += 1
        expanded = frontier if expandable is None else frontier[expandable[frontier]]
        step = _step(graph, expanded, walk)
        fresh = ~claimed[step.links.neighbour]
        links, backward = step.links.take(fresh), step.backward[fresh]
        if not len(links):
            break
        # Links in frontier order (a node's out- and back-links together), so that the
        # first link to reach a node leaves the highest-priority node before it.
        order = np.argsort(links.origin, kind="stable")
        links, backward = links.take(order), backward[order]
        first = scratch.first(links.neighbour)
        new = links.neighbour[first].astype(np.int64)
        claimed[new] = True
        parent[new] = expanded[links.origin[first]]
        parent_type[new] = links.type_ids[first]
        parent_backward[new] = backward[first]
        hops[new] = hop
        frontier = new
    reached: list[Reached] = []
    for node, score in zip(nodes.tolist(), scores.tolist(), strict=True):
        path = [node]
        via: list[str] = []
        directions: list[Direction] = []
        while parent[path[-1]] != path[-1]:
            current = path[-1]
            via.append(graph.types[int(parent_type[current])])
            directions.append(Direction.IN if parent_backward[current] else Direction.OUT)
            path.append(int(parent[current]))
        path.reverse()
        via.reverse()
        directions.reverse()
        reached.append(
            Reached(
                node=node,
                score=score,
                hops=int(hops[node]),
                seed=path[0],
                path=tuple(path),
                via=tuple(via),
                directions=tuple(directions),
            )
        )
    return reached


def _best(walk: _Walk, touched: IntArray, score: FloatArray) -> tuple[IntArray, FloatArray]:
    """The best ``walk.limit`` of the ``touched`` nodes (distinct) by ``score`` (a dense
    array), seeds left out unless asked for."""
    candidates = touched[score[touched] > 0]
    if not walk.include_seeds:
        candidates = candidates[~np.isin(candidates, walk.seeds)]
    return _top(candidates, score[candidates], walk.limit)


# -- proximity ----------------------------------------------------------------------------


def proximity(
    graph: LinkGraph,
    seeds: Mapping[int, float],
    *,
    depth: int = DEFAULT_DEPTH,
    types: Collection[str] | None = None,
    direction: Direction | str = Direction.BOTH,
    limit: int,
    include_seeds: bool = False,
) -> list[Reached]:
    """Nodes within ``depth`` hops of the seeds, scored by ``sum w_s * factor / hops``.

    See the module's docstring for the score, the weights' factor, ties and cost.
    ``depth`` is in ``1..MAX_DEPTH``, ``limit >= 1``.
    """
    checked_depth = _check_int("depth", depth, 1, MAX_DEPTH)
    walk = _check_walk(
        graph, seeds, types=types, direction=direction, limit=limit, include_seeds=include_seeds
    )
    if not len(walk.seeds):
        return []
    scratch = _Scratch(graph.n)
    score = np.zeros(graph.n, dtype=np.float64)
    best = np.zeros(graph.n, dtype=np.float64)  # a layer's best factor per node
    visited = np.zeros(graph.n, dtype=bool)  # by the current seed
    reached = scratch.mark  # by any seed
    reached[walk.seeds] = True
    touched: list[IntArray] = [walk.seeds]
    for seed, weight in zip(walk.seeds.tolist(), walk.weights.tolist(), strict=True):
        frontier = np.array([seed], dtype=np.int64)
        factor = np.ones(1, dtype=np.float64)
        seen = [frontier]
        visited[seed] = True
        for hop in range(1, checked_depth + 1):
            links = _step(graph, frontier, walk).links
            links = links.take(~visited[links.neighbour])
            if not len(links):
                break
            # Weights are > 0, so the zeroed array is below every path's factor.
            np.maximum.at(best, links.neighbour, factor[links.origin] * links.weights)
            frontier = links.neighbour[scratch.distinct(links.neighbour)].astype(np.int64)
            factor = best[frontier]
            best[frontier] = 0.0
            visited[frontier] = True
            seen.append(frontier)
            score[frontier] += weight * factor / hop
            touched.append(frontier[~reached[frontier]])
            reached[frontier] = True
        for nodes in seen:
            visited[nodes] = False
    if walk.include_seeds:
        score[walk.seeds] += walk.weights
    nodes, scores = _best(walk, np.concatenate(touched), score)
    return _explain(graph, walk, nodes, scores, max_hops=checked_depth)


# -- personalised PageRank ----------------------------------------------------------------


def personalized_pagerank(
    graph: LinkGraph,
    seeds: Mapping[int, float],
    *,
    alpha: float = DEFAULT_ALPHA,
    epsilon: float = DEFAULT_EPSILON,
    types: Collection[str] | None = None,
    direction: Direction | str = Direction.BOTH,
    limit: int,
    include_seeds: bool = False,
    max_pushes: int | None = None,
) -> list[Reached]:
    """Nodes by personalised PageRank from the seeds, approximated by forward push.

    ``alpha`` is the teleport (restart) probability, ``epsilon`` the push threshold per
    followed link, both strictly between 0 and 1; ``max_pushes`` (``>= 1``, or None for
    no cap) caps the node pushes. See the module's docstring for the walk, the error
    bound and the cost.
    """
    checked_alpha = _check_fraction("alpha", alpha)
    checked_epsilon = _check_fraction("epsilon", epsilon)
    budget = None if max_pushes is None else _check_int("max_pushes", max_pushes, 1)
    walk = _check_walk(
        graph, seeds, types=types, direction=direction, limit=limit, include_seeds=include_seeds
    )
    if not len(walk.seeds):
        return []
    scratch = _Scratch(graph.n)
    start = walk.weights / walk.weights.sum()
    estimate = np.zeros(graph.n, dtype=np.float64)
    residual = np.zeros(graph.n, dtype=np.float64)
    expanded = np.zeros(graph.n, dtype=bool)
    residual[walk.seeds] = start
    reached = scratch.mark
    reached[walk.seeds] = True
    touched: list[IntArray] = [walk.seeds]
    candidates = walk.seeds
    while candidates.size and (budget is None or budget > 0):
        followed = graph.followed(candidates, direction=walk.direction, type_mask=walk.type_mask)
        mass = residual[candidates]
        ready = mass >= checked_epsilon * np.maximum(followed.degree, 1)
        if not ready.any():
            break
        pushed, mass = candidates[ready], mass[ready]
        degree, strength = followed.degree[ready], followed.strength[ready]
        if budget is not None:
            if len(pushed) > budget:
                # The largest residuals per link first: the pushes that move the most.
                first = np.lexsort((pushed, -mass / np.maximum(degree, 1)))[:budget]
                pushed, mass = pushed[first], mass[first]
                degree, strength = degree[first], strength[first]
            budget -= len(pushed)
        residual[pushed] = 0.0
        estimate[pushed] += checked_alpha * mass
        expanded[pushed] = True
        spread = (1.0 - checked_alpha) * mass
        links = _step(graph, pushed, walk).links
        if len(links):
            share = spread[links.origin] * links.weights / strength[links.origin]
            np.add.at(residual, links.neighbour, share)
        received = links.neighbour.astype(np.int64)
        dangling = spread[degree == 0].sum()
        if dangling > 0:
            # A node with no link to follow sends the walk back to the seeds.
            residual[walk.seeds] += dangling * start
            received = np.concatenate([received, walk.seeds])
        candidates = received[scratch.distinct(received)]
        touched.append(candidates[~reached[candidates]])
        reached[candidates] = True
    # A residual r(v) left at v is worth at least alpha * r(v) to v itself (the walk
    # stops there at once with probability alpha): still a lower bound, and the one
    # that ranks a hub, whose many links keep its residual below the push threshold.
    score = estimate
    everything = np.concatenate(touched)
    score[everything] += checked_alpha * residual[everything]
    nodes, scores = _best(walk, everything, score)
    # Every node holding mass got it from a pushed node, reached in turn through pushed
    # nodes from a seed: the paths need expand no others.
    return _explain(graph, walk, nodes, scores, max_hops=None, expandable=expanded)


# -- bridge -------------------------------------------------------------------------------


def bridge(
    graph: LinkGraph,
    seeds: Mapping[int, float],
    matches: Mapping[int, float],
    *,
    types: Collection[str] | None = None,
    direction: Direction | str = Direction.BOTH,
    limit: int,
    include_seeds: bool = False,
) -> list[Reached]:
    """The neighbours of the heaviest seed that match the query, by their match.

    ``matches`` weighs the nodes the query itself found (the other legs' candidates);
    a neighbour absent from it is not returned. See the module's docstring for the
    score and what it is for. Seeds other than the heaviest are left out unless
    ``include_seeds``.
    """
    walk = _check_walk(
        graph, seeds, types=types, direction=direction, limit=limit, include_seeds=include_seeds
    )
    matched, match_weights = _check_weighted_nodes("matches", "match", graph, matches)
    if not len(walk.seeds) or not len(matched):
        return []
    heaviest = int(np.lexsort((walk.seeds, -walk.weights))[0])
    start = walk.seeds[heaviest : heaviest + 1]
    links = _step(graph, start, walk).links
    if not len(links):
        return []
    match = np.zeros(graph.n, dtype=np.float64)
    match[matched] = match_weights
    factor = np.zeros(graph.n, dtype=np.float64)
    np.maximum.at(factor, links.neighbour, links.weights.astype(np.float64))
    neighbours = links.neighbour[_Scratch(graph.n).distinct(links.neighbour)].astype(np.int64)
    score = np.zeros(graph.n, dtype=np.float64)
    score[neighbours] = walk.weights[heaviest] * factor[neighbours] * match[neighbours]
    nodes, scores = _best(walk, neighbours, score)
    # The paths start at the heaviest seed: every result is one of its neighbours.
    one = replace(walk, seeds=start, weights=walk.weights[heaviest : heaviest + 1])
    return _explain(graph, one, nodes, scores, max_hops=1)
