"""Graph scores: worked examples, validation, and properties against naive references
(Python breadth-first search, dense power iteration) on small random graphs."""

from __future__ import annotations

from collections.abc import Collection
from functools import partial

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import InvalidGraphError, InvalidRequestError
from hsearch.graph.csr import LinkGraph
from hsearch.graph.scoring import (
    DEFAULT_ALPHA,
    MAX_DEPTH,
    Direction,
    Reached,
    bridge,
    personalized_pagerank,
    proximity,
)
from tests.unit.graph.naive import (
    Edge,
    Naive,
    directions,
    graphs,
    ranking,
    seed_maps,
    type_filters,
)


def chain() -> LinkGraph:
    """a -> b -> c -> d, e -> a; b -> c a mention of weight 0.5; f alone."""
    return LinkGraph.from_edges(
        list("abcdef"),
        [
            ("a", "b", "link", 1.0),
            ("b", "c", "mention", 0.5),
            ("c", "d", "link", 1.0),
            ("e", "a", "link", 1.0),
        ],
    )


def scores(reached: list[Reached]) -> dict[int, float]:
    return {r.node: r.score for r in reached}


def drawn(
    case: tuple[int, list[Edge]], data: st.DataObject
) -> tuple[Naive, LinkGraph, dict[int, float]]:
    """A drawn graph as the naive reference and as the graph scored, and seeds drawn for it."""
    n, edges = case
    naive = Naive.of(n, edges)
    return naive, naive.graph(edges), data.draw(seed_maps(n))


def check_explained(
    naive: Naive,
    reached: list[Reached],
    seeds: dict[int, float],
    direction: Direction,
    types: Collection[str] | None,
    *,
    shortest: bool = True,
) -> None:
    """Each result's path is made of followed links of the types and ways it names,
    from a seed; with ``shortest``, from the nearest seed (the heaviest of the nearest,
    then the lowest index) along a shortest path."""
    for r in reached:
        assert r.path[0] == r.seed in seeds
        assert r.path[-1] == r.node
        assert len(r.path) == r.hops + 1 == len(r.via) + 1 == len(r.directions) + 1
        for u, v, kind, way in zip(r.path[:-1], r.path[1:], r.via, r.directions, strict=True):
            assert any(
                n == v and k == kind and d == way
                for n, k, _, d in naive.followed(u, direction, types)
            )
        if not shortest:
            continue
        dist = {s: naive.distances(s, direction, types, naive.n).get(r.node) for s in seeds}
        nearest = min(d for d in dist.values() if d is not None)
        assert r.hops == nearest
        tied = [s for s, d in dist.items() if d == nearest]
        assert r.seed == min(tied, key=lambda s: (-seeds[s], s))


# -- proximity: worked examples -----------------------------------------------------------


def test_proximity_scores_a_node_by_seed_weight_and_hops() -> None:
    reached = proximity(chain(), {0: 1.0}, depth=3, limit=10)
    # b 1 hop; e 1 hop (a back-link); c 2 hops through the 0.5 mention; d 3 hops.
    assert [(r.node, r.score, r.hops) for r in reached] == [
        (1, 1.0, 1),
        (4, 1.0, 1),
        (2, 0.25, 2),
        (3, 0.5 / 3, 3),
    ]
    c = reached[2]
    assert c.path == (0, 1, 2)
    assert c.via == ("link", "mention")
    assert c.directions == (Direction.OUT, Direction.OUT)
    e = reached[1]
    assert (e.path, e.via, e.directions) == ((0, 4), ("link",), (Direction.IN,))


def test_proximity_sums_over_the_seeds_that_reach_a_node() -> None:
    graph = LinkGraph.from_edges(
        list("abcd"), [("a", "c", "link", 1.0), ("b", "c", "link", 1.0), ("c", "d", "link", 1.0)]
    )
    reached = scores(proximity(graph, {0: 1.0, 1: 2.0}, depth=2, limit=10))
    assert reached == {2: 1.0 + 2.0, 3: 1.0 / 2 + 2.0 / 2}


def test_the_weight_factor_is_the_best_product_along_a_shortest_path() -> None:
    graph = LinkGraph.from_edges(
        list("abcde"),
        [
            ("a", "b", "link", 0.5),
            ("b", "d", "link", 0.5),  # a-b-d: 0.25
            ("a", "c", "link", 1.0),
            ("c", "d", "link", 0.5),  # a-c-d: 0.5, the best of the two
            ("d", "e", "link", 2.0),
        ],
    )
    reached = scores(proximity(graph, {0: 1.0}, depth=3, direction="out", limit=10))
    assert reached == {1: 0.5, 2: 1.0, 3: 0.5 / 2, 4: 1.0 / 3}


