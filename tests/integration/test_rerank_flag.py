"""FlagRerankerAdapter against a real (tiny, random) cross-encoder loaded by FlagEmbedding.

The weights are random, so only the shape and stability of the scores are checked,
never relevance.
"""

from __future__ import annotations

import functools
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from hsearch.errors import EncoderError
from hsearch.rerank.factory import create_reranker
from hsearch.rerank.flag import FlagRerankerAdapter
from hsearch.rerank.protocol import Reranker
from hsearch.search.ranking import rerank
from tests.fixtures.model_thread import forward_threads, record_loads
from tests.fixtures.tiny_reranker import build_tiny_reranker

pytestmark = pytest.mark.integration

QUERY_EN = "hybrid search with dense and sparse vectors"
QUERY_JA = "東京の検索エンジン"
PASSAGES = [
    "milvus hybrid search combines dense and sparse vectors",
    "東京は日本の首都です",
    "the quick brown fox jumps over the lazy dog",
    "",
    "ハイブリッド検索は密ベクトルと疎ベクトルを使います",
    "milvus " * 300,  # longer than max_length: truncated, not an error
    "reciprocal rank fusion merges two ranked lists",
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_reranker(tmp_path_factory.mktemp("reranker"))


@pytest.fixture(scope="module")
def reranker(checkpoint: Path) -> FlagRerankerAdapter:
    # batch_size 3: the 7 passages take three batches, the last one short.
    return FlagRerankerAdapter(checkpoint, batch_size=3, max_length=64)


def test_is_a_reranker_named_by_its_weights(reranker: FlagRerankerAdapter) -> None:
    assert isinstance(reranker, Reranker)
    assert reranker.name.startswith("flag-reranker:")
    assert len(reranker.name.removeprefix("flag-reranker:")) == 16


@pytest.mark.parametrize("query", [QUERY_EN, QUERY_JA])
def test_one_finite_float_per_passage(reranker: FlagRerankerAdapter, query: str) -> None:
    scores = reranker.score(query, PASSAGES)
    assert len(scores) == len(PASSAGES)
    assert all(type(s) is float and math.isfinite(s) for s in scores)
    # Random weights still tell different pairs apart.
    assert len(set(scores)) > 1


def test_deterministic(reranker: FlagRerankerAdapter) -> None:
    assert reranker.score(QUERY_JA, PASSAGES) == reranker.score(QUERY_JA, PASSAGES)


def test_batching_does_not_change_scores(reranker: FlagRerankerAdapter) -> None:
    batched = reranker.score(QUERY_EN, PASSAGES)
    single = [reranker.score(QUERY_EN, [p])[0] for p in PASSAGES]
    assert batched == pytest.approx(single, abs=1e-5)


def test_batch_size_does_not_change_scores(checkpoint: Path, reranker: FlagRerankerAdapter) -> None:
    one_batch = FlagRerankerAdapter(checkpoint, batch_size=32, max_length=64)
    assert one_batch.name == reranker.name
    assert one_batch.score(QUERY_EN, PASSAGES) == pytest.approx(
        reranker.score(QUERY_EN, PASSAGES), abs=1e-5
    )


def test_empty_passage_list(reranker: FlagRerankerAdapter) -> None:
    assert reranker.score(QUERY_EN, []) == []


def test_empty_query(reranker: FlagRerankerAdapter) -> None:
    scores = reranker.score("", PASSAGES[:2])
    assert len(scores) == 2
    assert all(math.isfinite(s) for s in scores)


def test_scores_feed_rerank(reranker: FlagRerankerAdapter) -> None:
    hits = [f"hit-{i}" for i in range(len(PASSAGES))]
    ranked = rerank(hits, reranker.score(QUERY_EN, PASSAGES))
    assert sorted(hit for hit, _ in ranked) == sorted(hits)
    assert [s for _, s in ranked] == sorted((s for _, s in ranked), reverse=True)


def test_factory_loads_the_checkpoint(checkpoint: Path, reranker: FlagRerankerAdapter) -> None:
    built = create_reranker(checkpoint, device="cpu", batch_size=3, max_length=64)
    assert isinstance(built, FlagRerankerAdapter)
    assert built.name == reranker.name


def test_name_follows_weights_and_max_length(
    checkpoint: Path, reranker: FlagRerankerAdapter, tmp_path: Path
) -> None:
    copy = Path(shutil.copytree(checkpoint, tmp_path / "copy"))
    # Same files elsewhere: same name (the name does not depend on the location).
    assert FlagRerankerAdapter(copy, batch_size=3, max_length=64).name == reranker.name
    # Other truncation: scores may differ, so the name does.
    assert FlagRerankerAdapter(copy, batch_size=3, max_length=128).name != reranker.name
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01  # one bit of the last tensor
    weights.write_bytes(bytes(data))
    assert FlagRerankerAdapter(copy, batch_size=3, max_length=64).name != reranker.name


def test_broken_weights_fail_at_load(checkpoint: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(checkpoint, tmp_path / "broken"))
    (copy / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(EncoderError, match="cannot load the reranker"):
        FlagRerankerAdapter(copy, max_length=64)


@pytest.mark.parametrize("query", ["what do vector databases store", "長い " * 80])
def test_scores_equal_flagembedding_compute_score(
    reranker: FlagRerankerAdapter, query: str
) -> None:
    """The one-pass scoring gives compute_score's logits, a long query (cut at three
    quarters of max_length) included."""
    reference = reranker._model.compute_score(
        [(query, p) for p in PASSAGES], batch_size=3, max_length=64, normalize=False
    )
    assert reranker.score(query, PASSAGES) == pytest.approx(reference, abs=1e-5)


def test_each_batch_runs_the_model_once(checkpoint: Path) -> None:
    reranker = FlagRerankerAdapter(checkpoint, batch_size=3, max_length=64)
    module = reranker._model.model
    batches: list[int] = []
    forward = module.forward

    def counting(*args: Any, **kwargs: Any) -> Any:
        batches.append(len(kwargs["input_ids"]))
        return forward(*args, **kwargs)

    module.forward = counting
    reranker.score("a query", PASSAGES)  # 7 passages: batches of 3, 3 and 1
    assert batches == [3, 3, 1]


def test_the_model_loads_and_runs_on_the_process_model_thread(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every torch call on one thread (one OpenMP pool), whoever calls: loading, and the
    forward passes of calls from several threads."""
    import FlagEmbedding

    loaded_on = record_loads(monkeypatch, FlagEmbedding, "FlagReranker")
    reranker = FlagRerankerAdapter(checkpoint, batch_size=3, max_length=64)
    assert loaded_on == [True]
    calls = [functools.partial(reranker.score, QUERY_EN, [passage]) for passage in PASSAGES]
    forwards = forward_threads(reranker._model.model, calls)
    assert len(forwards) == len(PASSAGES)
    assert all(on for on, _ in forwards)
    assert {name for _, name in forwards} == {forwards[0][1]}
