"""`python -m bench.relevance --dataset DIR --json` end to end: it starts its own Milvus
Lite server, ingests a BEIR folder through the real ingestion path, prints one JSON
object, and its recorded legs replay to the hybrid ranking it measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]

CORPUS = [
    {"_id": "tea", "title": "Tea", "text": "Black tea is a fermented tea from China."},
    {"_id": "coffee", "title": "Coffee", "text": "Coffee is brewed from roasted beans."},
    {"_id": "river", "title": "Rivers", "text": "Rivers carry fresh water to the sea."},
    {"_id": "tokyo", "title": "東京", "text": "東京は日本の首都です。"},
    {"_id": "mountain", "title": "Mountains", "text": "Mountains rise above the valleys."},
]
QUERIES = {
    "en:tea": "black tea",
    "en:river": "where do rivers go",
    "ja:tokyo": "日本の首都",
    "en:none": "a query without a positive judgement",
}
QRELS = [("en:tea", "tea", 2), ("en:tea", "coffee", 1), ("en:river", "river", 1)]
QRELS += [("ja:tokyo", "tokyo", 1), ("en:none", "mountain", 0)]


def write_beir(root: Path) -> Path:
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS))
    queries = "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in QUERIES.items())
    (root / "queries.jsonl").write_text(queries)
    rows = "".join(f"{q}\t{d}\t{s}\n" for q, d, s in QRELS)
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return root


def run_module(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    command = [sys.executable, "-m", *args]
    result = subprocess.run(
        command, check=False, cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_benchmark_prints_one_json_object_and_its_legs_replay(tmp_path: Path) -> None:
    dataset = write_beir(tmp_path / "tiny-set")
    legs = tmp_path / "legs.jsonl"
    run = run_module(
        "bench.relevance",
        "--dataset",
        str(dataset),
        "--json",
        "--encoder",
        "fake",
        "--by-prefix",
        "--save-legs",
        str(legs),
    )
    assert "milvus http://127.0.0.1:" in run.stderr, "a Milvus Lite server of its own"
    (line,) = run.stdout.strip().splitlines()
    result = json.loads(line)
    assert result["dataset"] == "tiny-set"
    assert result["encoder"].startswith("fake")
    assert result["queries"] == 3, "the query without a positive judgement is skipped"
    assert result["documents"] == len(CORPUS)
    assert result["failed_documents"] == 0
    assert set(result["modes"]) == {"semantic", "keyword", "hybrid"}
    for metrics in result["modes"].values():
        assert set(metrics) == {"ndcg@10", "recall@5", "recall@10", "recall@100"}
        assert all(0.0 <= v <= 1.0 for v in metrics.values())
    assert set(result["by_prefix"]) == {"en", "ja"}
    counts = result["per_query_vs_best_leg"]
    assert sum(counts.values()) == result["queries"]
    assert result["degraded_searches"] == {"semantic": 0, "keyword": 0, "hybrid": 0}

    replayed = json.loads(run_module("bench.fusion_replay", str(legs), "--json").stdout)
    assert replayed["queries"] == result["queries"]
    for mode, metrics in result["modes"].items():
        assert replayed["modes"][mode] == pytest.approx(metrics), mode
