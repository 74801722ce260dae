"""The benchmark report: the hybrid check and the Markdown tables from JSON lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from bench.report import (
    DatasetRun,
    ModeRun,
    dataset_result,
    hybrid_check,
    per_query_comparison,
    read_results,
    render_markdown,
)


def _result(name: str, semantic: float, keyword: float, hybrid: float) -> dict[str, Any]:
    def m(v: float) -> dict[str, float]:
        return {"ndcg@10": v, "recall@10": v, "recall@100": v}

    return {
        "dataset": name,
        "queries": 10,
        "documents": 5,
        "modes": {"semantic": m(semantic), "keyword": m(keyword), "hybrid": m(hybrid)},
        "search_ms_p50": {"semantic": 1.0, "keyword": 2.0, "hybrid": 3.0},
    }


def test_hybrid_check_compares_with_the_best_single_leg() -> None:
    assert hybrid_check(_result("a", 0.5, 0.7, 0.71)) == ("keyword", True)
    assert hybrid_check(_result("a", 0.5, 0.7, 0.6)) == ("keyword", False)
    assert hybrid_check(_result("a", 0.8, 0.7, 0.8)) == ("semantic", True)  # a tie passes
    assert hybrid_check(_result("a", 0.8, 0.7, 0.7999)) == ("semantic", False)
    partial = _result("a", 0.5, 0.7, 0.6)
    del partial["modes"]["keyword"]
    assert hybrid_check(partial) is None


def test_render_markdown_from_json_lines(tmp_path: Path) -> None:
    lines = tmp_path / "results.jsonl"
    results = [_result("good", 0.5, 0.7, 0.75), _result("bad", 0.5, 0.7, 0.6)]
    results[0]["per_query_vs_best_leg"] = {"better": 3, "same": 6, "worse": 1}
    lines.write_text("noise on stdout\n" + "\n".join(json.dumps(r) for r in results) + "\n")
    out = io.StringIO()
    render_markdown(read_results(str(lines)), out)
    text = out.getvalue()
    assert "| good | 10 | 5 | hybrid | 0.750 | 0.750 | 0.750 | 3.0 |" in text
    assert "| good | keyword 0.700 | 0.750 | +0.05000 | ✓ | ✓ | 3 / 6 / 1 |" in text
    assert "| bad | keyword 0.700 | 0.600 | -0.10000 | ✗ | ✗ | - |" in text
    assert "| good | 5 | - | - | 10 x 3 | - | - |" in text


def test_per_query_comparison_counts_each_query_once() -> None:
    hybrid = [{"ndcg@10": v} for v in (0.5, 0.2, 1.0, 0.3 + 1e-15)]
    best = [{"ndcg@10": v} for v in (0.4, 0.3, 1.0, 0.3)]
    assert per_query_comparison(hybrid, best) == {"better": 1, "same": 2, "worse": 1}


def test_dataset_result_is_the_json_line_of_a_run() -> None:
    def ranked(*ndcg: float) -> ModeRun:
        per_query = [{"ndcg@10": v, "recall@10": v, "recall@100": v} for v in ndcg]
        return ModeRun(per_query=per_query, latencies_ms=[10.0, 30.0], methods={"adaptive"})

    run = DatasetRun(
        dataset="tiny",
        encoder="fake|8|1|learned",
        documents=5,
        query_ids=["en:a", "en:b", "ja:c"],
        runs={
            "semantic": ranked(1.0, 0.0, 0.5),
            "keyword": ranked(0.0, 1.0, 0.5),
            "hybrid": ranked(1.0, 0.5, 0.5),
        },
        ingest_seconds=1.234,
        chunks=7,
        failed_documents=0,
        settings={"top_k": 100},
        setup_seconds=0.04,
        flush_seconds=None,
        search_seconds=2.26,
        total_seconds=4.0,
        sample={"max_queries": 3, "seed": 1},
        by_prefix=True,
    )
    result = dataset_result(run)
    assert list(result) == [
        "dataset", "encoder", "queries", "documents", "modes", "fusion", "ingest_seconds",
        "search_ms_p50", "search_ms_p95", "chunks", "failed_documents", "degraded_searches",
        "failed_searches", "settings", "setup_seconds", "flush_seconds", "search_seconds",
        "total_seconds", "sample", "per_query_vs_best_leg", "by_prefix",
    ]  # fmt: skip
    assert result["queries"] == 3
    assert result["modes"]["hybrid"]["ndcg@10"] == pytest.approx(2 / 3)
    assert result["fusion"] == "adaptive"
    assert result["ingest_seconds"] == 1.2
    assert result["search_ms_p50"] == {"semantic": 20.0, "keyword": 20.0, "hybrid": 20.0}
    assert result["flush_seconds"] is None
    assert result["degraded_searches"] == {"semantic": 0, "keyword": 0, "hybrid": 0}
    # semantic and keyword tie at 0.5: the first one listed is the better leg
    assert result["per_query_vs_best_leg"] == {"better": 1, "same": 2, "worse": 0}
    assert set(result["by_prefix"]) == {"en", "ja"}
    assert "query_prefix" not in dataset_result(run)
    run.query_prefix = "en:"
    assert dataset_result(run)["query_prefix"] == "en:"
