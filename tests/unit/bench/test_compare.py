"""bench.compare: equal runs pass, any moved metric, prefix or sample fails."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from bench.compare import compare, main


def run(name: str, ndcg: float = 0.5) -> dict[str, Any]:
    modes = {
        m: {"ndcg@10": ndcg, "recall@10": 0.4, "recall@100": 0.9} for m in ("semantic", "hybrid")
    }
    return {
        "dataset": name,
        "queries": 10,
        "documents": 5,
        "chunks": 7,
        "sample": None,
        "modes": modes,
        "by_prefix": {"en": {"queries": 10, "modes": copy.deepcopy(modes)}},
        "search_ms_p50": {"semantic": 12.0},
    }


def test_equal_runs_compare_equal_whatever_their_latencies() -> None:
    other = run("a")
    other["search_ms_p50"] = {"semantic": 99.0}
    compared, differences = compare({"a": run("a")}, {"a": other})
    assert differences == []
    assert compared == 4 + 2 * 2 * 3  # what was measured, then all and one prefix


def test_a_change_beyond_the_fifth_decimal_is_a_difference() -> None:
    moved = run("a", ndcg=0.500006)
    _, differences = compare({"a": run("a")}, {"a": moved})
    assert {d.where for d in differences} == {
        "a all semantic ndcg@10",
        "a all hybrid ndcg@10",
        "a prefix 'en' semantic ndcg@10",
        "a prefix 'en' hybrid ndcg@10",
    }
    _, within = compare({"a": run("a")}, {"a": run("a", ndcg=0.5000004)})
    assert within == []


def test_a_missing_dataset_or_another_sample_is_a_difference() -> None:
    sampled = run("a")
    sampled["sample"] = {"max_queries": 5, "seed": 1}
    _, differences = compare({"a": run("a"), "b": run("b")}, {"a": sampled})
    assert [d.where for d in differences] == ["a sample", "b"]


def test_main_exits_1_on_a_difference(tmp_path: Path) -> None:
    left, right = tmp_path / "l.jsonl", tmp_path / "r.jsonl"
    left.write_text(json.dumps(run("a")) + "\n")
    right.write_text(json.dumps(run("a")) + "\n")
    assert main([str(left), str(right)]) == 0
    right.write_text(json.dumps(run("a", ndcg=0.4)) + "\n")
    assert main([str(left), str(right)]) == 1
