"""The graph sweep's grid, its rows and its table (the searches themselves need a stack)."""

from __future__ import annotations

import io

import pytest
from bench.graph_sweep import (
    Scoring,
    _parse_args,
    config_name,
    parse_scorings,
    render_table,
    sweep_result,
)
from bench.report import HYBRID_NO_GRAPH, ModeRun
from bench.runner import GraphOptions


def test_parse_scorings_reads_proximity_depths_and_pagerank() -> None:
    assert parse_scorings("proximity:1, proximity:3,pagerank") == (
        Scoring("proximity", 1), Scoring("proximity", 3), Scoring("pagerank")
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bfs", "unknown scoring 'bfs'; allowed: proximity, pagerank, bridge"),
        ("proximity", "proximity takes a depth of 1 to 3"),
        ("proximity:4", "proximity takes a depth of 1 to 3"),
        ("pagerank:2", "pagerank takes no depth"),
        (" , ", "no scoring given"),
    ],
)
def test_parse_scorings_refuses_what_the_leg_does_not_take(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_scorings(text)


def test_the_default_grid_is_weights_by_scorings_by_seeds(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _parse_args(["--dataset", "x"])
    assert args.weights == (0.05, 0.1, 0.2, 0.3)
    assert len(args.scorings) == 3
    assert args.seeds == (5, 10, 20)
    with pytest.raises(SystemExit):
        _parse_args(["--dataset", "x", "--weights", "0.1,2"])
    assert "--weights: each in (0, 1]" in capsys.readouterr().err


def test_config_name_names_every_setting() -> None:
    assert config_name(GraphOptions(0.1, "proximity", 2, 10)) == "w0.1 proximity:2 s10"
    assert config_name(GraphOptions(0.05, "pagerank", None, 5)) == "w0.05 pagerank s5"


def test_sweep_rows_compare_each_configuration_with_the_baseline() -> None:
    def run(*ndcg: float, ms: float = 10.0) -> ModeRun:
        per_query = [{"ndcg@10": v, "recall@5": v, "recall@10": v, "recall@100": 1.0} for v in ndcg]
        return ModeRun(per_query=per_query, latencies_ms=[ms, ms])

    graph = GraphOptions(0.2, "pagerank", None, 5)
    runs = {HYBRID_NO_GRAPH: run(0.5, 0.5), "w0.2 pagerank s5": run(1.0, 0.25, ms=20.0)}
    rows = sweep_result(runs, {"w0.2 pagerank s5": graph})
    assert [r["config"] for r in rows] == [HYBRID_NO_GRAPH, "w0.2 pagerank s5"]
    assert rows[0]["graph"] is None
    assert rows[0]["vs_no_graph"] is None
    assert rows[1]["graph"] == {"weight": 0.2, "scoring": "pagerank", "seeds": 5}
    assert rows[1]["ndcg@10_margin"] == pytest.approx(0.125)
    assert rows[1]["vs_no_graph"] == {"better": 1, "same": 0, "worse": 1}
    assert rows[1]["search_ms_p50"] == 20.0

    out = io.StringIO()
    render_table(rows, out)
    lines = out.getvalue().splitlines()
    assert lines[0] == (
        "| config | nDCG@10 | R@5 | R@10 | R@100 | ΔnDCG@10 | better / same / worse | p50 ms |"
    )
    assert (
        lines[2] == "| hybrid_no_graph | 0.5000 | 0.5000 | 0.5000 | 1.0000 | +0.0000 | - | 10.0 |"
    )
    assert lines[3] == (
        "| w0.2 pagerank s5 * | 0.6250 | 0.6250 | 0.6250 | 1.0000 | +0.1250 | 1 / 0 / 1 | 20.0 |"
    )