def test_a_longer_path_of_heavier_links_does_not_count() -> None:
    graph = LinkGraph.from_edges(
        list("abc"),
        [("a", "c", "link", 0.25), ("a", "b", "link", 2.0), ("b", "c", "link", 2.0)],
    )
    reached = scores(proximity(graph, {0: 1.0}, depth=2, direction="out", limit=10))
    assert reached[2] == 0.25  # one hop of weight 0.25, not 4 / 2 over two hops


def test_direction_and_types_choose_the_links_followed() -> None:
    graph = chain()
    assert scores(proximity(graph, {1: 1.0}, depth=1, direction="out", limit=10)) == {2: 0.5}
    assert scores(proximity(graph, {1: 1.0}, depth=1, direction=Direction.IN, limit=10)) == {0: 1.0}
    assert scores(proximity(graph, {1: 1.0}, depth=3, types=["link"], limit=10)) == {
        0: 1.0,
        4: 0.5,
    }
    # A type no link has follows nothing: no error, no results.
    assert proximity(graph, {1: 1.0}, types=["cites"], limit=10) == []


def test_seeds_are_left_out_unless_included() -> None:
    graph = LinkGraph.from_edges(list("abc"), [("a", "b", "link", 1.0), ("b", "c", "link", 1.0)])
    seeds = {0: 2.0, 1: 1.0}
    assert scores(proximity(graph, seeds, limit=10)) == {2: 1.0 + 2.0 / 2}
    included = proximity(graph, seeds, limit=10, include_seeds=True)
    # a: its own 2 plus 1 from b; b: its own 1 plus 2 from a.
    assert scores(included) == {0: 3.0, 1: 3.0, 2: 2.0}
    a = included[0]
    assert (a.node, a.hops, a.seed, a.path, a.via, a.directions) == (0, 0, 0, (0,), (), ())


def test_ties_are_broken_by_node_index_and_limit_cuts() -> None:
    graph = LinkGraph.from_edges(
        [str(i) for i in range(6)], [("0", str(i), "link", 1.0) for i in (5, 3, 1, 4, 2)]
    )
    reached = proximity(graph, {0: 1.0}, limit=3)
    assert [r.node for r in reached] == [1, 2, 3]


def test_the_nearest_seed_explains_and_the_heavier_wins_a_tie() -> None:
    # c is one hop from a (weight 1) and from b (weight 2): b explains it.
    graph = LinkGraph.from_edges(list("abc"), [("a", "c", "link", 1.0), ("b", "c", "mention", 1.0)])
    (c,) = proximity(graph, {0: 1.0, 1: 2.0}, limit=10)
    assert (c.seed, c.path, c.via) == (1, (1, 2), ("mention",))


def test_no_seeds_no_results() -> None:
    assert proximity(chain(), {}, limit=10) == []
    assert personalized_pagerank(chain(), {}, limit=10) == []


# -- proximity: against the naive reference -----------------------------------------------


@given(
    graphs(),
    st.data(),
    st.integers(1, MAX_DEPTH),
    directions,
    type_filters,
    st.booleans(),
    st.integers(1, 15),
)
def test_proximity_matches_the_naive_breadth_first_search(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    depth: int,
    direction: Direction,
    types: list[str] | None,
    include_seeds: bool,
    limit: int,
) -> None:
    naive, graph, seeds = drawn(case, data)
    reached = proximity(
        graph,
        seeds,
        depth=depth,
        types=types,
        direction=direction,
        limit=limit,
        include_seeds=include_seeds,
    )
    expected = naive.proximity(
        seeds, depth=depth, direction=direction, types=types, include_seeds=include_seeds
    )
    # The same operations in the same order: the scores are equal, not just close.
    assert [(r.node, r.score) for r in reached] == ranking(expected, limit)
    check_explained(naive, reached, seeds, direction, types)
    for r in reached:
        assert r.hops <= depth
        assert (r.hops == 0) == (r.node in seeds)


@given(graphs(), st.data(), directions, type_filters)
def test_scores_do_not_depend_on_the_order_of_the_seeds(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    direction: Direction,
    types: list[str] | None,
) -> None:
    _, graph, seeds = drawn(case, data)
    shuffled = dict(reversed(list(seeds.items())))
    for score in (proximity, personalized_pagerank):
        first = score(graph, seeds, types=types, direction=direction, limit=20)
        again = score(graph, seeds, types=types, direction=direction, limit=20)
        reordered = score(graph, shuffled, types=types, direction=direction, limit=20)
        assert first == again == reordered


