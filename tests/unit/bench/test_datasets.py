"""Dataset IO: the BEIR folder layout and query sampling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.datasets import load_dataset, select_queries


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
