"""Fusion of ranked legs: worked examples, validation, and properties of every method."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from hsearch.errors import InvalidFusionError, InvalidRequestError
from hsearch.search.fusion import (
    DEFAULT_RRF_K,
    MAX_RRF_K,
    MIN_RRF_K,
    FusedHit,
    LegHit,
    adaptive_fusion,
    adaptive_leg_weights,
    fuse,
    fuse_explained,
    leg_evidence,
    min_max_score_fusion,
    noise_confidence,
    normalise_weights,
    reciprocal_rank_fusion,
    script_coverage,
    signal_posterior,
    weighted_score_sum,
)
from hsearch.types import FusionMethod

Legs = dict[str, list[LegHit]]


def hits(*pairs: tuple[str, float]) -> list[LegHit]:
    return [LegHit(i, s) for i, s in pairs]


def ranked(*ids: str) -> list[LegHit]:
    """A leg in rank order with strictly decreasing scores."""
    return [LegHit(i, float(len(ids) - n)) for n, i in enumerate(ids)]


def first_scores(leg: Sequence[LegHit]) -> dict[str, float]:
    """The leg deduplicated as fusion does: the first occurrence of an id counts."""
    first: dict[str, float] = {}
    for h in leg:
        first.setdefault(h.id, h.score)
    return first


def ids_of(fused: Sequence[FusedHit]) -> list[str]:
    return [h.id for h in fused]


def as_tuples(fused: Sequence[FusedHit]) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in fused]


def run(
    method: FusionMethod, legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float]
) -> list[FusedHit]:
    return fuse(legs, method=method, weights=weights)


ALL_METHODS = list(FusionMethod)
SCORE_METHODS = [FusionMethod.SCORE, FusionMethod.ADAPTIVE]


# -- worked examples ----------------------------------------------------------------------


def test_rrf_worked_example() -> None:
    legs = {"dense": ranked("x", "y"), "sparse": ranked("y", "z")}
    fused = reciprocal_rank_fusion(legs, weights={"dense": 1, "sparse": 1}, k=60)
    assert ids_of(fused) == ["y", "x", "z"]
    by_id = {h.id: h for h in fused}
    assert by_id["y"].score == pytest.approx(0.5 / 62 + 0.5 / 61)
    assert by_id["x"].score == pytest.approx(0.5 / 61)
    assert by_id["z"].score == pytest.approx(0.5 / 62)
    assert by_id["y"].ranks == {"dense": 2, "sparse": 1}
    assert by_id["y"].scores == {"dense": 1.0, "sparse": 2.0}
    assert by_id["x"].ranks == {"dense": 1}
    assert by_id["z"].scores == {"sparse": 1.0}


def test_rrf_weights_and_k_change_the_balance() -> None:
    legs = {"dense": ranked("a", "b"), "sparse": ranked("b", "a")}
    assert ids_of(reciprocal_rank_fusion(legs, weights={"dense": 0.7, "sparse": 0.3})) == [
        "a",
        "b",
    ]
    assert ids_of(reciprocal_rank_fusion(legs, weights={"dense": 0.3, "sparse": 0.7})) == [
        "b",
        "a",
    ]
    # equal weights: a perfect tie, broken by id
    fused = reciprocal_rank_fusion(legs, weights={"dense": 1, "sparse": 1}, k=1)
    assert fused[0].score == fused[1].score
    assert ids_of(fused) == ["a", "b"]


def test_rrf_ignores_scores() -> None:
    a = {"dense": hits(("a", 0.1), ("b", 0.9)), "sparse": hits(("c", 5.0))}
    b = {"dense": hits(("a", -7.0), ("b", 100.0)), "sparse": hits(("c", -1.0))}
    weights = {"dense": 0.6, "sparse": 0.4}
    assert as_tuples(reciprocal_rank_fusion(a, weights=weights)) == as_tuples(
        reciprocal_rank_fusion(b, weights=weights)
    )


def test_min_max_worked_example() -> None:
    legs = {
        "dense": hits(("a", 0.9), ("b", 0.5), ("c", 0.1)),
        "sparse": hits(("c", 30.0), ("d", 10.0)),
    }
    fused = min_max_score_fusion(legs, weights={"dense": 3, "sparse": 1})
    by_id = {h.id: h.score for h in fused}
    assert by_id["a"] == pytest.approx(0.75)
    assert by_id["b"] == pytest.approx(0.75 * 0.5)
    assert by_id["c"] == pytest.approx(0.25)
    assert by_id["d"] == pytest.approx(0.0)
    assert ids_of(fused) == ["a", "b", "c", "d"]


def test_min_max_equal_scores_are_all_best() -> None:
    fused = min_max_score_fusion({"s": hits(("b", 2.0), ("a", 2.0))}, weights={"s": 1})
    assert as_tuples(fused) == [("a", 1.0), ("b", 1.0)]


def test_min_max_survives_extreme_scores() -> None:
    legs = {"s": hits(("a", 1.7e308), ("b", 0.0), ("c", -1.7e308))}
    fused = min_max_score_fusion(legs, weights={"s": 1})
    assert as_tuples(fused) == [("a", 1.0), ("b", pytest.approx(0.5)), ("c", 0.0)]


def test_sum_worked_example() -> None:
    # BGE-M3's rule: dense + 0.3 x sparse, on scores that share one scale.
    legs = {
        "dense": hits(("a", 0.80), ("b", 0.70), ("c", 0.60)),
        "sparse": hits(("c", 0.50), ("d", 0.40)),
    }
    fused = weighted_score_sum(legs, weights={"dense": 1.0, "sparse": 0.3})
    by_id = {h.id: h.score for h in fused}
    # weights normalised to 1/1.3 and 0.3/1.3; a leg without the document adds 0
    assert by_id["a"] == pytest.approx(0.80 / 1.3)
    assert by_id["b"] == pytest.approx(0.70 / 1.3)
    assert by_id["c"] == pytest.approx((0.60 + 0.3 * 0.50) / 1.3)
    assert by_id["d"] == pytest.approx(0.3 * 0.40 / 1.3)
    assert ids_of(fused) == ["a", "c", "b", "d"]
    assert fused[1].scores == {"dense": 0.60, "sparse": 0.50}


def test_sum_reads_raw_scores_so_one_legs_scale_matters() -> None:
    legs = {"dense": hits(("a", 0.9), ("b", 0.1)), "sparse": hits(("b", 1.0), ("a", 0.5))}
    weights = {"dense": 0.5, "sparse": 0.5}
    assert ids_of(weighted_score_sum(legs, weights=weights)) == ["a", "b"]
    louder = {**legs, "sparse": hits(("b", 10.0), ("a", 5.0))}
    assert ids_of(weighted_score_sum(louder, weights=weights)) == ["b", "a"]
    # min-max fusion does not care about the scale
    assert ids_of(min_max_score_fusion(legs, weights=weights)) == ids_of(
        min_max_score_fusion(louder, weights=weights)
    )


def test_sum_survives_scores_at_the_float_limit() -> None:
    big = 1.7e308
    legs = {f"leg{i}": hits(("a", big)) for i in range(10)}
    fused = weighted_score_sum(legs, weights=dict.fromkeys(legs, 0.1))
    assert fused[0].score == pytest.approx(big)
    assert math.isfinite(fused[0].score)


def noise_scale(scores: list[float]) -> float:
    """The noise model's scale, as documented: mean excess over the lowest candidate of
    the candidates other than the best and the lowest."""
    low, rest = min(scores), sorted(scores)[1:-1]
    return sum(s - low for s in rest) / len(rest)


def reciprocal_ranks(n: int, k: int = DEFAULT_RRF_K) -> list[float]:
    """RRF's weights of ranks 1..n as a distribution, as documented."""
    raw = [1 / (k + r) for r in range(1, n + 1)]
    return [r / sum(raw) for r in raw]