# -- personalised PageRank ----------------------------------------------------------------


def pagerank_everything(graph: LinkGraph, seeds: dict[int, float], **kwargs: object) -> np.ndarray:
    """Every node's score (0 where none is returned), seeds included."""
    vector = np.zeros(graph.n)
    for r in personalized_pagerank(
        graph,
        seeds,
        limit=max(graph.n, 1),
        include_seeds=True,
        **kwargs,  # type: ignore[arg-type]
    ):
        vector[r.node] = r.score
    return vector


@given(graphs(), st.data(), directions, type_filters, st.sampled_from([0.1, 0.15, 0.5]))
def test_pagerank_converges_to_the_power_iteration(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    direction: Direction,
    types: list[str] | None,
    alpha: float,
) -> None:
    naive, graph, seeds = drawn(case, data)
    exact = naive.pagerank(seeds, alpha=alpha, direction=direction, types=types)
    estimate = pagerank_everything(
        graph, seeds, alpha=alpha, epsilon=1e-12, direction=direction, types=types
    )
    np.testing.assert_allclose(estimate, exact, atol=1e-9)


@given(
    graphs(),
    st.data(),
    directions,
    type_filters,
    st.sampled_from([1e-1, 1e-2, 1e-3, 1e-4]),
)
def test_pagerank_is_a_lower_bound_within_the_push_threshold(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    direction: Direction,
    types: list[str] | None,
    epsilon: float,
) -> None:
    naive, graph, seeds = drawn(case, data)
    exact = naive.pagerank(seeds, alpha=DEFAULT_ALPHA, direction=direction, types=types)
    estimate = pagerank_everything(graph, seeds, epsilon=epsilon, direction=direction, types=types)
    assert np.all(estimate <= exact + 1e-12)
    # Residuals below epsilon * max(d, 1) everywhere, of which 1 - alpha is missing.
    room = sum(max(naive.degree(u, direction, types), 1) for u in range(naive.n))
    assert (exact - estimate).sum() <= (1 - DEFAULT_ALPHA) * epsilon * room + 1e-12


@given(graphs(), st.data(), directions, type_filters, st.integers(1, 15), st.booleans())
def test_pagerank_ranks_paths_and_limits_like_the_reference(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    direction: Direction,
    types: list[str] | None,
    limit: int,
    include_seeds: bool,
) -> None:
    naive, graph, seeds = drawn(case, data)
    reached = personalized_pagerank(
        graph,
        seeds,
        epsilon=1e-12,
        types=types,
        direction=direction,
        limit=limit,
        include_seeds=include_seeds,
    )
    exact = naive.pagerank(seeds, alpha=DEFAULT_ALPHA, direction=direction, types=types)
    expected = {
        v: float(p) for v, p in enumerate(exact) if p > 0 and (include_seeds or v not in seeds)
    }
    # Best first, ties by index; near-ties may swap, so compare what must not.
    assert [r.score for r in reached] == sorted((r.score for r in reached), reverse=True)
    assert len(reached) == min(limit, len(expected))
    for r in reached:
        assert r.score == pytest.approx(expected[r.node], abs=1e-9)
    if reached:
        # Every node clearly above the last one returned is returned.
        clearly_above = {v for v, p in expected.items() if p > reached[-1].score + 1e-9}
        assert clearly_above <= {r.node for r in reached}
    # Paths from a seed along followed links (through nodes the push expanded).
    check_explained(naive, reached, seeds, direction, types, shortest=False)
    assert all((r.hops == 0) == (r.node in seeds) for r in reached)


def test_pagerank_worked_example_one_push() -> None:
    graph = LinkGraph.from_edges(list("abc"), [("a", "b", "link", 1.0), ("a", "c", "mention", 3.0)])
    reached = personalized_pagerank(
        graph, {0: 1.0}, alpha=0.2, direction="out", limit=10, include_seeds=True, max_pushes=1
    )
    # One push of a: 0.2 stays, 0.8 goes 1:3 to b and c, each scoring alpha x residual.
    assert [r.node for r in reached] == [0, 2, 1]
    assert [r.score for r in reached] == pytest.approx([0.2, 0.2 * 0.8 * 0.75, 0.2 * 0.8 * 0.25])
    assert reached[1].via == ("mention",)


