"""The relevance runner's pure parts: dataset loading, query sampling, rendering."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from bench.relevance import (
    _parse_args,
    hybrid_check,
    load_dataset,
    read_results,
    render_markdown,
    select_queries,
)


def _write_beir(root: Path) -> Path:
    root.mkdir()
    corpus = [
        {"_id": "d1", "title": "One", "text": "first"},
        {"_id": "d2", "text": "second"},  # no title
    ]
    queries = [{"_id": f"en:q{i}", "text": f"query {i}"} for i in range(6)]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (root / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    rows = ["query-id\tcorpus-id\tscore", "en:q0\td1\t2", "en:q0\td2\t0", "en:q1\td2\t0"]
    rows += [f"en:q{i}\td1\t1" for i in range(2, 6)]
    (root / "qrels.tsv").write_text("\n".join(rows) + "\n")
    return root


def test_load_dataset_reads_the_beir_layout(tmp_path: Path) -> None:
    ds = load_dataset(_write_beir(tmp_path / "tiny"))
    assert ds.name == "tiny"
    assert ds.corpus[1] == {"_id": "d2", "title": "", "text": "second"}
    assert list(ds.queries)[:2] == ["en:q0", "en:q1"]
    assert ds.qrels["en:q0"] == {"d1": 2.0, "d2": 0.0}


def test_load_dataset_rejects_a_qrels_file_without_header(tmp_path: Path) -> None:
    root = _write_beir(tmp_path / "tiny")
    (root / "qrels.tsv").write_text("en:q0\td1\t1\n")
    with pytest.raises(ValueError, match="header"):
        load_dataset(root)


def test_select_queries_skips_queries_without_a_positive_judgement(tmp_path: Path) -> None:
    ds = load_dataset(_write_beir(tmp_path / "tiny"))
    assert select_queries(ds, max_queries=None, seed=1) == [
        "en:q0", "en:q2", "en:q3", "en:q4", "en:q5",
    ]  # fmt: skip
    assert select_queries(ds, max_queries=None, seed=1, prefix="de:") == []


def test_select_queries_samples_deterministically_in_file_order(tmp_path: Path) -> None:
    ds = load_dataset(_write_beir(tmp_path / "tiny"))
    first = select_queries(ds, max_queries=3, seed=7)
    assert first == select_queries(ds, max_queries=3, seed=7)
    assert len(first) == 3
    assert first == sorted(first, key=list(ds.queries).index)
    everything = select_queries(ds, max_queries=None, seed=7)
    assert select_queries(ds, max_queries=99, seed=7) == everything


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


def test_save_legs_needs_both_single_leg_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legs = str(tmp_path / "legs.jsonl")
    with pytest.raises(SystemExit) as exit_info:
        _parse_args(["--all", "--modes", "hybrid,semantic", "--save-legs", legs])
    assert exit_info.value.code == 2
    assert "--save-legs needs the semantic and keyword modes" in capsys.readouterr().err
    args = _parse_args(["--all", "--modes", "semantic,keyword", "--save-legs", legs])
    assert args.modes == ("semantic", "keyword")
    assert args.save_legs == tmp_path / "legs.jsonl"