def test_adaptive_single_leg_mixes_its_posterior_and_its_ranks() -> None:
    scores = [3.0, 1.0, 0.0, -1.0]
    leg = [LegHit(f"d{i}", s) for i, s in enumerate(scores)]
    fused = adaptive_fusion({"only": leg}, weights={"only": 1})
    sigma = noise_scale(scores)  # (2 + 1) / 2
    exps = [math.exp(s / sigma) for s in scores]
    posterior = [e / sum(exps) for e in exps]
    confidence = (1 - math.exp(-4.0 / sigma)) ** 3
    evidence = 2 * confidence - 1
    assert 0 < evidence < 1  # both regimes take part
    expected = [
        (1 - evidence) * r + evidence * p
        for r, p in zip(reciprocal_ranks(4), posterior, strict=True)
    ]
    assert ids_of(fused) == ["d0", "d1", "d2", "d3"]
    assert [h.score for h in fused] == pytest.approx(expected)
    assert math.fsum(h.score for h in fused) == pytest.approx(1.0)


def test_evidence_and_posterior_share_one_noise_scale() -> None:
    # Evidence from the documented formula with the same sigma as the posterior.
    scores = [9.0, 4.0, 3.5, 3.0, 2.0, 1.0, 0.5, 0.0]
    sigma = noise_scale(scores)
    confidence = (1 - math.exp(-(max(scores) - min(scores)) / sigma)) ** (len(scores) - 1)
    assert noise_confidence(scores) == pytest.approx(confidence)
    assert leg_evidence(scores) == pytest.approx(max(0.0, 2 * confidence - 1))
    posterior = signal_posterior(scores)
    assert posterior[0] / posterior[1] == pytest.approx(math.exp((9.0 - 4.0) / sigma))
    assert math.fsum(posterior) == pytest.approx(1.0)


def test_adaptive_without_evidence_is_weighted_rrf() -> None:
    # Evenly spread scores: no standout in either leg, so only the ranks count.
    dense = [LegHit(f"v{i}", 1.0 - 0.01 * i) for i in range(20)]
    sparse = [LegHit(f"v{(7 * i) % 20}", 10.0 - 0.1 * i) for i in range(20)]
    legs, weights = {"dense": dense, "sparse": sparse}, {"dense": 0.7, "sparse": 0.3}
    assert leg_evidence([h.score for h in dense]) == leg_evidence([h.score for h in sparse]) == 0
    for k in (1, 60, 1000):
        fused = adaptive_fusion(legs, weights=weights, k=k)
        rrf = reciprocal_rank_fusion(legs, weights=weights, k=k)
        assert ids_of(fused) == ids_of(rrf)
        # the same scores, up to the normaliser of 20 reciprocal ranks
        z = math.fsum(1 / (k + r) for r in range(1, 21))
        assert [h.score for h in fused] == pytest.approx([h.score / z for h in rrf])


