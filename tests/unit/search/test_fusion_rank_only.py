"""Legs whose scores are no match with the query (``rank_only``: the graph leg, seeded
by the other legs' hits): adaptive fusion reads no standout in them, sum fusion reads
them rescaled; rrf and score fusion read them as any leg."""

from __future__ import annotations

import pytest

from hsearch.search.fusion import LegHit, fuse_explained
from hsearch.types import FusionMethod

# The graph leg's best stands far out: proximity to the top seed, not a match.
GRAPH = [LegHit("g1", 5.0), *(LegHit(f"n{i}", 0.1) for i in range(20))]
# The dense leg's scores are flat: nothing stands out.
DENSE = [LegHit(f"d{i}", 0.5 - i * 0.001) for i in range(20)]
WEIGHTS = {"dense": 0.9, "graph": 0.1}


def fused(
    method: FusionMethod, *, rank_only: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, float]]:
    hits, applied = fuse_explained(
        {"dense": DENSE, "graph": GRAPH}, method=method, weights=WEIGHTS, rank_only=rank_only
    )
    return [h.id for h in hits], applied


def test_adaptive_reads_no_standout_in_a_rank_only_leg() -> None:
    order, applied = fused(FusionMethod.ADAPTIVE)
    # Read as a match, the graph leg's standout takes over the query.
    assert order[0] == "g1"
    assert applied["graph"] > 0.5
    order, applied = fused(FusionMethod.ADAPTIVE, rank_only=("graph",))
    assert applied == pytest.approx({"dense": 0.9, "graph": 0.1})
    assert order[0] == "d0"
    assert order.index("g1") > 0


def test_sum_reads_a_rank_only_leg_rescaled() -> None:
    def order(scale: float, rank_only: tuple[str, ...]) -> list[str]:
        graph = [LegHit(h.id, h.score * scale) for h in GRAPH]
        hits, _ = fuse_explained(
            {"dense": DENSE, "graph": graph},
            method=FusionMethod.SUM,
            weights=WEIGHTS,
            rank_only=rank_only,
        )
        return [h.id for h in hits]

    # Raw, the graph leg's scale decides; rescaled, its scale does not matter.
    assert order(1.0, ()) != order(1000.0, ())
    assert order(1.0, ("graph",)) == order(1000.0, ("graph",))


@pytest.mark.parametrize("method", [FusionMethod.RRF, FusionMethod.SCORE])
def test_rank_and_score_fusion_read_a_rank_only_leg_as_any(method: FusionMethod) -> None:
    assert fused(method) == fused(method, rank_only=("graph",))
