"""Leg signals: coverage by IDF mass, the regime filter, the per-set correlations."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from bench.fusion_replay import QueryLegs, read_legs

from hsearch.embedding.offline import OFFLINE_FUSION
from hsearch.lexical.bm25 import bm25_idf
from research.leg_signals import (
    SIGNALS,
    Corpus,
    Row,
    main,
    pearson,
    render,
    rows,
    signals,
    strongest_evidence,
)

DOCS = [
    {"_id": "a", "title": "", "text": "volcano eruption lava"},
    {"_id": "b", "title": "", "text": "volcano tourism"},
    {"_id": "c", "title": "", "text": "city tourism guide"},
    {"_id": "d", "title": "", "text": "river fishing"},
    {"_id": "e", "title": "", "text": "mountain hiking"},
    {"_id": "f", "title": "", "text": "ocean sailing"},
]
FLAT = [0.5, 0.49, 0.48, 0.47, 0.46, 0.45]
"""Scores whose first candidate does not stand out (evidence 0)."""


def query(qid: str, text: str, dense: list[str], sparse: list[str], **kw: object) -> QueryLegs:
    return QueryLegs(
        dataset=str(kw.get("dataset", "s")),
        query_id=qid,
        query=text,
        qrels=dict(kw.get("qrels", {"a": 1.0})),  # type: ignore[call-overload]
        legs={
            "dense": [(f"{d}#0", d, s) for d, s in zip(dense, FLAT, strict=False)],
            "sparse": [
                (f"{d}#0", d, s)
                for d, s in zip(sparse, kw.get("sparse_scores", FLAT), strict=False)  # type: ignore[call-overload]
            ],
        },
        dense_scripts=frozenset({"LATIN"}),
    )


def test_coverage_is_the_share_of_the_querys_idf_mass() -> None:
    corpus = Corpus.of(DOCS)
    words = corpus.query_words("the volcano tourism")
    assert words == [frozenset({"volcano", "=volcano"}), frozenset({"tourism", "=tourism"})]
    idf = bm25_idf(2, document_count=6)  # each word's stem in two documents
    assert corpus.weight(words[0]) == corpus.weight(words[1]) == idf
    assert corpus.coverage(words, "b") == 1.0
    assert corpus.coverage(words, "a") == 0.5
    assert corpus.coverage(words, "d") == 0.0
    assert corpus.coverage([], "a") == 0.0
    assert corpus.coverage(words, "unknown") == 0.0
    # a word no document holds weighs as a term in no document, and nothing holds it
    lacking = corpus.query_words("volcano tourism zeppelin")
    missing = bm25_idf(0, document_count=6)
    assert corpus.weight(lacking[2]) == missing
    assert corpus.coverage(lacking, "b") == pytest.approx(2 * idf / (2 * idf + missing))
    # CJK runs count by their bigrams
    assert corpus.query_words("日本の首都") == [
        frozenset({"日本"}),
        frozenset({"本の"}),
        frozenset({"の首"}),
        frozenset({"首都"}),
    ]


def test_signals_of_one_query() -> None:
    corpus = Corpus.of(DOCS)
    q = query("1", "volcano tourism", dense=["a", "c", "b"], sparse=["b", "a", "d"])
    s = signals(q, corpus)
    assert s["cov1"] == 1.0  # the keyword leg's first holds both terms
    assert s["cov3"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)
    assert s["dcov1"] == 0.5
    assert s["overlap10"] == 0.2  # a and b in both first tens
    assert s["words"] == 2.0
    assert s["dense_top"] == 0.5
    assert s["ceiling"] == pytest.approx(0.5 / (2.2 * 2 * bm25_idf(2, document_count=6)))
    assert s["gap_sparse"] == pytest.approx((0.5 - 0.48) / 0.5)


def test_rows_keep_the_no_standout_regime_and_compare_the_priors() -> None:
    corpus = Corpus.of(DOCS)
    flat = query("flat", "volcano tourism", dense=list("acbdef"), sparse=list("bcdefa"))
    standout = query(
        "standout",
        "volcano tourism",
        dense=list("acbdef"),
        sparse=list("bacdef"),
        sparse_scores=[9.0, 0.1, 0.1, 0.1, 0.1, 0.1],
    )
    assert strongest_evidence(flat) == 0.0
    assert strongest_evidence(standout) > 0.9
    table = rows([flat, standout], lambda _: corpus, priors=(0.5, 0.95), k=60, regime=0.1)
    assert [r.query_id for r in table] == ["flat"]
    # a is the judged document, the dense leg's first and the keyword leg's last:
    # following the dense leg (0.95) ranks it first, an even prior puts c (second in
    # both legs) above it
    (row,) = table
    assert row.difference > 0
    assert row.legs == pytest.approx(1.0 - 1.0 / math.log2(7))


def test_rows_leave_out_queries_a_leg_takes_no_part_in() -> None:
    corpus = Corpus.of(DOCS)
    no_keyword = query("k", "volcano", dense=list("acbdef"), sparse=[])
    unreadable = query("u", "日本の首都はどこですか", dense=list("acbdef"), sparse=list("bcdefa"))
    assert (
        rows([no_keyword, unreadable], lambda _: corpus, priors=(0.5, 0.95), k=60, regime=0.1) == []
    )


def test_render_counts_the_signs_and_the_means() -> None:
    def row(dataset: str, difference: float, cov1: float) -> Row:
        values = dict.fromkeys(SIGNALS, 0.0) | {"cov1": cov1, "words": difference}
        return Row(dataset, "q", difference, 0.1, values)

    table = [
        *(row("up", d, c) for d, c in [(0.1, 1.0), (0.0, 0.5), (-0.1, 0.0)]),
        *(row("down", d, c) for d, c in [(0.1, 0.0), (0.0, 0.5), (-0.1, 1.0)]),
        *(row("flat", d, 0.5) for d in (0.1, 0.0, -0.1)),
    ]
    out = render(table, (0.8, 0.95), 0.1)
    assert "| up | 3 | +0.0000 | +0.1000 | +1.00 |" in out
    assert "| down | 3 | +0.0000 | +0.1000 | -1.00 |" in out
    assert "| flat | 3 | +0.0000 | +0.1000 | - |" in out  # cov1 constant: no r
    assert "cov1 1/1," in out  # one set each way; the constant one counts neither
    assert "words 3/0," in out  # words equal to the difference: r = +1 in every set
    assert "| up | 0.500 |" in out  # cov1's mean
    assert render([], (0.8, 0.95), 0.1) == "No query with E < 0.1 where both legs take part."


def test_pearson() -> None:
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert math.isnan(pearson([1, 1, 1], [1, 2, 3]))
    assert math.isnan(pearson([1, 2], [1, 2]))


def test_main_reads_legs_and_corpora(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "datasets"
    folder = root / "s"
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in DOCS))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": "volcano"}))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n1\ta\t1\n")
    legs = tmp_path / "legs.jsonl"
    lines = []
    pairs = [("abcdef", "bcdefa"), ("bacdef", "abdcef"), ("cadbef", "dabcef")]
    for n, (dense, sparse) in enumerate(pairs):
        q = query(str(n), "volcano tourism", dense=list(dense), sparse=list(sparse))
        lines.append(
            json.dumps(
                {
                    "dataset": "s",
                    "query_id": q.query_id,
                    "query": q.query,
                    "qrels": q.qrels,
                    "candidates": 100,
                    "dense_scripts": ["LATIN"],
                    "encoder": "offline",
                    "legs": {leg: [list(r) for r in rs] for leg, rs in q.legs.items()},
                }
            )
        )
    legs.write_text("\n".join(lines))
    assert main([str(legs), "--datasets-root", str(root), "--priors", "0.5,0.95"]) == 0
    out = capsys.readouterr().out
    assert "Δ = nDCG@10 at prior 0.95 - at 0.5" in out
    (line,) = [x for x in out.splitlines() if x.startswith("| s | 3 |")]
    table = rows(
        list(read_legs(legs)),
        lambda _: Corpus.of(DOCS),
        priors=(0.5, 0.95),
        k=OFFLINE_FUSION.k,
        regime=0.1,
    )
    mean = sum(r.difference for r in table) / 3
    assert line.startswith(f"| s | 3 | {mean:+.4f} |")
    assert "| all sets pooled | 3 |" in out
    with pytest.raises(SystemExit):
        main([str(legs), "--priors", "0.9,0.5"])