def test_k_matters_only_without_a_standout() -> None:
    standout = [LegHit("best", 40.0)] + [LegHit(f"s{i}", 1.0) for i in range(30)]
    assert leg_evidence([h.score for h in standout]) == 1.0
    legs = {"sparse": standout}
    assert adaptive_fusion(legs, weights={"sparse": 1}, k=1) == adaptive_fusion(
        legs, weights={"sparse": 1}, k=1000
    )
    plain = {  # evenly spread scores: no standout
        "dense": [LegHit(f"v{i}", 1.0 - 0.01 * i) for i in range(20)],
        "sparse": [LegHit(f"v{(7 * i) % 20}", 10.0 - 0.1 * i) for i in range(20)],
    }
    weights = {"dense": 0.6, "sparse": 0.4}
    sharp = adaptive_fusion(plain, weights=weights, k=1)
    damped = adaptive_fusion(plain, weights=weights, k=1000)
    assert sharp[0].score - sharp[-1].score > 10 * (damped[0].score - damped[-1].score)


def test_a_flat_leg_spreads_its_mass_a_peaked_leg_concentrates_it() -> None:
    # A plateau (cosine-like, light-tailed): the best is no further above the rest
    # than the rest are above the lowest.
    flat = [LegHit(f"f{i}", 0.60 - 0.001 * i) for i in range(19)] + [LegHit("low", 0.3)]
    peaked = [LegHit("p0", 12.0)] + [LegHit(f"p{i}", 3.0 - 0.1 * i) for i in range(1, 20)]
    top_flat = adaptive_fusion({"x": flat}, weights={"x": 1})[0].score
    top_peaked = adaptive_fusion({"x": peaked}, weights={"x": 1})[0].score
    assert top_flat < 0.1 < 0.9 < top_peaked


def test_a_lone_standout_above_a_flat_list_takes_all_the_mass() -> None:
    leg = [LegHit("best", 5.0)] + [LegHit(f"d{i}", 1.0) for i in range(5)]
    fused = adaptive_fusion({"x": leg}, weights={"x": 1})
    assert fused[0].id == "best"
    assert fused[0].score == 1.0
    assert leg_evidence([h.score for h in leg]) == 1.0


def test_adaptive_follows_the_leg_with_a_standout_match() -> None:
    # The sparse leg has one candidate far above a flat list; the dense leg is flat.
    sparse = [LegHit("exact", 40.0)] + [LegHit(f"s{i}", 5.0 + 0.01 * i) for i in range(30)]
    dense = [LegHit(f"v{i}", 0.60 - 0.002 * i) for i in range(31)]
    legs = {"dense": dense, "sparse": sparse}
    weights = {"dense": 0.95, "sparse": 0.05}
    pi = adaptive_leg_weights(legs, weights=weights)
    assert pi["sparse"] > 0.9
    assert math.fsum(pi.values()) == pytest.approx(1.0)
    assert adaptive_fusion(legs, weights=weights)[0].id == "exact"
    # rrf with the same weights buries it below the dense leg's top
    assert reciprocal_rank_fusion(legs, weights=weights)[0].id == "v0"


def test_adaptive_keeps_the_configured_weights_without_evidence() -> None:
    dense = [LegHit(f"v{i}", 1.0 - 0.01 * i) for i in range(20)]  # linear: no standout
    sparse = [LegHit(f"s{i}", 10.0 - 0.1 * i) for i in range(20)]
    legs = {"dense": dense, "sparse": sparse}
    assert leg_evidence([h.score for h in dense]) == 0.0
    assert leg_evidence([h.score for h in sparse]) == 0.0
    assert adaptive_leg_weights(legs, weights={"dense": 3, "sparse": 1}) == {
        "dense": pytest.approx(0.75),
        "sparse": pytest.approx(0.25),
    }


def test_adaptive_leg_weights_skip_inactive_legs() -> None:
    legs = {"dense": ranked("a", "b", "c"), "sparse": [], "other": ranked("d")}
    assert adaptive_leg_weights(legs, weights={"dense": 1, "sparse": 1, "other": 0}) == {
        "dense": 1.0
    }


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([], 0.0),
        ([1.0], 0.0),
        ([2.0, 1.0], 0.0),
        ([1.0, 1.0, 1.0, 1.0], 0.0),  # all tied
        ([5.0, 0.0, 0.0, 0.0], 1.0),  # the best alone above a flat list
        ([float(v) for v in range(10, 0, -1)], 0.0),  # evenly spread: no standout
    ],
)
def test_leg_evidence_edge_cases(scores: list[float], expected: float) -> None:
    assert leg_evidence(scores) == expected


def test_leg_evidence_grows_with_the_gap() -> None:
    base = [1.0 + 0.05 * i for i in range(40)]
    values = [leg_evidence([top, *base]) for top in (3.0, 4.0, 6.0, 10.0, 20.0)]
    assert values == sorted(values)
    assert values[0] < 0.5 < values[-1]
    assert values[-1] == pytest.approx(1.0)