def test_a_dangling_node_sends_the_walk_back_to_the_seeds() -> None:
    # a -> b only, followed out: b has nowhere to go, so the walk restarts at a.
    graph = LinkGraph.from_edges(["a", "b"], [("a", "b", "link", 1.0)])
    estimate = pagerank_everything(graph, {0: 1.0}, alpha=0.5, epsilon=1e-12, direction="out")
    # p = 0.5 s + 0.5 (p P): p_a = 0.5 + 0.5 p_b, p_b = 0.5 p_a  =>  p_a = 2/3, p_b = 1/3.
    np.testing.assert_allclose(estimate, [2 / 3, 1 / 3], atol=1e-9)


def test_max_pushes_caps_the_work() -> None:
    graph = chain()
    capped = personalized_pagerank(graph, {0: 1.0}, epsilon=1e-9, limit=10, max_pushes=1)
    full = personalized_pagerank(graph, {0: 1.0}, epsilon=1e-9, limit=10)
    assert {r.node for r in capped} == {1, 4}  # a's neighbours: only a was pushed
    assert {r.node for r in full} == {1, 2, 3, 4}


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, r"limit must be >= 1 \(got 0\)"),
        ({"limit": 2.5}, r"limit must be an integer >= 1"),
        ({"limit": True}, r"limit must be an integer >= 1"),
        ({"seeds": {9: 1.0}}, r"seeds: a seed must be a node index in 0\.\.5 \(got 9\)"),
        ({"seeds": {-1: 1.0}}, r"seeds: a seed must be a node index in 0\.\.5 \(got -1\)"),
        ({"seeds": {"a": 1.0}}, r"seeds: a seed must be a node index in 0\.\.5"),
        ({"seeds": {0: 0.0}}, r"seeds: the weight of seed 0 must be a finite number > 0"),
        ({"seeds": {0: float("nan")}}, r"the weight of seed 0 must be a finite number > 0"),
        ({"seeds": {0: True}}, r"the weight of seed 0 must be a finite number > 0"),
        ({"direction": "sideways"}, r"direction must be one of out, in, both \(got 'sideways'\)"),
        ({"types": "link"}, r"types must be a collection of link type names, or None"),
        ({"types": []}, r"types must name at least one link type, or be None"),
        ({"types": [1]}, r"types must be a collection of link type names"),
    ],
)
@pytest.mark.parametrize("score", [proximity, personalized_pagerank, partial(bridge, matches={})])
def test_invalid_arguments_say_what_is_allowed(
    score: object, kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {"seeds": {0: 1.0}, "limit": 10} | kwargs
    with pytest.raises(InvalidGraphError, match=message) as raised:
        score(chain(), **arguments)  # type: ignore[operator]
    assert isinstance(raised.value, InvalidRequestError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"depth": 0}, rf"depth must be in 1\.\.{MAX_DEPTH} \(got 0\)"),
        ({"depth": MAX_DEPTH + 1}, rf"depth must be in 1\.\.{MAX_DEPTH}"),
        ({"depth": "2"}, rf"depth must be an integer in 1\.\.{MAX_DEPTH}"),
    ],
)
def test_proximity_depth_is_bounded(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidGraphError, match=message):
        proximity(chain(), {0: 1.0}, limit=10, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 0}, r"alpha must be strictly between 0 and 1 \(got 0\.0\)"),
        ({"alpha": 1.0}, r"alpha must be strictly between 0 and 1"),
        ({"alpha": "0.1"}, r"alpha must be a number strictly between 0 and 1"),
        ({"epsilon": 0.0}, r"epsilon must be strictly between 0 and 1"),
        ({"epsilon": float("nan")}, r"epsilon must be strictly between 0 and 1"),
        ({"max_pushes": 0}, r"max_pushes must be >= 1 \(got 0\)"),
    ],
)
def test_pagerank_parameters_are_bounded(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidGraphError, match=message):
        personalized_pagerank(chain(), {0: 1.0}, limit=10, **kwargs)  # type: ignore[arg-type]


def test_numpy_integers_are_accepted_as_seeds_and_limits() -> None:
    reached = proximity(chain(), {np.int64(0): np.float32(1.0)}, limit=np.int32(1))  # type: ignore[dict-item,arg-type]
    assert [r.node for r in reached] == [1]


# -- bridge -------------------------------------------------------------------------------


