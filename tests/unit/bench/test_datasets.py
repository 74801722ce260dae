"""Dataset IO: the BEIR folder layout and query sampling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.datasets import load_dataset, read_edges, select_queries

from hsearch.graph.links import DEFAULT_LINK_TYPE, Link


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


def _write_edges(root: Path, *rows: str) -> Path:
    path = root / "edges.tsv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_folder_without_edges_has_no_links(tmp_path: Path) -> None:
    ds = load_dataset(_write_beir(tmp_path / "tiny"))
    assert ds.links == {}
    assert not ds.has_links


def test_load_dataset_reads_edges_as_the_source_documents_links(tmp_path: Path) -> None:
    root = _write_beir(tmp_path / "tiny")
    _write_edges(
        root,
        "source\ttarget\ttype\tweight",
        "d1\td2\ttitle_mention\t1",
        "d1\tmissing\tcites\t0.25",  # a target not in the corpus: kept, resolves later
        "",
        "d2\td1\ttitle_mention\t2.5",
    )
    ds = load_dataset(root)
    assert ds.links == {
        "d1": (Link("d2", "title_mention", 1.0), Link("missing", "cites", 0.25)),
        "d2": (Link("d1", "title_mention", 2.5),),
    }
    assert ds.has_links
    assert ds.link_count == 3


def test_read_edges_defaults_type_and_weight_when_the_header_omits_them(tmp_path: Path) -> None:
    path = _write_edges(tmp_path, "source\ttarget", "a\tb")
    assert read_edges(path) == {"a": (Link("b", DEFAULT_LINK_TYPE, 1.0),)}
    path = _write_edges(tmp_path, "source\ttarget\ttype", "a\tb\tmention")
    assert read_edges(path) == {"a": (Link("b", "mention", 1.0),)}


def test_read_edges_keeps_a_repeated_link_once_with_its_larger_weight(tmp_path: Path) -> None:
    path = _write_edges(
        tmp_path,
        "source\ttarget\ttype\tweight",
        "a\tb\tx\t1",
        "a\tb\tx\t3",
        "a\tb\ty\t2",  # another type: another link
    )
    assert read_edges(path) == {"a": (Link("b", "x", 3.0), Link("b", "y", 2.0))}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["target\tsource", "a\tb"], r"edges.tsv:1: expected a header"),
        (["source\ttarget\tweight", "a\tb\t1"], r"edges.tsv:1: expected a header"),
        ([], r"edges.tsv:1: expected a header"),
        (["source\ttarget\ttype\tweight", "a\tb\tx"], r"edges.tsv:2: 3 fields, the header names 4"),
        (["source\ttarget\ttype\tweight", "a\tb\tx\theavy"], r"edges.tsv:2: the weight 'heavy'"),
        (["source\ttarget\ttype\tweight", "a\tb\tx\t1", "a\tb\tx\t0"], r"edges.tsv:3: .*weight"),
        (["source\ttarget\ttype\tweight", "a\tb\t\t1"], r"edges.tsv:2: .*type"),
        (["source\ttarget\ttype\tweight", "a\ta\tx\t1"], r"edges.tsv:2: 'a' links to itself"),
        (["source\ttarget\ttype\tweight", "a\t\tx\t1"], r"edges.tsv:2: .*target"),
        (["source\ttarget\ttype\tweight", "\tb\tx\t1"], r"edges.tsv:2: the source is empty"),
    ],
)
def test_read_edges_names_the_line_of_a_bad_edge(
    tmp_path: Path, rows: list[str], message: str
) -> None:
    path = tmp_path / "edges.tsv"
    path.write_text("".join(f"{row}\n" for row in rows))
    with pytest.raises(ValueError, match=message):
        read_edges(path)


def test_load_dataset_rejects_an_edge_from_a_document_outside_the_corpus(tmp_path: Path) -> None:
    root = _write_beir(tmp_path / "tiny")
    _write_edges(root, "source\ttarget\ttype\tweight", "d9\td1\tx\t1")
    with pytest.raises(ValueError, match=r"1 source\(s\) not in corpus.jsonl \('d9'\)"):
        load_dataset(root)