def test_leg_evidence_matches_the_formula() -> None:
    scores = [9.0, 4.0, 3.0, 2.5, 1.0]
    spread = 9.0 - 1.0
    rest = ((4.0 - 1.0) + (3.0 - 1.0) + (2.5 - 1.0)) / 3
    confidence = (1 - math.exp(-spread / rest)) ** 4
    assert leg_evidence(scores) == pytest.approx(max(0.0, 2 * confidence - 1))


def test_duplicates_within_a_leg_keep_the_first_occurrence() -> None:
    legs = {"dense": hits(("a", 3.0), ("b", 2.0), ("a", 1.5), ("c", 1.0))}
    for method in ALL_METHODS:
        fused = run(method, legs, {"dense": 1})
        assert sorted(ids_of(fused)) == ["a", "b", "c"]
        by_id = {h.id: h for h in fused}
        assert by_id["a"].ranks == {"dense": 1}
        assert by_id["a"].scores == {"dense": 3.0}
        assert by_id["c"].ranks == {"dense": 3}  # ranks close up after the duplicate


def test_zero_weight_leg_takes_no_part() -> None:
    legs = {"dense": ranked("a", "b"), "sparse": ranked("c", "a")}
    for method in ALL_METHODS:
        fused = run(method, legs, {"dense": 1, "sparse": 0})
        assert ids_of(fused) == ["a", "b"]
        assert all("sparse" not in h.ranks for h in fused)


def test_every_positive_leg_empty_gives_no_hits() -> None:
    for method in ALL_METHODS:
        assert run(method, {"dense": [], "sparse": ranked("a")}, {"dense": 1, "sparse": 0}) == []
        assert run(method, {"dense": [], "sparse": []}, {"dense": 1, "sparse": 1}) == []


def test_degraded_leg_empty_or_missing() -> None:
    full = {"dense": ranked("a", "b"), "sparse": []}
    for method in ALL_METHODS:
        assert run(method, full, {"dense": 0.7, "sparse": 0.3}) == run(
            method, {"dense": ranked("a", "b")}, {"dense": 0.7}
        )


def test_fuse_explained_reports_the_weights_each_leg_carried() -> None:
    legs = {"dense": ranked("a", "b", "c"), "sparse": ranked("c", "d"), "idle": []}
    weights = {"dense": 3.0, "sparse": 1.0, "idle": 5.0}
    for method in (FusionMethod.RRF, FusionMethod.SCORE, FusionMethod.SUM):
        hits, applied = fuse_explained(legs, method=method, weights=weights)
        assert hits == fuse(legs, method=method, weights=weights)
        assert applied == {"dense": 0.75, "sparse": 0.25}  # active legs, normalised
    hits, applied = fuse_explained(legs, method="adaptive", weights=weights)
    assert hits == adaptive_fusion(legs, weights=weights)
    assert applied == adaptive_leg_weights(legs, weights=weights)


def test_fuse_dispatches_and_accepts_values() -> None:
    legs = {"dense": hits(("a", 0.9), ("b", 0.4)), "sparse": hits(("b", 12.0), ("c", 3.0))}
    weights = {"dense": 0.5, "sparse": 0.5}
    assert fuse(legs, method="rrf", weights=weights, k=10) == reciprocal_rank_fusion(
        legs, weights=weights, k=10
    )
    assert fuse(legs, method=FusionMethod.SCORE, weights=weights) == min_max_score_fusion(
        legs, weights=weights
    )
    assert fuse(legs, method="adaptive", weights=weights) == adaptive_fusion(legs, weights=weights)
    assert fuse(legs, method="sum", weights=weights) == weighted_score_sum(legs, weights=weights)


def test_normalise_weights() -> None:
    assert normalise_weights({"a": 3, "b": 1, "c": 0}) == {"a": 0.75, "b": 0.25, "c": 0.0}
    assert normalise_weights({"a": 0.2}) == {"a": 1.0}


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, -1, 1001, 10**9, True, 1.5, "60", None])
def test_k_out_of_range_is_refused(k: object) -> None:
    # The type: ignores below: a k of any type, on purpose (the validation under test).
    for method in ALL_METHODS:
        with pytest.raises(InvalidFusionError, match=r"k: must be an integer between 1 and 1000"):
            fuse({"a": ranked("x")}, method=method, weights={"a": 1}, k=k)  # type: ignore[arg-type]
    with pytest.raises(InvalidFusionError, match="between 1 and 1000"):
        reciprocal_rank_fusion({"a": ranked("x")}, weights={"a": 1}, k=k)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [MIN_RRF_K, 2, 60, MAX_RRF_K])
def test_k_in_range_is_accepted(k: int) -> None:
    assert ids_of(fuse({"a": ranked("x", "y")}, method="rrf", weights={"a": 1}, k=k)) == [
        "x",
        "y",
    ]


