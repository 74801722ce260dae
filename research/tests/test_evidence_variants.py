"""Evidence transforms: the untransformed variant is the product, the patch is undone."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from bench.fusion_lodo import default_grid, measure
from bench.fusion_replay import QueryLegs, Replay, read_legs, scores_alone
from sqlalchemy.orm import Session, sessionmaker
from tests.unit.bench.test_fusion_replay import SETTINGS, record_legs

from hsearch.search import fusion
from hsearch.types import FusionMethod
from research.evidence_variants import (
    Variant,
    adaptive_grid,
    covered_shares,
    first_keyword_coverage,
    keyword_coverage,
    main,
    measure_variants,
    parse_family,
    patched,
)
from research.leg_signals import Corpus

ADAPTIVE = next(d for d in default_grid() if d.method is FusionMethod.ADAPTIVE)


def test_transforms() -> None:
    assert Variant(ADAPTIVE, "none", math.inf).apply(0.5, "a b c") == 0.5
    assert Variant(ADAPTIVE, "power", 2).apply(0.5, "a") == 0.25
    length = Variant(ADAPTIVE, "length", 4)
    assert length.apply(0.5, "one two three") == 0.5  # shorter than L0: unchanged
    assert length.apply(0.5, "a b c d e f g h") == 0.25  # twice L0: squared
    assert length.apply(0.5, "日本の首都はどこですか") == 0.5  # no spaces: one word
    assert Variant(ADAPTIVE, "length", math.inf).apply(0.5, "a " * 100) == 0.5
    assert parse_family("length:8,inf") == ("length", [8.0, math.inf])
    with pytest.raises(ValueError, match="unknown transform"):
        parse_family("gamma:2")


def test_patch_is_undone() -> None:
    evidence, rank = fusion.leg_evidence, Replay.rank
    with patched(Variant(ADAPTIVE, "power", 2)):
        assert fusion.leg_evidence is not evidence
    assert (fusion.leg_evidence, Replay.rank) == (evidence, rank)


async def test_untransformed_variants_score_as_the_protocol(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = tmp_path / "legs.jsonl"
    await record_legs(sessions, path)
    queries = list(read_legs(path))
    grid = adaptive_grid()  # the designs that read the legs' scores alone
    plain = measure(queries, grid, SETTINGS)
    variants = [Variant(d, "none", math.inf) for d in grid]
    replayed = measure_variants(queries, {("none", math.inf): variants}, SETTINGS, jobs=1)
    assert [replayed.hybrid[v] for v in variants] == [plain.hybrid[d] for d in grid]
    sharp = [Variant(d, "power", 64) for d in grid]
    measure_variants(queries, {("power", 64): sharp}, SETTINGS, jobs=1)
    assert fusion.leg_evidence.__name__ == "leg_evidence"  # restored after measuring


async def test_the_protocol_runs_with_the_transform_fitted_and_fixed(
    sessions: sessionmaker[Session], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "legs.jsonl"
    await record_legs(sessions, path)
    one = path.read_text(encoding="utf-8")
    path.write_text(one + one.replace('"dataset": "tiny"', '"dataset": "twin"'), encoding="utf-8")
    assert main([str(path), "--fit", "length:4,16", "--fixed", "power:2", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    sections = [line for line in out.splitlines() if line.startswith("## ")]
    assert sections == [
        "## none (today's method)",
        "## length fitted over [4.0, 16.0] and none",
        "## power=2 fixed",
    ]
    assert out.count("folds pass.") == 3
    assert "| twin |" in out
    assert "power=2`" in out  # the fixed family's designs name their transform


def test_covered_shares_move_the_keyword_legs_share_to_the_others() -> None:
    plain = {"dense": 0.45, "sparse": 0.05}  # a regime of 0.5, prior 0.9 / 0.1
    assert covered_shares(plain, 0.0) == plain
    half = covered_shares(plain, 0.5)
    assert math.fsum(half.values()) == pytest.approx(0.5)
    assert half["sparse"] == pytest.approx(0.5 * 0.025 / 0.475)
    assert covered_shares(plain, 1.0) == {"dense": pytest.approx(0.5), "sparse": 0.0}
    assert covered_shares({"dense": 0.5}, 1.0) == {"dense": 0.5}  # no keyword leg
    assert covered_shares({"sparse": 0.5}, 1.0) == {"sparse": 0.5}  # nothing to move to


def test_keyword_coverage_reads_the_replayed_query_and_is_undone(tmp_path: Path) -> None:
    regimes, rank = fusion._regimes, Replay.rank
    corpus = Corpus.of(
        [
            {"_id": "a", "title": "", "text": "volcano tourism"},
            {"_id": "b", "title": "", "text": "volcano"},
        ]
    )
    q = QueryLegs(
        dataset="s",
        query_id="1",
        query="volcano tourism",
        qrels={"b": 1.0},
        legs={
            "dense": [("b#0", "b", 0.9), ("a#0", "a", 0.8)],
            "sparse": [("a#0", "a", 2.0), ("b#0", "b", 1.9)],
        },
        dense_scripts=frozenset({"LATIN"}),
    )
    coverage = first_keyword_coverage([q], lambda _: corpus)
    assert coverage == {("s", "1"): 1.0}  # the keyword leg's first holds both words
    prior = {"dense": 0.4, "sparse": 0.6}
    replay = Replay(scores_alone(SETTINGS), fusion="adaptive", weights=prior, k=60)
    assert replay.rank(q, "hybrid")[0] == "a"  # the keyword leg's first, the heavier prior
    with keyword_coverage(coverage):
        assert fusion._regimes is not regimes
        covered = Replay(scores_alone(SETTINGS), fusion="adaptive", weights=prior, k=60)
        assert covered.rank(q, "hybrid")[0] == "b"  # the keyword leg's say is gone
    assert (fusion._regimes, Replay.rank) == (regimes, rank)
