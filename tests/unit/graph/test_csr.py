"""The link graph's rows: what a graph keeps, both directions against a naive dict of
links, the two constructors, the keys, the per-type degrees, and invalid input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import InvalidGraphError, InvalidRequestError
from hsearch.graph.csr import FOLLOWED_CACHE, Direction, LinkGraph
from tests.unit.graph.naive import TYPES, Edge, Naive, graphs


def rows_of(graph: LinkGraph, direction: Direction) -> set[tuple[int, int, str, float]]:
    """(node, neighbour, type, weight) of every entry of one direction's rows."""
    (rows,) = graph.adjacencies(direction)
    found: set[tuple[int, int, str, float]] = set()
    for node in range(graph.n):
        neighbours, type_ids, weights = rows.row(node)
        for v, t, w in zip(neighbours.tolist(), type_ids.tolist(), weights.tolist(), strict=True):
            found.add((node, v, graph.types[t], w))
    return found


def array_graph(n: int, edges: list[Edge], *, keys: list[str] | None = None) -> LinkGraph:
    return LinkGraph.from_arrays(
        n,
        [e[0] for e in edges],
        [e[1] for e in edges],
        [TYPES.index(e[2]) for e in edges],
        [e[3] for e in edges],
        types=TYPES,
        keys=keys,
    )


# -- what a graph keeps -------------------------------------------------------------------


def test_a_repeated_link_is_kept_once_with_its_largest_weight() -> None:
    graph = array_graph(3, [(0, 1, "link", 0.5), (0, 1, "link", 2.0), (0, 1, "link", 1.0)])
    assert graph.links == 1
    assert rows_of(graph, Direction.OUT) == {(0, 1, "link", 2.0)}
    assert rows_of(graph, Direction.IN) == {(1, 0, "link", 2.0)}


def test_links_of_two_types_between_the_same_nodes_are_two_links() -> None:
    graph = array_graph(2, [(0, 1, "link", 1.0), (0, 1, "mention", 0.5)])
    assert graph.links == 2
    assert rows_of(graph, Direction.OUT) == {(0, 1, "link", 1.0), (0, 1, "mention", 0.5)}


def test_self_loops_are_dropped() -> None:
    graph = array_graph(2, [(0, 0, "link", 1.0), (1, 0, "link", 1.0)])
    assert graph.links == 1
    assert graph.out_links.degree(0) == 0
    assert graph.back_links.degree(0) == 1


@given(graphs())
def test_both_directions_hold_exactly_the_naive_links(case: tuple[int, list[Edge]]) -> None:
    n, edges = case
    naive = Naive.of(n, edges)
    graph = naive.graph(edges)
    expected = {(s, t, kind, w) for (s, t, kind), w in naive.links.items()}
    assert graph.links == len(naive.links)
    assert rows_of(graph, Direction.OUT) == expected
    assert rows_of(graph, Direction.IN) == {(t, s, kind, w) for s, t, kind, w in expected}
    for rows in (graph.out_links, graph.back_links):
        assert rows.indptr[0] == 0
        assert rows.indptr[-1] == graph.links
        assert np.all(np.diff(rows.indptr) >= 0)
        for node in range(n):
            neighbours, type_ids, _ = rows.row(node)
            # Rows sorted by neighbour, then type.
            pairs = list(zip(neighbours.tolist(), type_ids.tolist(), strict=True))
            assert pairs == sorted(pairs)
            assert rows.strength[node] == pytest.approx(
                float(rows.weights[rows.indptr[node] : rows.indptr[node + 1]].sum())
            )


@given(graphs(), st.data())
def test_gather_reads_the_rows_of_many_nodes_in_order(
    case: tuple[int, list[Edge]], data: st.DataObject
) -> None:
    n, edges = case
    graph = Naive.of(n, edges).graph(edges)
    nodes = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=6)), dtype=np.int64)
    for rows in (graph.out_links, graph.back_links):
        gathered = rows.gather(nodes)
        expected: list[tuple[int, int, int, float]] = []
        for position, node in enumerate(nodes.tolist()):
            neighbours, type_ids, weights = rows.row(node)
            expected += [
                (position, v, t, w)
                for v, t, w in zip(
                    neighbours.tolist(), type_ids.tolist(), weights.tolist(), strict=True
                )
            ]
        got = list(
            zip(
                gathered.origin.tolist(),
                gathered.neighbour.tolist(),
                gathered.type_ids.tolist(),
                gathered.weights.tolist(),
                strict=True,
            )
        )
        assert got == expected
        assert len(gathered) == len(expected)