@pytest.mark.parametrize(
    ("weight", "pattern"),
    [
        (-0.1, "finite number >= 0"),
        (math.nan, "finite number >= 0"),
        (math.inf, "finite number >= 0"),
        (-math.inf, "finite number >= 0"),
        (True, "must be a number >= 0"),
        ("0.5", "must be a number >= 0"),
        (None, "must be a number >= 0"),
    ],
)
def test_bad_weight_values_are_refused(weight: object, pattern: str) -> None:
    # The type: ignores below: a weight of any type, on purpose (the validation under test).
    for method in ALL_METHODS:
        with pytest.raises(InvalidFusionError, match=pattern) as info:
            fuse(
                {"dense": ranked("a"), "sparse": ranked("b")},
                method=method,
                weights={"dense": 1.0, "sparse": weight},  # type: ignore[dict-item]
            )
        assert "'sparse'" in info.value.message
    with pytest.raises(InvalidFusionError, match=pattern):
        normalise_weights({"x": weight})  # type: ignore[dict-item]


def test_all_zero_weights_are_refused() -> None:
    for method in ALL_METHODS:
        with pytest.raises(InvalidFusionError, match=r"at least one weight must be > 0"):
            fuse({"a": ranked("x"), "b": ranked("y")}, method=method, weights={"a": 0, "b": 0.0})
    with pytest.raises(InvalidFusionError, match="at least one weight must be > 0"):
        normalise_weights({})
    with pytest.raises(InvalidFusionError, match="at least one weight must be > 0"):
        fuse({}, method="rrf", weights={})


def test_weights_for_unknown_legs_are_refused_with_the_allowed_legs() -> None:
    with pytest.raises(InvalidFusionError) as info:
        fuse(
            {"dense": ranked("a"), "sparse": []},
            method="rrf",
            weights={"dense": 1, "sparse": 1, "colbert": 1},
        )
    assert info.value.message == "weights: unknown leg(s) colbert; allowed legs: dense, sparse"
    assert isinstance(info.value, InvalidRequestError)
    assert info.value.status_code == 422
    assert info.value.code == "invalid_fusion"


def test_legs_without_a_weight_are_refused() -> None:
    with pytest.raises(InvalidFusionError) as info:
        fuse({"dense": ranked("a"), "sparse": ranked("b")}, method="rrf", weights={"dense": 1})
    assert info.value.message == (
        "weights: no weight for leg(s) sparse; give one weight >= 0 for each leg: dense, sparse"
    )


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_non_finite_scores_are_refused(score: float) -> None:
    for method in ALL_METHODS:
        with pytest.raises(InvalidFusionError, match=r"hit 'b' of leg 'dense'.*must be finite"):
            fuse({"dense": hits(("a", 1.0), ("b", score))}, method=method, weights={"dense": 1})


def test_malformed_legs_are_refused() -> None:
    # The type: ignores below: malformed legs, on purpose (the validation under test).
    with pytest.raises(InvalidFusionError, match="must hold LegHit items"):
        fuse({"dense": [("a", 1.0)]}, method="rrf", weights={"dense": 1})  # type: ignore[list-item]
    with pytest.raises(InvalidFusionError, match="non-numeric score"):
        fuse({"dense": [LegHit("a", "1")]}, method="rrf", weights={"dense": 1})  # type: ignore[arg-type]
    with pytest.raises(InvalidFusionError, match="leg names must be non-empty strings"):
        fuse({"": ranked("a")}, method="rrf", weights={"": 1})


@pytest.mark.parametrize("method", ["magic", "", "RRF", None])
def test_unknown_method_is_refused_with_the_allowed_methods(method: object) -> None:
    # The type: ignore below: a method of any type, on purpose (the validation under test).
    with pytest.raises(InvalidFusionError) as info:
        fuse({"a": ranked("x")}, method=method, weights={"a": 1})  # type: ignore[arg-type]
    assert info.value.message.startswith("method: must be one of rrf, score, adaptive")


# -- script coverage -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scripts", "expected"),
    [
        ("Who likes tea?", {"LATIN"}, 1.0),
        ("日本で梅雨がないのは北海道とどこか。", {"LATIN"}, 0.0),
        ("日本で梅雨がないのは", {"cjk", "hiragana", "katakana"}, 1.0),
        # Words, not letters: each Han/kana character is a word, a Latin run is one.
        ("Google検索の読みは？", {"LATIN"}, 1 / 7),
        ("RIAIは何の略？", {"LATIN"}, 1 / 5),
        ("ISO/TS 16949 の前身は？", {"LATIN"}, 2 / 6),
        ("Who founded 東京大学?", {"LATIN"}, 2 / 6),
        ("서울 is the capital", {"LATIN"}, 3 / 5),  # Hangul syllables count one by one
        ("\uff21\uff22\uff23", {"LATIN"}, 1.0),  # fullwidth ABC: Latin after NFKC
        ("1990 — 2020!", {"LATIN"}, 1.0),  # no letters at all
        ("", {"LATIN"}, 1.0),
        ("Привет, world", {"LATIN"}, 1 / 2),
        ("Привет,world", {"LATIN"}, 1 / 2),  # a change of script ends a word
        ("हिन्दी and English", {"LATIN"}, 2 / 3),  # vowel signs and virama stay in the word
        ("Tiếng Việt", {"LATIN"}, 1.0),  # NFKC composes; marks never split a word
        ("Ελλάδα", {"GREEK"}, 1.0),
        ("abc", set(), 0.0),
    ],
)
def test_script_coverage(text: str, scripts: set[str], expected: float) -> None:
    assert script_coverage(text, scripts=scripts) == pytest.approx(expected)


