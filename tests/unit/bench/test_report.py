"""The benchmark report: the hybrid check and the Markdown tables from JSON lines."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from bench.report import (
    HYBRID_NO_GRAPH,
    DatasetRun,
    ModeRun,
    dataset_result,
    hybrid_check,
    per_query_comparison,
    read_results,
    render_markdown,
    render_text,
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
    # Results written before recall@5 was measured render it as "-".
    assert "| dataset | queries | docs | mode | nDCG@10 | R@5 | R@10 | R@100 | p50 ms |" in text
    assert "| good | 10 | 5 | hybrid | 0.750 | - | 0.750 | 0.750 | 3.0 |" in text
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


def test_render_markdown_shows_recall_at_5_and_the_graph_leg_margin() -> None:
    result = _result("linked", 0.5, 0.4, 0.6)
    for mode, value in (("semantic", 0.5), ("keyword", 0.4), ("hybrid", 0.6)):
        result["modes"][mode]["recall@5"] = value - 0.1
    result["modes"][HYBRID_NO_GRAPH] = {
        "ndcg@10": 0.55, "recall@5": 0.4, "recall@10": 0.55, "recall@100": 0.55
    }  # fmt: skip
    result["search_ms_p50"][HYBRID_NO_GRAPH] = 2.5
    result["settings"] = {"graph": {"weight": 0.1, "scoring": "proximity", "links": 9}}
    result["per_query_vs_no_graph"] = {"better": 4, "same": 5, "worse": 1}
    out = io.StringIO()
    render_markdown([result, _result("plain", 0.5, 0.4, 0.6)], out)
    text = out.getvalue()
    assert "| linked | 10 | 5 | hybrid | 0.600 | 0.500 | 0.600 | 0.600 | 3.0 |" in text
    assert "| linked | 10 | 5 | hybrid_no_graph | 0.550 | 0.400 | 0.550 | 0.550 | 2.5 |" in text
    assert text.index("| linked | 10 | 5 | hybrid |") < text.index("| linked | 10 | 5 | hybrid_no")
    assert (
        "| linked | weight 0.1, scoring proximity | +0.05000 | +0.10000 | +0.05000 | +0.05000 "
        "| 4 / 5 / 1 |"
    ) in text
    # only the set measured with and without the graph leg has a margin row
    assert "| plain | weight" not in text


def test_render_markdown_has_no_graph_table_without_the_graph_modes() -> None:
    out = io.StringIO()
    render_markdown([_result("plain", 0.5, 0.4, 0.6)], out)
    assert "graph leg" not in out.getvalue()


def test_render_text_lists_recall_at_5_and_the_graph_margin() -> None:
    result = _result("linked", 0.5, 0.4, 0.6)
    result.update(ingest_seconds=1.0, fusion="adaptive", encoder="offline")
    result["modes"][HYBRID_NO_GRAPH] = {"ndcg@10": 0.55, "recall@5": 0.25}
    result["per_query_vs_no_graph"] = {"better": 4, "same": 5, "worse": 1}
    out = io.StringIO()
    render_text(result, out)
    lines = out.getvalue().splitlines()
    assert lines[3].split() == ["mode", "nDCG@10", "R@5", "R@10", "R@100", "p50", "ms"]
    assert lines[-1] == (
        "graph leg: nDCG@10 +0.0500 over hybrid_no_graph; queries better / same / worse: 4 / 5 / 1"
    )
    row = next(line for line in lines if line.startswith(HYBRID_NO_GRAPH))
    assert row.split() == [HYBRID_NO_GRAPH, "0.550", "0.250", "-", "-", "-"]
    # the columns line up whatever the longest mode name
    assert {len(line) for line in lines[3:9]} == {len(lines[3])}


def test_dataset_result_compares_hybrid_with_hybrid_without_the_graph_leg() -> None:
    def ranked(*ndcg: float) -> ModeRun:
        return ModeRun(per_query=[{"ndcg@10": v, "recall@5": v} for v in ndcg])

    run = DatasetRun(
        dataset="linked",
        encoder="fake",
        documents=5,
        query_ids=["a", "b", "c"],
        runs={"hybrid": ranked(1.0, 0.5, 0.2), HYBRID_NO_GRAPH: ranked(0.5, 0.5, 0.4)},
        ingest_seconds=1.0,
        chunks=5,
        failed_documents=0,
        settings={"graph": {"weight": 0.1}},
        setup_seconds=0.0,
        flush_seconds=None,
        search_seconds=1.0,
        total_seconds=2.0,
    )
    result = dataset_result(run)
    assert list(result["modes"]) == ["hybrid", HYBRID_NO_GRAPH]
    assert result["modes"]["hybrid"]["recall@5"] == pytest.approx(1.7 / 3)
    assert result["per_query_vs_no_graph"] == {"better": 1, "same": 1, "worse": 1}
    del run.runs[HYBRID_NO_GRAPH]
    assert "per_query_vs_no_graph" not in dataset_result(run)
