"""What ``adaptive`` fusion reads of the query itself: the keyword leg's coverage and the
query's length (:class:`hsearch.search.fusion.QueryReading`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import InvalidFusionError
from hsearch.search.fusion import (
    NO_READING,
    LegHit,
    QueryReading,
    adaptive_fusion,
    adaptive_leg_weights,
    fuse_explained,
    leg_evidence,
    query_word_count,
)

EVEN = [10.0 - 0.1 * i for i in range(10)]
STANDOUT = [0.95] + [0.50 - 0.01 * i for i in range(9)]
PRIOR = {"dense": 0.45, "sparse": 0.55}


def leg(prefix: str, scores: list[float]) -> list[LegHit]:
    return [LegHit(f"{prefix}{i}", s) for i, s in enumerate(scores)]


def no_standout() -> dict[str, list[LegHit]]:
    """Nothing stands out in either leg; their candidates differ."""
    return {"dense": leg("d", EVEN), "sparse": leg("s", EVEN)}


def test_without_a_reading_adaptive_is_unchanged() -> None:
    legs = {"dense": leg("d", STANDOUT), "sparse": leg("s", EVEN)}
    assert adaptive_fusion(legs, weights=PRIOR, k=1) == adaptive_fusion(
        legs, weights=PRIOR, k=1, reading=NO_READING
    )
    assert adaptive_leg_weights(legs, weights=PRIOR, reading=QueryReading()) == (
        adaptive_leg_weights(legs, weights=PRIOR)
    )


def test_a_keyword_leg_that_holds_the_whole_query_leaves_the_order_to_the_others() -> None:
    legs = no_standout()
    plain = adaptive_fusion(legs, weights=PRIOR, k=1)
    assert plain[0].id == "s0"  # the sparse-leaning prior: the keyword leg's first on top
    whole = QueryReading(coverage={"sparse": 1.0})
    covered = adaptive_fusion(legs, weights=PRIOR, k=1, reading=whole)
    assert [h.id for h in covered[:10]] == [f"d{i}" for i in range(10)]
    assert adaptive_leg_weights(legs, weights=PRIOR, reading=whole) == {
        "dense": pytest.approx(1.0),
        "sparse": 0.0,
    }


def test_coverage_scales_the_keyword_share_where_nothing_stands_out() -> None:
    legs = no_standout()
    for coverage in (0.0, 0.25, 0.5, 0.9):
        pi = adaptive_leg_weights(
            legs, weights=PRIOR, reading=QueryReading(coverage={"sparse": coverage})
        )
        scaled = {"dense": 0.45, "sparse": 0.55 * (1 - coverage)}
        total = math.fsum(scaled.values())
        assert pi == {n: pytest.approx(w / total) for n, w in scaled.items()}


def test_a_keyword_standout_that_holds_the_whole_query_keeps_its_share() -> None:
    legs = {"dense": leg("d", EVEN), "sparse": leg("s", STANDOUT)}
    evidence = leg_evidence(STANDOUT)
    assert 0 < evidence < 1
    assert leg_evidence(EVEN) == 0
    pi = adaptive_leg_weights(legs, weights=PRIOR, reading=QueryReading(coverage={"sparse": 1.0}))
    # All of the no-standout regime goes to dense; the standout regime all to sparse.
    assert pi == {"dense": pytest.approx(1 - evidence), "sparse": pytest.approx(evidence)}


@pytest.mark.parametrize("coverage", [0.25, 0.5, 0.9])
def test_a_keyword_standout_is_discounted_by_its_coverage(coverage: float) -> None:
    # A first candidate that stands out holding a part of the query (a few rare words of
    # a long question) is a standout on that part: its evidence times the coverage.
    legs = {"dense": leg("d", EVEN), "sparse": leg("s", STANDOUT)}
    standout = leg_evidence(STANDOUT) * coverage
    pi = adaptive_leg_weights(
        legs, weights=PRIOR, reading=QueryReading(coverage={"sparse": coverage})
    )
    plain = {"dense": 0.45, "sparse": 0.55 * (1 - coverage)}
    total = math.fsum(plain.values())
    assert pi == {
        "dense": pytest.approx((1 - standout) * plain["dense"] / total),
        "sparse": pytest.approx((1 - standout) * plain["sparse"] / total + standout),
    }
    unread = adaptive_leg_weights(legs, weights=PRIOR)
    assert pi["sparse"] < unread["sparse"]


def test_a_keyword_standout_that_holds_nothing_of_the_query_is_no_standout() -> None:
    legs = {"dense": leg("d", EVEN), "sparse": leg("s", STANDOUT)}
    assert adaptive_fusion(legs, weights=PRIOR, k=1)[0].id == "s0"
    nothing = QueryReading(coverage={"sparse": 0.0})
    # No standout left, and the plain regime keeps the prior (coverage 0 scales nothing).
    assert adaptive_leg_weights(legs, weights=PRIOR, reading=nothing) == {
        "dense": pytest.approx(0.45),
        "sparse": pytest.approx(0.55),
    }
    # The keyword leg then speaks through its ranks alone, as a list in the same order
    # whose first candidate does not stand out.
    fused = adaptive_fusion(legs, weights=PRIOR, k=1, reading=nothing)
    by_rank = adaptive_fusion(
        {"dense": leg("d", EVEN), "sparse": leg("s", EVEN)}, weights=PRIOR, k=1
    )
    assert [h.id for h in fused] == [h.id for h in by_rank]
    assert [h.score for h in fused] == pytest.approx([h.score for h in by_rank])


def test_a_partial_keyword_standout_leaves_the_standout_share_to_the_dense_leg() -> None:
    # Both legs stand out alike; the keyword one holds half of the query.
    legs = {"dense": leg("d", STANDOUT), "sparse": leg("s", STANDOUT)}
    e = leg_evidence(STANDOUT)
    pi = adaptive_leg_weights(legs, weights=PRIOR, reading=QueryReading(coverage={"sparse": 0.5}))
    support = 0.45 * e + 0.55 * e * 0.5
    plain = {"dense": 0.45, "sparse": 0.55 * 0.5}
    total = math.fsum(plain.values())
    assert pi == {
        "dense": pytest.approx((1 - e) * 0.45 / total + e * 0.45 * e / support),
        "sparse": pytest.approx((1 - e) * plain["sparse"] / total + e * 0.55 * e * 0.5 / support),
    }


@pytest.mark.parametrize("coverage", [0.0, 0.3, 1.0])
def test_a_leg_fused_alone_keeps_its_scores_whatever_its_coverage(coverage: float) -> None:
    # Keyword mode, a silenced or degraded dense leg: the coverage weighs legs against
    # each other, so one leg alone fuses as without it (its scores too, for min_score).
    alone: dict[str, list[LegHit]] = {"dense": [], "sparse": leg("s", STANDOUT)}
    reading = QueryReading(coverage={"sparse": coverage})
    assert adaptive_fusion(alone, weights=PRIOR, k=1, reading=reading) == adaptive_fusion(
        alone, weights=PRIOR, k=1
    )
    assert adaptive_leg_weights(alone, weights=PRIOR, reading=reading) == {"sparse": 1.0}


def test_the_length_sharpens_before_the_coverage_discounts() -> None:
    evidence = leg_evidence(STANDOUT)
    reading = QueryReading(coverage={"sparse": 0.5}, words=32, length_words=16)
    assert reading.evidence(evidence, "sparse") == pytest.approx(evidence**2 * 0.5)
    assert reading.evidence(evidence, "dense") == pytest.approx(evidence**2)  # no coverage
    assert reading.evidence(evidence) == pytest.approx(evidence**2)
    assert reading.evidence(0.0, "sparse") == 0.0


def test_every_leg_fully_covered_keeps_the_prior() -> None:
    legs = no_standout()
    full = QueryReading(coverage={"sparse": 1.0, "dense": 1.0})
    assert adaptive_leg_weights(legs, weights=PRIOR, reading=full) == {
        "dense": pytest.approx(0.45),
        "sparse": pytest.approx(0.55),
    }


def test_a_long_query_asks_a_clearer_standout() -> None:
    legs = {"dense": leg("d", EVEN), "sparse": leg("s", STANDOUT)}
    evidence = leg_evidence(STANDOUT)
    assert 0 < evidence < 1
    short = QueryReading(words=8, length_words=16)
    long = QueryReading(words=32, length_words=16)
    assert short.evidence(evidence) == evidence
    assert long.evidence(evidence) == pytest.approx(evidence**2)
    assert QueryReading(words=32).evidence(evidence) == evidence  # length not read
    plain = adaptive_leg_weights(legs, weights=PRIOR, reading=short)
    sharpened = adaptive_leg_weights(legs, weights=PRIOR, reading=long)
    assert sharpened["sparse"] < plain["sparse"]
    assert sharpened["sparse"] == pytest.approx((1 - evidence**2) * 0.55 + evidence**2, abs=1e-12)


def test_the_reading_is_read_by_adaptive_only() -> None:
    legs = no_standout()
    whole = QueryReading(coverage={"sparse": 1.0}, words=40, length_words=4)
    for method in ("rrf", "score", "sum"):
        assert fuse_explained(legs, method=method, weights=PRIOR, reading=whole) == (
            fuse_explained(legs, method=method, weights=PRIOR)
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"coverage": {"sparse": 1.5}}, "coverage: the share of leg 'sparse' must be in"),
        ({"coverage": {"sparse": -0.1}}, "must be in"),
        ({"coverage": {"sparse": math.nan}}, "must be in"),
        ({"coverage": {"sparse": True}}, "must be a number"),
        ({"words": 0}, "words: must be an integer >= 1"),
        ({"length_words": 0}, "length_words: must be an integer >= 1"),
        ({"length_words": 2.5}, "length_words"),
    ],
)
def test_a_bad_reading_is_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidFusionError, match=message):
        QueryReading(**kwargs)  # type: ignore[arg-type]


@given(
    coverage=st.floats(0.0, 1.0),
    words=st.integers(1, 60),
    length=st.one_of(st.none(), st.integers(1, 30)),
    dense=st.lists(st.floats(-100, 100), min_size=1, max_size=12),
    sparse=st.lists(st.floats(-100, 100), min_size=1, max_size=12),
)
def test_the_shares_stay_a_distribution(
    coverage: float, words: int, length: int | None, dense: list[float], sparse: list[float]
) -> None:
    legs = {"dense": leg("d", dense), "sparse": leg("s", sparse)}
    reading = QueryReading(coverage={"sparse": coverage}, words=words, length_words=length)
    pi = adaptive_leg_weights(legs, weights=PRIOR, reading=reading)
    assert all(0.0 <= w <= 1.0 + 1e-12 for w in pi.values())
    assert math.fsum(pi.values()) == pytest.approx(1.0)
    fused = adaptive_fusion(legs, weights=PRIOR, reading=reading)
    assert math.fsum(h.score for h in fused) == pytest.approx(1.0)


def test_query_words_are_what_white_space_separates() -> None:
    assert query_word_count("what is  the role of\tcystic fibrosis") == 7
    assert query_word_count("") == 1
    assert query_word_count("東京の人口は何人ですか") == 1
