"""Leave-one-dataset-out selection of a fusion default, on synthetic legs whose answer
is known."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from bench.fusion_lodo import (
    SIMPLICITY,
    TOLERANCE,
    Legs,
    Table,
    bootstrap_interval,
    current_default,
    default_grid,
    leave_one_out,
    main,
    measure,
    per_query_margins,
    select,
    simplicity,
)
from bench.fusion_replay import Replay, evaluate, read_legs

from hsearch.config import SearchSettings
from hsearch.search.fusion import leg_evidence
from hsearch.types import FusionDefault, FusionMethod

RRF_DENSE = FusionDefault.of("rrf", {"dense": 0.7, "sparse": 0.3})
RRF_SPARSE = FusionDefault.of("rrf", {"dense": 0.3, "sparse": 0.7})
SCORE_DENSE = FusionDefault.of("score", {"dense": 0.7, "sparse": 0.3})
SCORE_SPARSE = FusionDefault.of("score", {"dense": 0.3, "sparse": 0.7})
ADAPTIVE = FusionDefault.of("adaptive", {"dense": 0.5, "sparse": 0.5})
DESIGNS = [RRF_DENSE, RRF_SPARSE, SCORE_DENSE, SCORE_SPARSE, ADAPTIVE]

# A leg whose best candidate stands out (far above an even list) and one without.
STANDOUT = [0.95] + [0.50 - 0.01 * i for i in range(9)]
EVEN = [10.0 - 0.1 * i for i in range(10)]


def record(
    dataset: str, qid: str, *, standout: str, coverage: float | None = None
) -> dict[str, object]:
    """One query whose relevant document is the first candidate of the ``standout`` leg
    only; the other leg's evenly scored list starts with a wrong document. A fusion that
    follows the leg that stands out finds it; a fixed weighting finds it only when it
    favours that leg."""
    other = "sparse" if standout == "dense" else "dense"
    scale = 20.0 if standout == "sparse" else 1.0  # BM25-like scores on the sparse side
    rows: dict[str, list[tuple[str, str, float]]] = {
        standout: [(f"{qid}-r", "relevant", STANDOUT[0] * scale)]
        + [
            (f"{qid}-{standout}{i}", f"{standout}-doc{i}", s * scale)
            for i, s in enumerate(STANDOUT[1:])
        ],
        other: [(f"{qid}-{other}{i}", f"{other}-doc{i}", s) for i, s in enumerate(EVEN)],
    }
    return {
        "dataset": dataset,
        "query_id": qid,
        "query": "a question",
        "qrels": {"relevant": 1},
        "candidates": 10,
        "dense_scripts": None,
        "encoder": "offline",
        # A file recorded before the coverage was has no such key.
        **({} if coverage is None else {"keyword_coverage": coverage}),
        "legs": rows,
    }


def write_legs(
    path: Path, datasets: dict[str, str], queries: int = 3, coverage: float | None = None
) -> Path:
    with path.open("w", encoding="utf-8") as out:
        for name, standout in datasets.items():
            for n in range(queries):
                line = record(name, f"{name}-{n}", standout=standout, coverage=coverage)
                print(json.dumps(line), file=out)
    return path


def test_the_synthetic_legs_are_what_they_claim() -> None:
    assert leg_evidence(STANDOUT) > 0.99
    assert leg_evidence(EVEN) == 0.0


def test_lodo_chooses_the_design_that_follows_the_standout(tmp_path: Path) -> None:
    # Two sets where dense must win, two where sparse must: whatever is left out, the
    # other three contain both kinds, and only adaptive passes them all.
    path = write_legs(
        tmp_path / "legs.jsonl",
        {"d1": "dense", "d2": "dense", "s1": "sparse", "s2": "sparse"},
    )
    table = measure(list(read_legs(path)), DESIGNS, SearchSettings())
    assert table.legs["d1"] == Legs(3, 1.0, 0.0)
    assert table.legs["s1"] == Legs(3, 0.0, 1.0)
    assert table.hybrid[ADAPTIVE] == dict.fromkeys(["d1", "d2", "s1", "s2"], 1.0)
    assert table.hybrid[RRF_DENSE] == {"d1": 1.0, "d2": 1.0, "s1": 0.0, "s2": 0.0}
    folds = leave_one_out(table)
    assert [f.dataset for f in folds] == ["d1", "d2", "s1", "s2"]
    for fold in folds:
        assert fold.choice.design == ADAPTIVE
        assert (fold.hybrid, fold.margin, fold.passed) == (1.0, 0.0, True)
    chosen = select(table, list(table.legs))
    assert (chosen.design, chosen.worst, chosen.mean, chosen.tied) == (ADAPTIVE, 0.0, 0.0, 1)


def test_lodo_exposes_a_choice_that_only_fits_the_training_sets(tmp_path: Path) -> None:
    # With one sparse set, leaving it out trains on dense sets only: the simplest design
    # that passes them (rrf leaning dense) is chosen and fails the set left out.
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "d2": "dense", "s1": "sparse"})
    table = measure(list(read_legs(path)), DESIGNS, SearchSettings())
    folds = {f.dataset: f for f in leave_one_out(table)}
    assert folds["s1"].choice.design == RRF_DENSE
    assert folds["s1"].choice.tied == 3, "rrf, score and adaptive all pass d1 and d2"
    assert (folds["s1"].margin, folds["s1"].passed) == (-1.0, False)
    assert folds["d1"].choice.design == folds["d2"].choice.design == ADAPTIVE
    assert folds["d1"].passed
    assert folds["d2"].passed


def table_of(margins: dict[FusionDefault, dict[str, float]]) -> Table:
    """A table whose better single leg scores 0.5 on every set: hybrid = 0.5 + margin."""
    names = next(iter(margins.values()))
    return Table(
        legs={n: Legs(10, 0.5, 0.4) for n in names},
        hybrid={d: {n: 0.5 + m for n, m in by_set.items()} for d, by_set in margins.items()},
    )


def test_select_maximises_the_worst_margin_first() -> None:
    table = table_of(
        {
            RRF_DENSE: {"a": 0.05, "b": -0.01},  # better mean, worse worst case
            ADAPTIVE: {"a": 0.0, "b": 0.0},
        }
    )
    assert select(table, ["a", "b"]).design == ADAPTIVE
    assert select(table, ["a"]).design == RRF_DENSE


def test_select_takes_the_better_mean_among_the_safe() -> None:
    table = table_of(
        {
            RRF_DENSE: {"a": -0.001, "b": 0.0},
            ADAPTIVE: {"a": 0.0, "b": 0.03},  # worst within tolerance, mean far better
        }
    )
    assert select(table, ["a", "b"]).design == ADAPTIVE


def test_select_prefers_the_simpler_method_within_the_tolerance() -> None:
    close = TOLERANCE / 2
    table = table_of(
        {
            ADAPTIVE: {"a": close, "b": close + 0.001},
            SCORE_DENSE: {"a": 0.0, "b": 0.001},
            RRF_DENSE: {"a": 0.0, "b": 0.0},
        }
    )
    choice = select(table, ["a", "b"])
    assert choice.design == RRF_DENSE
    assert choice.tied == 3
    assert SIMPLICITY[FusionMethod.RRF] < SIMPLICITY[FusionMethod.SCORE]
    assert SIMPLICITY[FusionMethod.SCORE] < SIMPLICITY[FusionMethod.SUM]
    assert SIMPLICITY[FusionMethod.SUM] < SIMPLICITY[FusionMethod.ADAPTIVE]
    # Beyond the tolerance the better design wins, however complex.
    table = table_of({ADAPTIVE: {"a": 0.003, "b": 0.003}, RRF_DENSE: {"a": 0.0, "b": 0.0}})
    assert select(table, ["a", "b"]).design == ADAPTIVE
    # Within one method: the customary k over a fitted one, then the better worst
    # margin, then the better mean.
    fitted = FusionDefault.of("rrf", {"dense": 0.3, "sparse": 0.7}, k=20)
    table = table_of({RRF_DENSE: {"a": 0.0, "b": 0.0}, fitted: {"a": 0.0015, "b": 0.0015}})
    assert select(table, ["a", "b"]).design == RRF_DENSE
    assert simplicity(fitted) == (0, 0.0, 1)
    assert simplicity(RRF_DENSE) == (0, 0.0, 0)
    assert simplicity(FusionDefault.of("score", {"dense": 1})) == (1, 0.0, 0), "score reads no k"
    table = table_of({RRF_DENSE: {"a": 0.0, "b": 0.0}, RRF_SPARSE: {"a": 0.001, "b": 0.001}})
    assert select(table, ["a", "b"]).design == RRF_SPARSE


def test_leave_one_out_needs_two_datasets() -> None:
    with pytest.raises(ValueError, match="at least 2 datasets"):
        leave_one_out(table_of({ADAPTIVE: {"a": 0.0}}))


def test_the_grid_is_what_the_product_runs() -> None:
    grid = default_grid()
    assert len(grid) == len(set(grid)), "no design twice"
    assert {d.method for d in grid} == set(FusionMethod)
    assert FusionDefault.of("sum", {"dense": 1.0, "sparse": 0.3}) in grid, "BGE-M3's rule"
    assert FusionDefault.of("rrf", {"dense": 0.7, "sparse": 0.3}, 60) in grid
    assert FusionDefault.of("adaptive", {"dense": 0.95, "sparse": 0.05}, 60) in grid


def test_a_fold_scores_what_the_replay_scores(tmp_path: Path) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=2)
    queries = list(read_legs(path))
    table = measure(queries, DESIGNS, SearchSettings())
    for design in DESIGNS:
        replay = Replay(
            settings=SearchSettings(),
            encoder=design,  # what adaptive reads of the query: the design's own
            fusion=design.method.value,
            weights={leg.value: w for leg, w in design.weights},
            k=design.k,
        )
        for r in evaluate(queries, replay):
            assert table.hybrid[design][r["dataset"]] == r["modes"]["hybrid"]["ndcg@10"]
            assert table.legs[r["dataset"]].dense == r["modes"]["semantic"]["ndcg@10"]


def test_parallel_measurement_equals_the_serial_one(tmp_path: Path) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=2)
    queries = list(read_legs(path))
    designs = [*DESIGNS, FusionDefault.of("rrf", {"dense": 0.7, "sparse": 0.3}, 20)]
    assert measure(queries, designs, SearchSettings(), jobs=2) == measure(
        queries, designs, SearchSettings()
    )


def run_main(args: Sequence[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*args, "--quiet"]) == 0
    return capsys.readouterr().out


def test_main_reports_the_folds_and_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_legs(
        tmp_path / "legs.jsonl",
        {"d1": "dense", "d2": "dense", "s1": "sparse", "s2": "sparse"},
        queries=2,
    )
    report = json.loads(run_main([str(path), "--json"], capsys))
    assert [f["dataset"] for f in report["folds"]] == ["d1", "d2", "s1", "s2"]
    assert all(f["pass"] for f in report["folds"])
    fold = report["folds"][2]
    assert fold["best_leg"] == "sparse"
    assert (fold["hybrid"], fold["dense"], fold["sparse"], fold["margin"]) == (1.0, 0.0, 1.0, 0.0)
    default = report["default"]
    assert default["method"] == "adaptive"
    assert default["margins"] == dict.fromkeys(["d1", "d2", "s1", "s2"], 0.0)
    # Recorded without the keyword coverage: the designs that read it are left out.
    assert len(report["designs"]) == len([d for d in default_grid() if not d.keyword_coverage])
    text = run_main([str(path)], capsys)
    assert "left out" in text
    assert "candidate default" in text
    assert default["design"] in text
    markdown = run_main([str(path), "--markdown"], capsys)
    assert "| s1 | 2 | `adaptive dense=0.5,sparse=0.5 k=60` | 1.0000 | 0.0000 | **1.0000** |" in (
        markdown
    )
    assert "| **`adaptive" in markdown
    assert "| `rrf dense=0.7,sparse=0.3 k=60` |" in markdown


def test_main_refuses_a_single_dataset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=1)
    for args in (["--dataset", "d1"], ["--dataset", "d1", "--dataset", "nope"]):
        with pytest.raises(SystemExit) as exit_info:
            main([str(path), "--quiet", *args])
        assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "at least 2 datasets" in err
    assert "--dataset: not in" in err
    assert "nope" in err


def test_main_keeps_the_datasets_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sets = {"d1": "dense", "d2": "dense", "s1": "sparse"}
    path = write_legs(tmp_path / "legs.jsonl", sets, queries=1)
    report = json.loads(
        run_main([str(path), "--json", "--dataset", "d1", "--dataset", "s1"], capsys)
    )
    assert [f["dataset"] for f in report["folds"]] == ["d1", "s1"]


def test_bootstrap_interval_holds_the_mean_and_widens_with_spread() -> None:
    assert bootstrap_interval([0.25] * 50) == (0.25, 0.25)
    narrow = bootstrap_interval([0.0, 0.02] * 50)
    wide = bootstrap_interval([-1.0, 1.02] * 50)
    assert narrow[0] < 0.01 < narrow[1]
    assert wide[0] < 0.01 < wide[1]
    assert wide[1] - wide[0] > 10 * (narrow[1] - narrow[0])
    assert bootstrap_interval([0.0, 0.02] * 50) == narrow  # seeded: reproducible
    with pytest.raises(ValueError, match="at least one query"):
        bootstrap_interval([])


def test_per_query_margins_are_hybrid_minus_the_better_leg(tmp_path: Path) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense"}, queries=3)
    queries = list(read_legs(path))
    # RRF favouring the sparse leg ranks the sparse leg's wrong first candidate first:
    # below the dense leg, which finds the relevant document first, on every query.
    margins = per_query_margins(queries, RRF_SPARSE, "dense", SearchSettings())
    assert len(margins) == 3
    assert all(m < 0 for m in margins)
    assert per_query_margins(queries, ADAPTIVE, "dense", SearchSettings()) == [0.0] * 3


def test_main_reports_an_interval_per_left_out_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=2)
    report = json.loads(run_main([str(path), "--json"], capsys))
    for fold in report["folds"]:
        low, high = fold["margin_interval"]
        assert low <= fold["margin"] <= high
    assert "95% interval" in run_main([str(path), "--markdown"], capsys)


def test_the_current_default_is_reported_per_set_with_its_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_legs(
        tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=2, coverage=0.5
    )
    queries = list(read_legs(path))
    table = measure(queries, DESIGNS, SearchSettings())
    rows = current_default(queries, table, SearchSettings())
    replay = evaluate(queries, Replay(settings=SearchSettings()))
    assert [r.dataset for r in rows] == ["d1", "s1"]
    for row, result in zip(rows, replay, strict=True):
        assert row.hybrid == result["modes"]["hybrid"]["ndcg@10"]
        assert row.design == result["fusion_setting"]
        assert row.interval[0] <= row.margin <= row.interval[1]
    markdown = run_main([str(path), "--markdown"], capsys)
    assert f"The default today (`{rows[0].design}`)" in markdown
    assert "| d1 | 2 |" in markdown
    # Legs recorded without the coverage the default reads: its table is left out.
    older = write_legs(tmp_path / "older.jsonl", {"d1": "dense", "s1": "sparse"}, queries=2)
    assert main([str(older), "--markdown"]) == 0
    out, err = capsys.readouterr()
    assert "The default today" not in out
    assert "its table is left out" in err


def test_the_markdown_says_whether_the_default_is_the_rules_choice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_legs(
        tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse", "s2": "sparse"}, queries=2
    )
    chosen = json.loads(run_main([str(path), "--json"], capsys))["default"]
    assert chosen["design"] != "rrf dense=0.7,sparse=0.3 k=60"
    monkeypatch.setenv("HSEARCH_SEARCH__FUSION", "rrf")
    markdown = run_main([str(path), "--markdown"], capsys)
    assert "**The default (`rrf dense=0.7,sparse=0.3 k=60`) is not the rule's choice.**" in (
        markdown
    )
    method = chosen["method"]
    monkeypatch.setenv("HSEARCH_SEARCH__FUSION", method)
    weights = "ADAPTIVE_WEIGHTS" if method == "adaptive" else "RRF_WEIGHTS"
    monkeypatch.setenv(f"HSEARCH_SEARCH__{weights}", json.dumps(chosen["weights"]))
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_K", str(chosen["k"]))
    monkeypatch.setenv("HSEARCH_SEARCH__KEYWORD_COVERAGE", str(chosen["keyword_coverage"]))
    monkeypatch.setenv("HSEARCH_SEARCH__LENGTH_WORDS", str(chosen["length_words"] or 0))
    assert "The default is the rule's choice." in run_main([str(path), "--markdown"], capsys)


def test_main_measures_the_coverage_designs_on_legs_recorded_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_legs(
        tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=1, coverage=0.5
    )
    report = json.loads(run_main([str(path), "--json"], capsys))
    measured = {d["design"] for d in report["designs"]}
    assert measured == {d.describe() for d in default_grid()}
    assert any(name.endswith(" coverage length=16") for name in measured)


def even_legs(dataset: str, qid: str, *, coverage: float) -> dict[str, object]:
    """Nothing stands out in either leg; the dense leg's first candidate is the relevant
    one, the keyword leg's first is wrong and holds ``coverage`` of the query."""
    rows = {
        "dense": [(f"{qid}-r", "relevant", 10.0)]
        + [(f"{qid}-d{i}", f"dense-doc{i}", s) for i, s in enumerate(EVEN[1:])],
        "sparse": [(f"{qid}-s{i}", f"sparse-doc{i}", s) for i, s in enumerate(EVEN)],
    }
    line = record(dataset, qid, standout="dense", coverage=coverage)
    return {**line, "legs": rows, "qrels": {"relevant": 1, "sparse-doc0": 0}}