def star() -> LinkGraph:
    """a -> b, a -> c (weight 0.5), d -> a, a -> e; b -> f; g alone."""
    return LinkGraph.from_edges(
        list("abcdefg"),
        [
            ("a", "b", "link", 1.0),
            ("a", "c", "mention", 0.5),
            ("d", "a", "link", 1.0),
            ("a", "e", "link", 1.0),
            ("b", "f", "link", 1.0),
        ],
    )


def test_bridge_ranks_the_heaviest_seeds_matched_neighbours_by_their_match() -> None:
    a, b, c, d, _, f, g = range(7)
    reached = bridge(star(), {a: 2.0, g: 1.0}, {b: 0.5, c: 1.0, d: 0.25, f: 3.0, g: 1.0}, limit=10)
    # e is linked but the query did not find it; f matches best but is two hops away.
    assert [(r.node, r.score) for r in reached] == [(b, 1.0), (c, 1.0), (d, 0.5)]
    by_node = {r.node: r for r in reached}
    assert (by_node[b].path, by_node[b].hops, by_node[b].seed) == ((a, b), 1, a)
    assert by_node[c].via == ("mention",)
    assert by_node[d].directions == (Direction.IN,)


def test_bridge_starts_from_the_heaviest_seed_only_and_leaves_the_others_out() -> None:
    a, b, c, d, e, f, _ = range(7)
    matches = {b: 1.0, c: 1.0, d: 1.0, e: 1.0, f: 1.0}
    assert [r.node for r in bridge(star(), {b: 2.0, a: 1.0}, matches, limit=10)] == [f]
    assert [r.node for r in bridge(star(), {a: 1.0, b: 1.0}, matches, limit=10)] == [d, e, c]
    included = bridge(star(), {a: 1.0, b: 1.0}, matches, limit=10, include_seeds=True)
    assert [r.node for r in included] == [b, d, e, c]


def test_bridge_follows_the_directions_and_types_asked_and_cuts_at_the_limit() -> None:
    a, b, c, d, e, _, _ = range(7)
    matches = {b: 3.0, c: 4.0, d: 2.0, e: 1.0}
    out = bridge(star(), {a: 1.0}, matches, direction="out", limit=10)
    assert [(r.node, r.score) for r in out] == [(b, 3.0), (c, 2.0), (e, 1.0)]
    assert [r.node for r in bridge(star(), {a: 1.0}, matches, direction="in", limit=10)] == [d]
    assert [r.node for r in bridge(star(), {a: 1.0}, matches, types=["link"], limit=2)] == [b, d]
    assert bridge(star(), {a: 1.0}, {}, limit=10) == []
    assert bridge(star(), {}, matches, limit=10) == []


@pytest.mark.parametrize(
    ("matches", "message"),
    [
        ({99: 1.0}, r"matches: a match must be a node index in 0\.\.6 \(got 99\)"),
        ({1: 0.0}, r"matches: the weight of match 1 must be a finite number > 0"),
        ({1: float("inf")}, r"matches: the weight of match 1 must be a finite number > 0"),
    ],
)
def test_bridge_matches_are_checked(matches: dict[int, float], message: str) -> None:
    with pytest.raises(InvalidGraphError, match=message):
        bridge(star(), {0: 1.0}, matches, limit=10)


@given(graphs(), st.data(), directions, type_filters, st.booleans(), st.integers(1, 15))
def test_bridge_matches_the_naive_neighbourhood(
    case: tuple[int, list[Edge]],
    data: st.DataObject,
    direction: Direction,
    types: list[str] | None,
    include_seeds: bool,
    limit: int,
) -> None:
    naive, graph, seeds = drawn(case, data)
    matches = data.draw(seed_maps(naive.n))
    reached = bridge(
        graph,
        seeds,
        matches,
        types=types,
        direction=direction,
        limit=limit,
        include_seeds=include_seeds,
    )
    top = min(seeds, key=lambda s: (-seeds[s], s))
    expected: dict[int, float] = {}
    for neighbour, _, weight, _ in naive.followed(top, direction, types):
        if neighbour in matches and (include_seeds or neighbour not in seeds):
            factor = max(weight, expected.get(neighbour, 0.0))
            expected[neighbour] = factor
    wanted = {v: seeds[top] * factor * matches[v] for v, factor in expected.items()}
    assert [r.node for r in reached] == [v for v, _ in ranking(wanted, limit)]
    for r in reached:
        assert r.score == pytest.approx(wanted[r.node])
        assert (r.seed, r.hops, r.path[-1]) == (top, 1, r.node)
    check_explained(naive, reached, {top: seeds[top]}, direction, types, shortest=False)