# -- properties ----------------------------------------------------------------------------

LEG_NAMES = ["dense", "sparse", "third"]
DOC_IDS = [f"d{i}" for i in range(12)]

scores_st = st.integers(min_value=-1000, max_value=1000).map(float) | st.floats(
    min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False
)


@st.composite
def leg_st(draw: st.DrawFn, *, unique: bool = False, integer_scores: bool = False) -> list[LegHit]:
    n = draw(st.integers(min_value=0, max_value=10))
    if unique:
        ids = draw(st.lists(st.sampled_from(DOC_IDS), min_size=n, max_size=n, unique=True))
    else:
        ids = draw(st.lists(st.sampled_from(DOC_IDS), min_size=n, max_size=n))
    score = st.integers(-1000, 1000).map(float) if integer_scores else scores_st
    return [LegHit(i, draw(score)) for i in ids]


@st.composite
def case_st(
    draw: st.DrawFn, *, unique: bool = False, integer_scores: bool = False
) -> tuple[Legs, dict[str, float]]:
    names = draw(st.lists(st.sampled_from(LEG_NAMES), min_size=1, max_size=3, unique=True))
    legs = {name: draw(leg_st(unique=unique, integer_scores=integer_scores)) for name in names}
    weights = {
        name: draw(st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.7, 1.0, 2.0, 7.5])) for name in names
    }
    if not any(w > 0 for w in weights.values()):
        weights[names[0]] = 1.0
    return legs, weights


def active_ids(legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float]) -> set[str]:
    return {h.id for name, leg in legs.items() if weights[name] > 0 for h in leg}


methods_st = st.sampled_from(ALL_METHODS)