def test_the_replay_reads_the_recorded_coverage(tmp_path: Path) -> None:
    # k 1: the keyword leg's first rank outweighs the dense leg's first, its second not.
    prior = {"dense": 0.45, "sparse": 0.55}
    plain = FusionDefault.of("adaptive", prior, 1)
    covered = FusionDefault.of("adaptive", prior, 1, keyword_coverage=True)
    path = tmp_path / "legs.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for coverage, name in ((1.0, "whole"), (0.0, "none")):
            print(json.dumps(even_legs(name, f"{name}-0", coverage=coverage)), file=out)
    table = measure(list(read_legs(path)), [plain, covered], SearchSettings())
    # The sparse-leaning prior puts the keyword leg's wrong first candidate on top...
    assert table.hybrid[plain] == {
        "whole": pytest.approx(0.6309, abs=1e-4),
        "none": pytest.approx(0.6309, abs=1e-4),
    }
    # ...unless its first candidate holds the whole query: the dense order then counts.
    assert table.hybrid[covered]["whole"] == 1.0
    assert table.hybrid[covered]["none"] == table.hybrid[plain]["none"]


def test_a_replay_that_reads_coverage_refuses_legs_recorded_without_it(tmp_path: Path) -> None:
    path = write_legs(tmp_path / "legs.jsonl", {"d1": "dense", "s1": "sparse"}, queries=1)
    design = FusionDefault.of("adaptive", {"dense": 0.5, "sparse": 0.5}, keyword_coverage=True)
    with pytest.raises(ValueError, match="record the legs again"):
        measure(list(read_legs(path)), [design], SearchSettings())


