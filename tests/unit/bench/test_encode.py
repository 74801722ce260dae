"""The query-encoding benchmark on the fake encoder: the keys of its JSON and its pure
parts (no timing is asserted)."""

from __future__ import annotations

import json

import pytest
from bench import encode
from bench.encode import make_queries, median_round, ratio, rotations


def test_the_json_holds_every_figure_per_encoder(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--encoders", "fake", "--queries", "8", "--warmup", "2"]
    argv += ["--throughput-queries", "20", "--rounds", "2", "--clients", "4", "--json"]
    assert encode.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["benchmark"] == "encode"
    assert {"date", "commit", "settings", "machine", "encoders"} <= result.keys()
    assert len(result["load_average_before"]) == len(result["load_average_after"]) == 3
    assert result["settings"]["clients"] == 4
    fake = result["encoders"]["fake"]
    assert {"label", "encoder", "dimension", "load_s"} <= fake.keys()
    for side in ("single", "lone_unbatched", "lone_batched"):
        assert {"p50_ms", "p95_ms", "p99_ms", "mean_ms", "n"} <= fake[side].keys()
        assert fake[side]["n"] == 8
    assert set(fake["throughput"]) == {"off_1", "off_n", "on_1", "on_n"}
    for config, figures in fake["throughput"].items():
        assert {"qps", "p50_ms", "p95_ms", "clients", "mean_batch", "largest_batch"} <= (
            figures.keys()
        )
        assert figures["clients"] == (1 if config.endswith("_1") else 4)
        assert len(fake["throughput_rounds"][config]) == 2
    assert fake["throughput"]["off_n"]["largest_batch"] == 1  # no batcher: one by one
    assert set(fake["ratios"]) == {
        "on_over_off_4",
        "on_over_off_1",
        "clients_4_over_1_on",
        "clients_4_over_1_off",
        "lone_batched_over_unbatched_p50",
    }
    assert all(isinstance(v, float) for v in fake["ratios"].values())


def test_the_table_names_each_encoder(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--encoders", "fake", "--queries", "3", "--throughput-queries", "5", "--rounds", "1"]
    assert encode.main(argv) == 0
    table = capsys.readouterr().out
    assert "| fake: hashing encoder" in table
    assert "q/s 10 clients off / on" in table


def test_unknown_encoders_are_refused() -> None:
    with pytest.raises(SystemExit):
        encode.main(["--encoders", "bge-m3-large"])


def test_queries_are_distinct_and_reproducible() -> None:
    queries = make_queries(500, seed=3)
    assert len(set(queries)) == 500
    assert queries == make_queries(500, seed=3)
    assert queries != make_queries(500, seed=4)
    assert all(3 <= len(q.split()) <= 8 for q in queries)


def test_rounds_rotate_the_order_and_the_median_round_is_kept() -> None:
    assert list(rotations(["a", "b", "c"], 4)) == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    runs = [{"qps": 30.0, "x": 1}, {"qps": 10.0, "x": 2}, {"qps": 20.0, "x": 3}]
    assert median_round(runs) == {"qps": 20.0, "x": 3}
    assert median_round(runs[:2])["qps"] == 10.0
    assert ratio(30.0, 10.0) == 3.0
    assert ratio(None, 10.0) is None
    assert ratio(1.0, 0.0) is None
