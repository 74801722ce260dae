"""The graph leg's seeds: each leg's first documents, 1 / rank each, summed over legs."""

from __future__ import annotations

import pytest

from hsearch.graph.source import seed_weights
from hsearch.vectorstore.protocol import StoredHit


def chunk(document: str, n: int = 0) -> StoredHit:
    return StoredHit(f"{document}-{n}", 1.0, {"document_id": document})


def test_seeds_are_each_legs_first_documents_weighed_by_their_rank() -> None:
    earlier = {
        # Two chunks of one document count once, at the rank of the first.
        "dense": (chunk("a"), chunk("a", 1), chunk("b"), chunk("c"), chunk("d")),
        "sparse": (chunk("b"), chunk("e")),
    }
    assert seed_weights(earlier, per_leg=3) == pytest.approx(
        {"a": 1.0, "b": 0.5 + 1.0, "c": 1 / 3, "e": 0.5}
    )


def test_no_hits_no_seeds() -> None:
    assert seed_weights({}, per_leg=10) == {}
    assert seed_weights({"dense": (StoredHit("x", 1.0, {}),)}, per_leg=10) == {}
