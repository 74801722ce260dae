"""Rerank: the pure ordering, the fake scorer, checkpoint checks and the factory (no model)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import ConfigurationError, EncoderError
from hsearch.search import rerank as rerank_module
from hsearch.search.rerank import (
    FakeReranker,
    FlagRerankerAdapter,
    Reranker,
    create_reranker,
    missing_reranker_files,
    rerank,
)

SETTING = "HSEARCH_RERANK__MODEL_PATH"

CROSS_ENCODER_CONFIG: dict[str, Any] = {
    "architectures": ["XLMRobertaForSequenceClassification"],
    "model_type": "xlm-roberta",
    "id2label": {"0": "LABEL_0"},
    "max_position_embeddings": 514,
    "pad_token_id": 1,
}


# --- rerank(): pure ordering -------------------------------------------------------------


def test_rerank_orders_by_score_descending() -> None:
    assert rerank(["a", "b", "c"], [0.1, 3.0, -2.0]) == [("b", 3.0), ("a", 0.1), ("c", -2.0)]


def test_rerank_keeps_original_order_on_ties() -> None:
    hits = ["first", "second", "third", "fourth"]
    assert rerank(hits, [1.0, 2.0, 1.0, 2.0]) == [
        ("second", 2.0),
        ("fourth", 2.0),
        ("first", 1.0),
        ("third", 1.0),
    ]
    assert [hit for hit, _ in rerank(hits, [0.0, -0.0, 0.0, -0.0])] == hits


def test_rerank_empty() -> None:
    assert rerank([], []) == []


def test_rerank_returns_floats_and_accepts_infinities() -> None:
    ranked = rerank(["a", "b", "c"], [1, -math.inf, math.inf])
    assert ranked == [("c", math.inf), ("a", 1.0), ("b", -math.inf)]
    assert all(type(score) is float for _, score in ranked)


def test_rerank_keeps_hit_objects() -> None:
    hits = [{"id": 1}, {"id": 2}]
    ranked = rerank(hits, [0.0, 1.0])
    assert ranked[0][0] is hits[1]
    assert ranked[1][0] is hits[0]


@pytest.mark.parametrize(("n_hits", "n_scores"), [(2, 1), (1, 2), (0, 1), (3, 0)])
def test_rerank_rejects_length_mismatch(n_hits: int, n_scores: int) -> None:
    with pytest.raises(ValueError, match=f"got {n_scores} scores for {n_hits} hits"):
        rerank(list(range(n_hits)), [0.0] * n_scores)


def test_rerank_rejects_nan() -> None:
    with pytest.raises(ValueError, match="not NaN"):
        rerank(["a", "b"], [1.0, math.nan])


@given(st.lists(st.integers(min_value=-3, max_value=3).map(float), max_size=30))
def test_rerank_properties(scores: list[float]) -> None:
    hits = list(range(len(scores)))
    ranked = rerank(hits, scores)
    assert sorted(hit for hit, _ in ranked) == hits  # a permutation
    assert all(score == scores[hit] for hit, score in ranked)  # each hit keeps its score
    for (hit_a, score_a), (hit_b, score_b) in pairwise(ranked):
        assert score_a >= score_b
        if score_a == score_b:
            assert hit_a < hit_b  # ties: original order


# --- FakeReranker ------------------------------------------------------------------------


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
    passages = ["a b c", "c d", "x"]
    assert reranker.score("a c", passages) == reranker.score("a c", passages) == [2.0, 1.0, 0.0]
    assert reranker.score("a c", []) == []
    assert reranker.calls == 3


def test_fake_feeds_rerank() -> None:
    hits = ["h0", "h1", "h2", "h3"]
    passages = ["milvus", "hybrid search on milvus", "search", "hybrid search"]
    scores = FakeReranker().score("hybrid search milvus", passages)
    assert [hit for hit, _ in rerank(hits, scores)] == ["h1", "h3", "h0", "h2"]


def test_a_string_is_not_a_list_of_passages() -> None:
    with pytest.raises(TypeError, match="not one string"):
        FakeReranker().score("query", "a passage")


# --- checkpoint checks and the factory (nothing is loaded) -------------------------------


def _checkpoint(path: Path, names: tuple[str, ...], config: dict[str, Any] | None = None) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_bytes(b"x")
    if config is not None:
        (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path


COMPLETE = ("config.json", "tokenizer_config.json", "model.safetensors", "tokenizer.json")


def test_missing_files_of_an_empty_directory(tmp_path: Path) -> None:
    assert missing_reranker_files(tmp_path) == [
        "config.json",
        "tokenizer_config.json",
        "model.safetensors|pytorch_model.bin",
        "tokenizer.json|sentencepiece.bpe.model",
    ]


def test_missing_files_of_no_directory(tmp_path: Path) -> None:
    assert missing_reranker_files(tmp_path / "absent") == [
        f"{tmp_path / 'absent'} (not a directory)"
    ]


def test_alternatives_are_enough(tmp_path: Path) -> None:
    names = ("config.json", "tokenizer_config.json", "pytorch_model.bin", "sentencepiece.bpe.model")
    assert missing_reranker_files(_checkpoint(tmp_path / "m", names)) == []
    assert missing_reranker_files(_checkpoint(tmp_path / "c", COMPLETE)) == []


def test_no_path_means_no_reranker() -> None:
    assert create_reranker(None) is None


def test_incomplete_path_names_the_setting(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m", ("config.json",))
    with pytest.raises(ConfigurationError, match=SETTING) as excinfo:
        create_reranker(path)
    assert "model.safetensors|pytorch_model.bin" in str(excinfo.value)
    with pytest.raises(ConfigurationError, match=SETTING):
        create_reranker(tmp_path / "absent")


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        # A BGE-M3 (embedder) directory: transformers would add a random head silently.
        ({"architectures": ["XLMRobertaModel"]}, "ForSequenceClassification"),
        ({"architectures": None}, "ForSequenceClassification"),
        ({"id2label": {"0": "NO", "1": "YES"}}, "has 2 labels"),
        ({"id2label": None}, "has 2 labels"),  # transformers' default
        ({"max_position_embeddings": 130}, "exceeds the model's 128 positions"),
    ],
)
def test_not_a_cross_encoder(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    config = {k: v for k, v in {**CROSS_ENCODER_CONFIG, **change}.items() if v is not None}
    path = _checkpoint(tmp_path / "m", COMPLETE, config)
    with pytest.raises(ConfigurationError, match=SETTING) as excinfo:
        create_reranker(path)
    assert problem in str(excinfo.value)
    # The adapter checks the same before FlagEmbedding sees the path.
    with pytest.raises(EncoderError, match=problem):
        FlagRerankerAdapter(path)


class _AdapterStub:
    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.path = path
        self.kwargs = kwargs


def test_factory_builds_the_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stubbed: loading a real checkpoint is the integration suite's job.
    monkeypatch.setattr(rerank_module, "FlagRerankerAdapter", _AdapterStub)
    config = {**CROSS_ENCODER_CONFIG, "num_labels": 1}
    del config["id2label"]  # a num_labels key is honoured too
    path = _checkpoint(tmp_path / "m", COMPLETE, config)
    built = create_reranker(path, device="cuda:0", batch_size=8, max_length=512)
    assert isinstance(built, _AdapterStub)
    assert built.path == path
    assert built.kwargs == {"device": "cuda:0", "batch_size": 8, "max_length": 512}


def test_unreadable_config(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m", COMPLETE)  # config.json holds "x"
    with pytest.raises(ConfigurationError, match="unreadable"):
        create_reranker(path)


def test_adapter_checks_files_before_loading(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match="not a complete reranker checkpoint"):
        FlagRerankerAdapter(tmp_path)


@pytest.mark.parametrize(
    ("batch_size", "max_length", "message"),
    [(0, 512, "batch_size must be >= 1"), (32, 8, "max_length must be >= 16")],
)
def test_adapter_validates_arguments(
    tmp_path: Path, batch_size: int, max_length: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FlagRerankerAdapter(tmp_path, batch_size=batch_size, max_length=max_length)


def test_importing_rerank_loads_no_model_library() -> None:
    heavy = ("torch", "transformers", "FlagEmbedding")
    code = f"import sys, hsearch.search.rerank; print([m for m in {heavy!r} if m in sys.modules])"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]"