@given(case=case_st(), method=methods_st)
def test_output_is_the_union_of_the_active_legs_once(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    legs, weights = case
    fused = run(method, legs, weights)
    assert len(ids_of(fused)) == len(set(ids_of(fused)))
    assert set(ids_of(fused)) == active_ids(legs, weights)


@given(case=case_st(), method=methods_st)
def test_sorted_by_score_then_id(case: tuple[Legs, dict[str, float]], method: FusionMethod) -> None:
    fused = run(method, *case)
    keys = [(-h.score, h.id) for h in fused]
    assert keys == sorted(keys)
    assert all(math.isfinite(h.score) for h in fused)
    if method is not FusionMethod.SUM:  # the raw scores' sign stays in a sum
        assert all(h.score >= 0 for h in fused)


@given(case=case_st(), method=methods_st)
def test_ranks_and_scores_describe_the_legs(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    legs, weights = case
    for hit in run(method, legs, weights):
        assert set(hit.ranks) == set(hit.scores)
        for name, rank in hit.ranks.items():
            assert weights[name] > 0
            distinct = list(dict.fromkeys(h.id for h in legs[name]))
            assert distinct[rank - 1] == hit.id
            assert hit.scores[name] == first_scores(legs[name])[hit.id]
        for name, leg in legs.items():
            if weights[name] > 0 and any(h.id == hit.id for h in leg):
                assert name in hit.ranks


@given(case=case_st(), method=methods_st, data=st.data())
def test_an_empty_leg_equals_a_missing_leg(
    case: tuple[Legs, dict[str, float]], method: FusionMethod, data: st.DataObject
) -> None:
    legs, weights = case
    extra = data.draw(st.sampled_from([n for n in [*LEG_NAMES, "late"] if n not in legs]))
    with_empty = {**legs, extra: []}
    weights_with_empty = {**weights, extra: data.draw(st.sampled_from([0.0, 0.4, 5.0]))}
    assert run(method, with_empty, weights_with_empty) == run(method, legs, weights)


@given(case=case_st(), method=methods_st)
def test_order_of_the_mapping_does_not_matter(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    legs, weights = case
    reversed_legs = dict(reversed(list(legs.items())))
    reversed_weights = dict(reversed(list(weights.items())))
    assert run(method, reversed_legs, reversed_weights) == run(method, legs, weights)


@given(case=case_st(), method=methods_st, factor=st.sampled_from([0.25, 0.5, 2.0, 1024.0]))
def test_scaling_every_weight_changes_nothing(
    case: tuple[Legs, dict[str, float]], method: FusionMethod, factor: float
) -> None:
    legs, weights = case
    scaled = {name: w * factor for name, w in weights.items()}
    assert run(method, legs, scaled) == run(method, legs, weights)


@given(case=case_st(), method=methods_st, seed=st.integers(0, 2**32 - 1))
def test_renaming_legs_is_symmetric(
    case: tuple[Legs, dict[str, float]], method: FusionMethod, seed: int
) -> None:
    legs, weights = case
    names = list(legs)
    shuffled = names[:]
    random.Random(seed).shuffle(shuffled)
    rename = dict(zip(names, (f"leg-{n}" for n in shuffled), strict=True))
    renamed = run(
        method,
        {rename[n]: leg for n, leg in legs.items()},
        {rename[n]: w for n, w in weights.items()},
    )
    original = run(method, legs, weights)
    assert as_tuples(renamed) == as_tuples(original)
    for a, b in zip(renamed, original, strict=True):
        assert a.ranks == {rename[n]: r for n, r in b.ranks.items()}


@given(leg=leg_st(), weight=st.sampled_from([0.1, 1.0, 3.0]))
def test_rrf_of_one_leg_keeps_its_order(leg: list[LegHit], weight: float) -> None:
    fused = reciprocal_rank_fusion({"only": leg}, weights={"only": weight})
    assert ids_of(fused) == list(dict.fromkeys(h.id for h in leg))


@given(leg=leg_st(integer_scores=True), method=st.sampled_from(SCORE_METHODS))
def test_score_methods_on_one_leg_order_by_score(leg: list[LegHit], method: FusionMethod) -> None:
    # Integer scores: distinct scores stay distinct through the normalisations (scores
    # closer than the float resolution of the leg's spread may tie, then order by id).
    first = first_scores(leg)
    fused = run(method, {"only": leg}, {"only": 1.0})
    assert ids_of(fused) == sorted(first, key=lambda i: (-first[i], i))


@given(leg=leg_st(unique=True).filter(lambda leg: len(leg) >= 2))
def test_one_leg_with_decreasing_scores_keeps_its_order_in_every_method(
    leg: list[LegHit],
) -> None:
    decreasing = [LegHit(h.id, float(len(leg) - n)) for n, h in enumerate(leg)]
    for method in ALL_METHODS:
        assert ids_of(run(method, {"only": decreasing}, {"only": 1})) == [h.id for h in leg]


@given(case=case_st(unique=True), data=st.data())
def test_rrf_moving_a_document_up_never_lowers_its_score(
    case: tuple[Legs, dict[str, float]], data: st.DataObject
) -> None:
    legs, weights = case
    movable = [n for n, leg in legs.items() if len(leg) >= 2]
    assume(movable)
    name = data.draw(st.sampled_from(movable))
    position = data.draw(st.integers(min_value=1, max_value=len(legs[name]) - 1))
    leg = legs[name][:]
    doc = leg[position].id
    leg[position - 1], leg[position] = leg[position], leg[position - 1]
    before = {h.id: h.score for h in reciprocal_rank_fusion(legs, weights=weights)}
    after = {h.id: h.score for h in reciprocal_rank_fusion({**legs, name: leg}, weights=weights)}
    if doc in before:
        assert after[doc] >= before[doc]


@given(case=case_st(), method=methods_st)
def test_a_dominating_document_is_never_below(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    """If x is wherever y is and better there (rank for rrf, score otherwise), x >= y."""
    legs, weights = case
    fused = run(method, legs, weights)
    for x in fused:
        for y in fused:
            if not set(y.ranks) <= set(x.ranks):
                continue
            if method is FusionMethod.RRF:
                dominates = all(x.ranks[n] <= y.ranks[n] for n in y.ranks)
            else:
                dominates = all(x.scores[n] >= y.scores[n] for n in y.ranks)
            if method is FusionMethod.SUM:
                # a missing document counts as 0, so x's other legs must not subtract
                dominates = dominates and all(x.scores[n] >= 0 for n in x.ranks)
            if dominates:
                assert x.score >= y.score


@given(case=case_st(unique=True), seed=st.integers(0, 2**32 - 1))
def test_adaptive_depends_on_scores_not_on_list_order(
    case: tuple[Legs, dict[str, float]], seed: int
) -> None:
    legs, weights = case
    rng = random.Random(seed)
    shuffled = {name: rng.sample(leg, len(leg)) for name, leg in legs.items()}
    expected = adaptive_fusion(legs, weights=weights)
    got = adaptive_fusion(shuffled, weights=weights)
    expected_pairs: list[tuple[str, object]] = [(h.id, pytest.approx(h.score)) for h in expected]
    assert [(h.id, h.score) for h in got] == expected_pairs


@given(case=case_st(), data=st.data())
def test_sum_is_the_weighted_sum_of_the_raw_scores(
    case: tuple[Legs, dict[str, float]], data: st.DataObject
) -> None:
    legs, weights = case
    total = math.fsum(w for name, w in weights.items() if w > 0 and legs[name])
    for hit in weighted_score_sum(legs, weights=weights):
        expected = math.fsum(weights[n] / total * s for n, s in hit.scores.items())
        assert hit.score == pytest.approx(expected, rel=1e-9, abs=1e-9)
    # Scaling every leg's scores by one factor (a power of two: exact) keeps the order,
    # for scores whose weighted products stay normal floats (a subnormal one, such as
    # 5e-324, times a weight below 1 rounds to 0, and scaled first it does not).
    assume(all(h.score == 0 or abs(h.score) > 1e-300 for leg in legs.values() for h in leg))
    factor = data.draw(st.sampled_from([2.0, 4.0, 1024.0]))
    scaled = {n: [LegHit(h.id, h.score * factor) for h in leg] for n, leg in legs.items()}
    assert ids_of(weighted_score_sum(scaled, weights=weights)) == ids_of(
        weighted_score_sum(legs, weights=weights)
    )


@given(case=case_st())
def test_adaptive_scores_are_a_distribution(case: tuple[Legs, dict[str, float]]) -> None:
    fused = adaptive_fusion(case[0], weights=case[1])
    assert all(0.0 <= h.score <= 1.0 for h in fused)
    if fused:
        assert math.fsum(h.score for h in fused) == pytest.approx(1.0)


@given(case=case_st(), method=methods_st)
def test_score_method_scores_are_bounded(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    legs, weights = case
    fused = run(method, legs, weights)
    if method is FusionMethod.SUM:  # a convex combination of raw scores and 0 (missing)
        raw = [h.score for name, leg in legs.items() if weights[name] > 0 for h in leg]
        low, high = min([0.0, *raw]), max([0.0, *raw])
        assert all(low - 1e-9 <= h.score <= high + 1e-9 for h in fused)
        return
    bound = 1.0 if method is not FusionMethod.RRF else 1.0 / (DEFAULT_RRF_K + 1)
    assert all(h.score <= bound + 1e-12 for h in fused)


@given(
    case=case_st(integer_scores=True),
    method=st.sampled_from(SCORE_METHODS),
    scale=st.sampled_from([0.5, 3.0, 1000.0]),
    shift=st.integers(-10_000, 10_000).map(float),
    data=st.data(),
)
def test_score_methods_ignore_a_positive_affine_change_of_a_leg(
    case: tuple[Legs, dict[str, float]],
    method: FusionMethod,
    scale: float,
    shift: float,
    data: st.DataObject,
) -> None:
    legs, weights = case
    name = data.draw(st.sampled_from(list(legs)))
    changed = {**legs, name: [LegHit(h.id, h.score * scale + shift) for h in legs[name]]}
    before = {h.id: h.score for h in run(method, legs, weights)}
    after = {h.id: h.score for h in run(method, changed, weights)}
    assert after.keys() == before.keys()
    for doc, score in before.items():
        assert after[doc] == pytest.approx(score, rel=1e-9, abs=1e-12)


@given(case=case_st(), method=methods_st)
def test_duplicates_equal_their_first_occurrences(
    case: tuple[Legs, dict[str, float]], method: FusionMethod
) -> None:
    legs, weights = case
    deduped = {
        name: [LegHit(i, score) for i, score in first_scores(leg).items()]
        for name, leg in legs.items()
    }
    assert run(method, legs, weights) == run(method, deduped, weights)


@given(case=case_st())
def test_adaptive_leg_weights_are_a_mixture_of_prior_and_evidence(
    case: tuple[Legs, dict[str, float]],
) -> None:
    legs, weights = case
    pi = adaptive_leg_weights(legs, weights=weights)
    active = {n for n, leg in legs.items() if leg and weights[n] > 0}
    assert set(pi) == active
    if not active:
        return
    assert all(0.0 <= w <= 1.0 + 1e-12 for w in pi.values())
    assert math.fsum(pi.values()) == pytest.approx(1.0)
    total = math.fsum(weights[n] for n in active)
    prior = {n: weights[n] / total for n in active}
    evidence = {n: leg_evidence(list(first_scores(legs[n]).values())) for n in active}
    strongest = max(evidence.values())
    support = math.fsum(prior[n] * evidence[n] for n in active)
    expected = {
        n: (1 - strongest) * prior[n]
        + (strongest * prior[n] * evidence[n] / support if support > 0 else 0.0)
        for n in active
    }
    assert pi == {n: pytest.approx(w, abs=1e-12) for n, w in expected.items()}


@given(
    scores=st.lists(st.integers(-1000, 1000).map(float), max_size=30),
    scale=st.sampled_from([0.01, 2.0, 77.0]),
    shift=st.integers(-10_000, 10_000).map(float),
    seed=st.integers(0, 2**32 - 1),
)
def test_leg_evidence_is_bounded_order_free_and_affine_invariant(
    scores: list[float], scale: float, shift: float, seed: int
) -> None:
    value = leg_evidence(scores)
    assert 0.0 <= value <= 1.0
    shuffled = scores[:]
    random.Random(seed).shuffle(shuffled)
    assert leg_evidence(shuffled) == pytest.approx(value, abs=1e-12)
    assert leg_evidence([s * scale + shift for s in scores]) == pytest.approx(value, abs=1e-9)


@given(
    scores=st.lists(
        st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True), max_size=20
    )
)
def test_leg_evidence_and_adaptive_survive_any_finite_scores(scores: list[float]) -> None:
    assert 0.0 <= leg_evidence(scores) <= 1.0
    leg = [LegHit(f"d{i}", s) for i, s in enumerate(scores)]
    for method in ALL_METHODS:
        fused = run(method, {"only": leg}, {"only": 1})
        assert len(fused) == len(leg)
        assert all(math.isfinite(h.score) for h in fused)


@given(text=st.text(max_size=40), scripts=st.sets(st.sampled_from(["LATIN", "CJK", "greek"])))
def test_script_coverage_is_a_share(text: str, scripts: set[str]) -> None:
    value = script_coverage(text, scripts=scripts)
    assert 0.0 <= value <= 1.0
    assert script_coverage(text, scripts={"LATIN", "CJK", "GREEK"}) >= value
