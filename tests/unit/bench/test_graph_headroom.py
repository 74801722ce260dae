"""bench.graph_headroom: what the links could lift into the first five, on recorded legs."""

from __future__ import annotations

from bench.fusion_replay import QueryLegs, Replay
from bench.graph_headroom import headroom, neighbours

from hsearch.config import Settings
from hsearch.graph.links import Link

DOCS = [f"d{i}" for i in range(1, 9)]


def query(qrels: dict[str, float]) -> QueryLegs:
    """Both legs rank d1..d8 in order, so the hybrid ranking is d1..d8 too."""
    rows = [(f"{d}#0", d, 1.0 / rank) for rank, d in enumerate(DOCS, start=1)]
    return QueryLegs(
        dataset="set",
        query_id="q",
        query="a question",
        qrels=qrels,
        legs={"dense": rows, "sparse": rows},
        dense_scripts=None,
        keyword_coverage=0.5,
        coverage_recorded=True,
    )


def test_neighbours_follow_links_both_ways() -> None:
    links = neighbours({"d1": (Link("d7"),), "d2": (Link("d7"), Link("d3"))})
    assert links == {"d1": {"d7"}, "d7": {"d1", "d2"}, "d2": {"d7", "d3"}, "d3": {"d2"}}


def test_headroom_counts_the_judged_documents_a_link_could_lift() -> None:
    links = neighbours({"d1": (Link("d7"),), "d3": (Link("d8"),)})
    result = headroom(
        [query({"d1": 1.0, "d7": 1.0, "d8": 1.0})], links, replay=Replay(Settings().search)
    )
    assert result["judged_in_top5"] == 1
    assert result["judged_missing"] == 2
    assert result["missing_at_rank"] == {"6-10": 2}
    # d7 and d8 are both a link away from the first five; only d7 from a judged one.
    assert (result["adjacent"], result["adjacent_to_judged"]) == (2, 1)
    # From the first hit (d1) the best neighbour past rank 5 is d7: judged; rank 5 is not.
    assert result["best_neighbour"] == {
        "from_first": 1,
        "max_rank": 50,
        "queries": 1,
        "judged": 1,
        "rank5_judged": 0,
    }