@given(
    graphs(),
    st.sampled_from(list(Direction)),
    st.one_of(st.none(), st.sets(st.sampled_from([*TYPES, "unused"]))),
)
def test_followed_counts_and_sums_the_links_a_walk_follows(
    case: tuple[int, list[Edge]], direction: Direction, types: set[str] | None
) -> None:
    n, edges = case
    naive = Naive.of(n, edges)
    graph = naive.graph(edges)
    nodes = np.arange(n)
    followed = graph.followed(nodes, direction=direction, type_mask=graph.type_mask(types))
    for node in range(n):
        links = naive.followed(node, direction, types)
        assert followed.degree[node] == len(links)
        assert followed.strength[node] == pytest.approx(sum(w for _, _, w, _ in links))


def test_followed_by_type_is_kept_for_the_next_call_and_the_cache_is_bounded() -> None:
    graph = array_graph(3, [(0, 1, "link", 1.0), (1, 2, "mention", 0.5)])
    mask = graph.type_mask(["mention"])
    first = graph.followed(np.arange(3), direction=Direction.BOTH, type_mask=mask)
    assert first.degree.tolist() == [0, 1, 1]
    # Many type sets: each answer stays right while older ones are evicted.
    for size in range(2 * FOLLOWED_CACHE):
        for direction in Direction:
            names = [TYPES[size % 3], f"t{size}"]
            graph.followed(np.arange(3), direction=direction, type_mask=graph.type_mask(names))
    again = graph.followed(np.arange(3), direction=Direction.BOTH, type_mask=mask)
    assert again.degree.tolist() == [0, 1, 1]
    assert again.strength.tolist() == [0.0, 0.5, 0.5]


def test_a_type_mask_selects_known_names_and_ignores_unknown_ones() -> None:
    graph = array_graph(2, [(0, 1, "link", 1.0)])
    assert graph.type_mask(None) is None
    assert graph.type_mask(["mention", "nope"]).tolist() == [False, True, False]  # type: ignore[union-attr]


def test_the_arrays_cannot_be_written() -> None:
    graph = array_graph(2, [(0, 1, "link", 1.0)])
    for rows in (graph.out_links, graph.back_links):
        for array in (rows.indptr, rows.neighbour, rows.type_ids, rows.weights, rows.strength):
            with pytest.raises(ValueError, match="read-only"):
                array[0] = 0


def test_type_ids_take_one_byte_up_to_256_types_and_two_beyond() -> None:
    small = LinkGraph.from_arrays(2, [0], [1], [255], [1.0], types=[f"t{i}" for i in range(256)])
    large = LinkGraph.from_arrays(2, [0], [1], [256], [1.0], types=[f"t{i}" for i in range(257)])
    assert small.out_links.type_ids.dtype == np.uint8
    assert large.out_links.type_ids.dtype == np.uint16
    assert large.types[int(large.out_links.type_ids[0])] == "t256"


def test_nbytes_counts_the_arrays_and_the_keys() -> None:
    edges = [(0, 1, "link", 1.0), (1, 2, "link", 1.0)]
    plain = array_graph(3, edges)
    keyed = array_graph(3, edges, keys=["a", "b", "c"])
    arrays = sum(
        a.nbytes
        for rows in (plain.out_links, plain.back_links)
        for a in (rows.indptr, rows.neighbour, rows.type_ids, rows.weights, rows.strength)
    )
    assert plain.nbytes == arrays
    assert keyed.nbytes > plain.nbytes


def test_an_empty_graph() -> None:
    graph = LinkGraph.from_arrays(0, [], [], [], [], types=[])
    assert (graph.n, graph.links) == (0, 0)
    assert graph.out_links.indptr.tolist() == [0]
    no_links = LinkGraph.from_edges(["a", "b"], [])
    assert (no_links.n, no_links.links, no_links.types) == (2, 0, ())


# -- from_edges and keys ------------------------------------------------------------------


def test_from_edges_maps_keys_drops_unknown_ends_and_sorts_types() -> None:
    graph = LinkGraph.from_edges(
        ["a", "b", "c"],
        [
            ("a", "b", "mention", 0.5),
            ("b", "c", "link", 1.0),
            ("a", "x", "link", 1.0),  # x is no document of the graph
            ("y", "c", "title_mention", 1.0),
            ("c", "c", "link", 1.0),
        ],
    )
    assert graph.types == ("link", "mention")
    assert graph.links == 2
    assert rows_of(graph, Direction.OUT) == {(0, 1, "mention", 0.5), (1, 2, "link", 1.0)}
    assert graph.keys == ("a", "b", "c")
    assert graph.index_of("b") == 1
    assert graph.index_of("x") is None
    assert graph.key_of(2) == "c"