def test_simplicity_ranks_what_adaptive_reads_of_the_query() -> None:
    prior = {"dense": 0.9, "sparse": 0.1}
    plain = FusionDefault.of("adaptive", prior, 100)
    coverage = FusionDefault.of("adaptive", prior, keyword_coverage=True)
    gentle = FusionDefault.of("adaptive", prior, keyword_coverage=True, length_words=24)
    sharp = FusionDefault.of("adaptive", prior, keyword_coverage=True, length_words=8)
    order = sorted([sharp, gentle, coverage, plain], key=simplicity)
    assert order == [plain, coverage, gentle, sharp]


def test_a_coverage_the_service_could_not_read_replays_as_the_service_fused(
    tmp_path: Path,
) -> None:
    design = FusionDefault.of("adaptive", {"dense": 0.45, "sparse": 0.55}, 1, keyword_coverage=True)
    plain = FusionDefault.of("adaptive", {"dense": 0.45, "sparse": 0.55}, 1)
    path = tmp_path / "legs.jsonl"
    line = {**even_legs("s", "s-0", coverage=1.0), "keyword_coverage": None}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    queries = list(read_legs(path))
    assert queries[0].coverage_recorded
    table = measure(queries, [design, plain], SearchSettings())
    assert table.hybrid[design] == table.hybrid[plain]  # no coverage read: scores alone
