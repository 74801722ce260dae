"""The synthetic corpus behind the recall tests: known selectivities, exact answers."""

from __future__ import annotations

import numpy as np
from bench.synthetic import SOURCES, Corpus, recall


def test_sources_select_the_stated_shares() -> None:
    corpus = Corpus.generate(2000, dim=16)
    counts = {value: corpus.source.count(value) for value in SOURCES}
    assert counts == {"p50": 1000, "p5": 100, "p0.5": 10, "n5": 5}
    assert int(corpus.mask("p5").sum()) == 100
    assert int(corpus.mask(None).sum()) == 2000
    assert np.allclose(np.linalg.norm(corpus.dense, axis=1), 1.0, atol=1e-5)


def test_exact_answers_match_a_plain_loop() -> None:
    corpus = Corpus.generate(500, dim=8, seed=3)
    query = corpus.dense_queries(1)[0]
    rows = [i for i in range(len(corpus)) if corpus.source[i] == "p50"]
    by_score = sorted(rows, key=lambda i: -float(corpus.dense[i] @ query))
    assert corpus.exact_dense(query, source="p50", limit=10) == [
        corpus.ids[i] for i in by_score[:10]
    ]

    sparse = corpus.sparse_queries(1)[0]
    weights = sparse.to_dict()

    def score(i: int) -> float:
        return sum(weights.get(t, 0.0) * w for t, w in corpus.sparse[i].to_dict().items())

    sharing = sorted((i for i in range(len(corpus)) if score(i) > 0), key=lambda i: -score(i))
    assert corpus.exact_sparse(sparse, source=None, limit=20) == [
        corpus.ids[i] for i in sharing[:20]
    ]


def test_records_carry_the_vectors_and_fields() -> None:
    corpus = Corpus.generate(30, dim=4, tenant="t")
    records = corpus.records(25, 40)
    assert [r.chunk_id for r in records] == corpus.ids[25:]
    assert records[0].tenant_id == "t"
    assert records[0].source == corpus.source[25]
    assert records[0].dense == tuple(corpus.dense[25].tolist())
    assert recall(corpus.ids[:3], corpus.ids[:4]) == 0.75
    assert recall([], []) == 1.0