@given(graphs())
def test_from_edges_and_from_arrays_build_the_same_graph(case: tuple[int, list[Edge]]) -> None:
    n, edges = case
    keys = [f"doc-{i}" for i in range(n)]
    by_edges = LinkGraph.from_edges(keys, [(keys[s], keys[t], k, w) for s, t, k, w in edges])
    by_arrays = Naive(n, {}).graph(edges)
    for direction in (Direction.OUT, Direction.IN):
        assert rows_of(by_edges, direction) == rows_of(by_arrays, direction)


def test_a_graph_without_keys_cannot_name_its_nodes() -> None:
    graph = array_graph(2, [(0, 1, "link", 1.0)])
    assert graph.keys is None
    assert graph.index_of("a") is None
    with pytest.raises(InvalidGraphError, match="without keys"):
        graph.key_of(0)


# -- invalid input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": -1}, r"n must be an integer in 0\.\."),
        ({"n": True}, r"n must be an integer"),
        ({"sources": [0, 5]}, r"sources must be node indices in 0\.\.2 \(got 5\)"),
        ({"targets": [1, -1]}, r"targets must be node indices in 0\.\.2 \(got -1\)"),
        ({"type_ids": [0, 3]}, r"type_ids must be type ids in 0\.\.2 \(got 3\)"),
        ({"sources": [0]}, r"one entry per link \(got lengths 1, 2, 2, 2\)"),
        ({"sources": [0.0, 1.0]}, r"sources must hold integers"),
        ({"sources": [[0, 1]]}, r"sources must be a one-dimensional array"),
        ({"weights": [1.0, 0.0]}, r"weights must be finite numbers > 0 .*for link 1"),
        ({"weights": [1.0, -2.0]}, r"weights must be finite numbers > 0"),
        ({"weights": [float("nan"), 1.0]}, r"weights must be finite numbers > 0 .*link 0"),
        ({"weights": [1e39, 1.0]}, r"weights must be finite numbers > 0 \(as float32"),
        ({"weights": [1e-50, 1.0]}, r"weights must be finite numbers > 0 \(as float32"),
        ({"weights": ["a", "b"]}, r"weights must be a one-dimensional array of numbers"),
        ({"types": ["link", "link", "x"]}, r"types must be distinct \(repeated: 'link'\)"),
        ({"types": ["link", "", "x"]}, r"types must be non-empty strings"),
        ({"keys": ["a", "b"]}, r"keys must name each of the 3 nodes once \(got 2 keys\)"),
        ({"keys": ["a", "b", "a"]}, r"keys must be distinct \('a' names nodes 0 and 2\)"),
        ({"keys": ["a", "b", 3]}, r"keys must be strings"),
    ],
)
def test_from_arrays_refuses_invalid_input_and_says_what_is_allowed(
    kwargs: dict[str, object], message: str
) -> None:
    arguments: dict[str, object] = {
        "n": 3,
        "sources": [0, 1],
        "targets": [1, 2],
        "type_ids": [0, 1],
        "weights": [1.0, 0.5],
        "types": ["link", "mention", "x"],
        "keys": None,
    } | kwargs
    with pytest.raises(InvalidGraphError, match=message) as raised:
        LinkGraph.from_arrays(
            arguments.pop("n"),  # type: ignore[arg-type]
            arguments.pop("sources"),  # type: ignore[arg-type]
            arguments.pop("targets"),  # type: ignore[arg-type]
            arguments.pop("type_ids"),  # type: ignore[arg-type]
            arguments.pop("weights"),  # type: ignore[arg-type]
            **arguments,  # type: ignore[arg-type]
        )
    assert isinstance(raised.value, InvalidRequestError)
    assert raised.value.code == "invalid_graph"


def test_type_ids_need_types() -> None:
    with pytest.raises(InvalidGraphError, match=r"type ids in 0\.\.0"):
        LinkGraph.from_arrays(2, [0], [1], [1], [1.0], types=[])
    with pytest.raises(InvalidGraphError, match="types must name the link types"):
        LinkGraph.from_arrays(2, [0], [1], [0], [1.0], types=[])


@pytest.mark.parametrize(
    ("edge", "message"),
    [
        (("a", "b", "", 1.0), r"edge 0: the type must be a non-empty string"),
        (("a", "b", "link", 0), r"edge 0: the weight must be a finite number > 0 \(got 0\)"),
        (("a", "b", "link", float("inf")), r"edge 0: the weight must be a finite number > 0"),
        (("a", "b", "link", True), r"edge 0: the weight must be a finite number > 0"),
        (("a", "b", "link", "1"), r"edge 0: the weight must be a finite number > 0"),
    ],
)
def test_from_edges_refuses_invalid_edges(edge: tuple[object, ...], message: str) -> None:
    with pytest.raises(InvalidGraphError, match=message):
        LinkGraph.from_edges(["a", "b"], [edge])  # type: ignore[list-item]
