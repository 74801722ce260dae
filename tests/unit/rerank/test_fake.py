"""FakeReranker: the model-free scorer the unit tests rerank with."""

from __future__ import annotations

import pytest

from hsearch.rerank.fake import FakeReranker
from hsearch.rerank.protocol import Reranker
from hsearch.search.ranking import rerank


def test_fake_counts_distinct_query_terms() -> None:
    reranker = FakeReranker()
    passages = [
        "Hybrid SEARCH combines dense and sparse vectors",
        "nothing relevant here",
        "search search search",
        "",
    ]
    assert reranker.score("hybrid search", passages) == [2.0, 0.0, 1.0, 0.0]


def test_fake_matches_japanese_by_bigrams() -> None:
    scores = FakeReranker().score("東京都", ["東京は日本の首都です", "京都の寺", "大阪"])
    assert scores == [1.0, 1.0, 0.0]  # 東京 | 京都 | neither


def test_fake_is_a_deterministic_reranker() -> None:
    reranker = FakeReranker()
    assert isinstance(reranker, Reranker)
    assert reranker.name.startswith("fake-reranker:")
    passages = ["b c e", "c e", "x"]
    assert reranker.score("b c", passages) == reranker.score("b c", passages) == [2.0, 1.0, 0.0]
    assert reranker.score("b c", []) == []
    assert reranker.calls == 3


def test_fake_feeds_rerank() -> None:
    hits = ["h0", "h1", "h2", "h3"]
    passages = ["milvus", "hybrid search on milvus", "search", "hybrid search"]
    scores = FakeReranker().score("hybrid search milvus", passages)
    assert [hit for hit, _ in rerank(hits, scores)] == ["h1", "h3", "h0", "h2"]


def test_a_string_is_not_a_list_of_passages() -> None:
    with pytest.raises(TypeError, match="not one string"):
        FakeReranker().score("query", "a passage")
