"""The fusion designs: ``default`` is the product's adaptive fusion, the others shares."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench.fusion_replay import Replay, evaluate, read_legs
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker
from tests.unit.bench.test_fusion_replay import SETTINGS, record_legs

from hsearch.search.fusion import LegHit, adaptive_leg_weights, fuse, noise_confidence
from research.fusion_variants import (
    DESIGNS,
    evidence_share,
    fuse_with,
    main,
    margins,
    prior_times_evidence,
    rank_distribution,
    winner_take_all,
)

ids = st.sampled_from([f"d{i}" for i in range(12)])
scores = st.floats(min_value=-50, max_value=50, allow_nan=False)
leg = st.lists(st.builds(LegHit, ids, scores), max_size=12)
weight = st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.95, 1.0])


@given(
    dense=leg,
    sparse=leg,
    w_dense=weight,
    w_sparse=weight,
    k=st.sampled_from([1, 60, 1000]),
)
def test_default_design_is_the_products_adaptive_fusion(
    dense: list[LegHit], sparse: list[LegHit], w_dense: float, w_sparse: float, k: int
) -> None:
    if not w_dense + w_sparse > 0:
        w_dense = 1.0
    legs, weights = {"dense": dense, "sparse": sparse}, {"dense": w_dense, "sparse": w_sparse}
    expected = [h.id for h in fuse(legs, method="adaptive", weights=weights, k=k)]
    assert fuse_with(DESIGNS["default"], legs, weights, k) == expected


@given(
    prior=st.floats(min_value=0.01, max_value=0.99),
    c_dense=st.floats(min_value=0.0, max_value=1.0),
    c_sparse=st.floats(min_value=0.0, max_value=1.0),
)
def test_every_rule_splits_all_of_the_mass(prior: float, c_dense: float, c_sparse: float) -> None:
    priors = {"dense": prior, "sparse": 1 - prior}
    for name, design in DESIGNS.items():
        plain, standout = design.rule(priors, {"dense": c_dense, "sparse": c_sparse})
        assert set(plain) == set(standout) == {"dense", "sparse"}, name
        assert all(w >= 0 for w in [*plain.values(), *standout.values()]), name
        assert math.fsum([*plain.values(), *standout.values()]) == pytest.approx(1.0), name


def test_default_rule_matches_adaptive_leg_weights() -> None:
    dense = [LegHit(f"d{i}", s) for i, s in enumerate([0.9, 0.5, 0.45, 0.4, 0.3])]
    sparse = [LegHit(f"d{i}", s) for i, s in enumerate([30.0, 3.0, 2.0, 1.5, 1.0, 0.5])]
    legs, weights = {"dense": dense, "sparse": sparse}, {"dense": 0.95, "sparse": 0.05}
    confidence = {k: noise_confidence([h.score for h in v]) for k, v in legs.items()}
    plain, standout = prior_times_evidence(weights, confidence)
    pi = adaptive_leg_weights(legs, weights=weights)
    assert {leg: plain[leg] + standout[leg] for leg in pi} == pytest.approx(pi)


def test_rules_differ_where_documented() -> None:
    prior = {"dense": 0.95, "sparse": 0.05}
    confidence = {"dense": 0.3, "sparse": 0.6}  # evidence: dense 0, sparse 0.2
    plain, _ = winner_take_all(prior, confidence)
    assert plain == {"dense": 0.0, "sparse": pytest.approx(0.8)}
    assert evidence_share(prior, confidence)[0]["dense"] == pytest.approx(0.8 * 0.95)
    assert winner_take_all(prior, {"dense": 0.3, "sparse": 0.4}) == (
        prior,
        {"dense": 0, "sparse": 0},
    )
    both = {"dense": 0.9, "sparse": 0.9}  # equal evidence: the prior decides the standout share
    assert prior_times_evidence(prior, both)[1]["dense"] == pytest.approx(0.8 * 0.95)
    assert evidence_share(prior, both)[1]["dense"] == pytest.approx(0.4)


def test_rank_distribution_shares_ranks_between_ties() -> None:
    assert rank_distribution([3.0, 1.0, 3.0], k=1) == pytest.approx([0.4, 0.2, 0.4])


async def test_margins_agree_with_the_replay(
    sessions: sessionmaker[Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "legs.jsonl"
    await record_legs(sessions, path)
    queries = list(read_legs(path))
    (result,) = evaluate(queries, Replay(settings=SETTINGS))
    ndcg = {mode: m["ndcg@10"] for mode, m in result["modes"].items()}
    expected = ndcg["hybrid"] - max(ndcg["semantic"], ndcg["keyword"])
    assert margins(queries, DESIGNS["default"], SETTINGS)["tiny"] == pytest.approx(expected)

    assert main([str(path), "--design", "default", "--design", "posterior-only"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["default", "posterior-only"]
    assert "tiny" in lines[0]

    assert main([str(path), "--design", "default", "--design", "posterior-only", "--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0] == "| design | tiny | prefixes below the better leg |"
    assert [row.split(" | ")[0] for row in table[2:]] == ["| default", "| posterior-only"]
