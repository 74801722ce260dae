"""The weight-rule variants: ``default`` is the product's rule, the others are weights."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench.fusion_replay import Replay, evaluate, read_legs
from bench.fusion_variants import RULES, default_rule, fuse_with, main, margins, winner_take_all
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from hsearch.search.fusion import LegHit, adaptive_leg_weights, fuse, noise_confidence
from tests.unit.bench.test_fusion_replay import SETTINGS, record_legs

ids = st.sampled_from([f"d{i}" for i in range(12)])
scores = st.floats(min_value=-50, max_value=50, allow_nan=False)
leg = st.lists(st.builds(LegHit, ids, scores), max_size=12)
weight = st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.95, 1.0])


@given(dense=leg, sparse=leg, w_dense=weight, w_sparse=weight)
def test_default_rule_is_the_products_adaptive_fusion(
    dense: list[LegHit], sparse: list[LegHit], w_dense: float, w_sparse: float
) -> None:
    if not w_dense + w_sparse > 0:
        w_dense = 1.0
    legs, weights = {"dense": dense, "sparse": sparse}, {"dense": w_dense, "sparse": w_sparse}
    expected = [h.id for h in fuse(legs, method="adaptive", weights=weights)]
    assert fuse_with(default_rule, legs, weights) == expected


@given(
    prior=st.floats(min_value=0.01, max_value=0.99),
    c_dense=st.floats(min_value=0.0, max_value=1.0),
    c_sparse=st.floats(min_value=0.0, max_value=1.0),
)
def test_every_rule_gives_weights_that_sum_to_one(
    prior: float, c_dense: float, c_sparse: float
) -> None:
    priors = {"dense": prior, "sparse": 1 - prior}
    for name, rule in RULES.items():
        pi = rule(priors, {"dense": c_dense, "sparse": c_sparse})
        assert set(pi) == {"dense", "sparse"}, name
        assert all(w >= 0 for w in pi.values()), name
        assert math.fsum(pi.values()) == pytest.approx(1.0), name


def test_default_rule_matches_adaptive_leg_weights() -> None:
    dense = [LegHit(f"d{i}", s) for i, s in enumerate([0.9, 0.5, 0.45, 0.4, 0.3])]
    sparse = [LegHit(f"d{i}", s) for i, s in enumerate([30.0, 3.0, 2.0, 1.5, 1.0, 0.5])]
    legs, weights = {"dense": dense, "sparse": sparse}, {"dense": 0.95, "sparse": 0.05}
    confidence = {k: noise_confidence([h.score for h in v]) for k, v in legs.items()}
    assert default_rule(weights, confidence) == pytest.approx(
        adaptive_leg_weights(legs, weights=weights)
    )


def test_winner_take_all_drops_the_leg_without_evidence() -> None:
    prior = {"dense": 0.95, "sparse": 0.05}
    assert winner_take_all(prior, {"dense": 0.3, "sparse": 0.6}) == {"dense": 0.0, "sparse": 1.0}
    assert winner_take_all(prior, {"dense": 0.3, "sparse": 0.4}) == prior  # no evidence
    assert default_rule(prior, {"dense": 0.3, "sparse": 0.6})["dense"] > 0


async def test_margins_agree_with_the_replay(
    sessions: sessionmaker[Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "legs.jsonl"
    await record_legs(sessions, path)
    queries = list(read_legs(path))
    (result,) = evaluate(queries, Replay(settings=SETTINGS))
    ndcg = {mode: m["ndcg@10"] for mode, m in result["modes"].items()}
    expected = ndcg["hybrid"] - max(ndcg["semantic"], ndcg["keyword"])
    assert margins(queries, default_rule, SETTINGS)["tiny"] == pytest.approx(expected)

    assert main([str(path), "--rule", "default", "--rule", "winner-take-all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["default", "winner-take-all"]
    assert "tiny" in lines[0]
