"""bench.graph on a tiny graph: the synthetic links are seeded and heavy-tailed, and a run
reports every section in JSON and as tables (no timing is checked)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from bench import graph as bench_graph


def test_synthetic_links_are_seeded_and_heavy_tailed() -> None:
    first = bench_graph.synthetic_links(20_000, links_per_node=10, seed=3)
    again = bench_graph.synthetic_links(20_000, links_per_node=10, seed=3)
    assert first.n == 2_000
    assert len(first.sources) == 20_000
    assert np.array_equal(first.targets, again.targets)
    in_degree = np.bincount(first.targets, minlength=first.n)
    # Hubs: the most linked-to node has many times the mean in-degree.
    assert in_degree.max() > 10 * in_degree.mean()
    assert set(np.unique(first.type_ids).tolist()) == {0, 1, 2}


def test_a_run_reports_build_scoring_and_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--sizes", "2000", "--queries", "3", "--warmup", "1", "--builds", "1"]
    argv += ["--accuracy-queries", "2", "--epsilons", "1e-4,1e-6", "--http-documents", "0"]
    assert bench_graph.main([*argv, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (size,) = result["sizes"]
    assert size["build"]["links"] <= 2000
    assert size["build"]["bytes_per_link"] > 0
    assert set(size["scoring"]["calls"]) == {
        "proximity_d1",
        "proximity_d2",
        "proximity_d3",
        "ppr",
        "bridge",
    }
    assert set(size["ppr_accuracy"]["epsilons"]) == {"0.0001", "1e-06"}
    assert bench_graph.main(argv) == 0
    table = capsys.readouterr().out
    assert "| proximity_d2 p50 / p95 ms" in table
    assert "epsilon 1e-06" in table
