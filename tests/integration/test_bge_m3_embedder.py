"""BgeM3Embedder against a real (tiny, random) BGE-M3 checkpoint loaded by FlagEmbedding.

The weights are random, so only the shape of the output is checked, never relevance.
"""

from __future__ import annotations

import functools
import json
import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.bge_m3 import BgeM3Embedder
from hsearch.embedding.factory import create_embedder, describe_encoder
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind, Tokenizer
from hsearch.errors import EncoderError
from tests.fixtures.model_thread import forward_threads, record_loads
from tests.fixtures.tiny_bge_m3 import HIDDEN_SIZE, build_tiny_bge_m3

pytestmark = pytest.mark.integration

TEXTS = [
    "the quick brown fox jumps over the lazy dog",
    "東京は日本の首都です",
    "hybrid search with dense and sparse vectors",
    "",
    "ハイブリッド検索",
    "milvus " * 300,  # longer than max_length: truncated, not an error
]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bge_m3(tmp_path_factory.mktemp("bge_m3"))


@pytest.fixture(scope="module")
def embedder(checkpoint: Path) -> BgeM3Embedder:
    return BgeM3Embedder(checkpoint, batch_size=4, max_length=64)


@pytest.fixture(scope="module")
def vocab_size(checkpoint: Path) -> int:
    size = json.loads((checkpoint / "config.json").read_text())["vocab_size"]
    assert isinstance(size, int)
    return size


def _check(embedding: Embedding, *, vocab_size: int) -> None:
    assert len(embedding.dense) == HIDDEN_SIZE
    assert math.sqrt(sum(v * v for v in embedding.dense)) == pytest.approx(1.0, abs=1e-9)
    assert all(type(i) is int and 0 <= i < vocab_size for i in embedding.sparse.indices)
    assert all(type(v) is float and v > 0.0 for v in embedding.sparse.values)
    assert list(embedding.sparse.indices) == sorted(embedding.sparse.indices)


def test_info(embedder: BgeM3Embedder) -> None:
    assert isinstance(embedder, Embedder)
    info = embedder.info
    assert info.name == "bge-m3"
    assert info.dimension == HIDDEN_SIZE
    assert info.sparse_kind is SparseKind.LEARNED
    assert len(info.version) == 16
    int(info.version, 16)


def test_no_query_side_is_made_without_the_model(embedder: BgeM3Embedder) -> None:
    # The lexical weights come out of the forward pass: a search has no keyword fallback.
    assert embedder.info.sparse_needs_model
    assert embedder.embed_query_without_model(TEXTS[0]) is None


def test_its_files_declare_the_info_loading_reports(
    embedder: BgeM3Embedder, checkpoint: Path
) -> None:
    settings = EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=checkpoint)
    assert describe_encoder(settings) == embedder.info


def test_version_depends_on_content_not_location(
    checkpoint: Path, embedder: BgeM3Embedder, tmp_path: Path
) -> None:
    # The fixture is deterministic: a second build elsewhere is the same checkpoint.
    rebuilt = build_tiny_bge_m3(tmp_path / "again")
    assert BgeM3Embedder(rebuilt).info == embedder.info

    changed = tmp_path / "changed"
    shutil.copytree(checkpoint, changed)
    config = json.loads((changed / "config.json").read_text())
    config["layer_norm_eps"] = 1e-6
    (changed / "config.json").write_text(json.dumps(config))
    assert BgeM3Embedder(changed).info.version != embedder.info.version


def test_documents_are_well_formed(embedder: BgeM3Embedder, vocab_size: int) -> None:
    documents = embedder.embed_documents(TEXTS)
    assert len(documents) == len(TEXTS)
    for embedding in documents:
        _check(embedding, vocab_size=vocab_size)
    assert any(len(d.sparse) > 0 for d in documents)


def test_japanese_query(embedder: BgeM3Embedder, vocab_size: int) -> None:
    embedding = embedder.embed_query("日本の検索エンジン")
    _check(embedding, vocab_size=vocab_size)


def test_batches_keep_order_and_match_single_queries(embedder: BgeM3Embedder) -> None:
    # 6 texts in batches of 4, sorted by length inside FlagEmbedding: order must survive.
    documents = embedder.embed_documents(TEXTS)
    for text, document in zip(TEXTS, documents, strict=True):
        single = embedder.embed_query(text)
        assert single.dense == pytest.approx(document.dense, abs=1e-5)
        assert single.sparse.indices == document.sparse.indices
        assert single.sparse.values == pytest.approx(document.sparse.values, abs=1e-5)


def test_queries_encoded_together_equal_queries_encoded_alone(embedder: BgeM3Embedder) -> None:
    # 7 queries in forward passes of batch_size 4, padded to the longest of each.
    texts = [*TEXTS, "日本の検索エンジン"]
    for dense, sparse in ((True, True), (True, False), (False, True)):
        together = embedder.embed_queries(texts, dense=dense, sparse=sparse)
        assert len(together) == len(texts)
        for text, batched in zip(texts, together, strict=True):
            alone = embedder.embed_query(text, dense=dense, sparse=sparse)
            assert batched.dense == pytest.approx(alone.dense, abs=1e-5)
            assert len(batched.dense) == (HIDDEN_SIZE if dense else 0)
            assert batched.sparse.indices == alone.sparse.indices
            assert batched.sparse.values == pytest.approx(alone.sparse.values, abs=1e-5)
    assert embedder.embed_queries([]) == []
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        embedder.embed_queries(["x"], dense=False, sparse=False)


def test_a_query_can_be_encoded_for_one_side_only(embedder: BgeM3Embedder) -> None:
    # FlagEmbedding's return_dense / return_sparse: one forward pass, one head skipped.
    for text in (TEXTS[0], "日本の検索エンジン"):
        both = embedder.embed_query(text)
        dense = embedder.embed_query(text, sparse=False)
        assert dense.dense == pytest.approx(both.dense, abs=1e-6)
        assert len(dense.sparse) == 0
        sparse = embedder.embed_query(text, dense=False)
        assert sparse.sparse.indices == both.sparse.indices
        assert sparse.sparse.values == pytest.approx(both.sparse.values, abs=1e-6)
        assert sparse.dense == ()
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        embedder.embed_query("x", dense=False, sparse=False)


def test_no_texts(embedder: BgeM3Embedder) -> None:
    assert embedder.embed_documents([]) == []


def test_incomplete_checkpoint_is_refused_before_loading(checkpoint: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "sparse_linear.pt").unlink()
    with pytest.raises(EncoderError, match=r"sparse_linear\.pt"):
        BgeM3Embedder(broken)


def test_load_failures_become_encoder_errors(checkpoint: Path, tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt"
    shutil.copytree(checkpoint, corrupt)
    (corrupt / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(EncoderError, match="cannot load BGE-M3"):
        BgeM3Embedder(corrupt)


def test_the_factory_builds_it_with_the_encoder_settings(
    checkpoint: Path, embedder: BgeM3Embedder
) -> None:
    def settings(max_length: int) -> EncoderSettings:
        return EncoderSettings(
            kind=EncoderKind.BGE_M3, bge_m3_path=checkpoint, batch_size=4, max_length=max_length
        )

    built = create_embedder(settings(64))
    assert isinstance(built, BgeM3Embedder)
    assert built.info == embedder.info
    assert built.embed_documents(TEXTS) == embedder.embed_documents(TEXTS)
    # max_length reaches the model: the long text is cut elsewhere.
    shorter = create_embedder(settings(16))
    assert shorter.embed_query(TEXTS[-1]) != embedder.embed_query(TEXTS[-1])


def test_the_tokenizer_window_is_where_bge_m3_stops_reading(embedder: BgeM3Embedder) -> None:
    tokenizer = embedder.tokenizer
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.max_tokens == 62, "max_length 64 less <s> and </s>"
    full, short = " ".join(["milvus"] * 62), " ".join(["milvus"] * 61)
    assert tokenizer.count_tokens([full, short]) == [62, 61]
    a, b, c, d = embedder.embed_documents([full, f"{full} dog", short, f"{short} dog"])
    assert a.dense == b.dense, "a word past the window is not read"
    assert c.dense != d.dense, "the last token of the window is read"


def test_output_equals_flagembedding_encode(embedder: BgeM3Embedder) -> None:
    """The one-pass encoding gives what the library's own encode gives, text by text."""
    reference = embedder._model.encode(
        TEXTS,
        batch_size=4,
        max_length=64,
        return_dense=True,
        return_sparse=True,
        return_colbert_vecs=False,
    )
    ours = embedder.embed_documents(TEXTS)
    for mine, dense, lexical in zip(
        ours, reference["dense_vecs"], reference["lexical_weights"], strict=True
    ):
        assert mine.dense == pytest.approx([float(v) for v in dense], abs=1e-5)
        expected = {int(token): float(w) for token, w in lexical.items()}
        assert dict(zip(mine.sparse.indices, mine.sparse.values, strict=True)) == pytest.approx(
            expected, abs=1e-5
        )


def test_each_batch_runs_the_model_once(checkpoint: Path) -> None:
    embedder = BgeM3Embedder(checkpoint, batch_size=4, max_length=64)
    module = embedder._model.model
    batches: list[int] = []
    forward = module.forward

    def counting(inputs: Any, *args: Any, **kwargs: Any) -> Any:
        batches.append(len(inputs["input_ids"]))
        return forward(inputs, *args, **kwargs)

    module.forward = counting
    embedder.embed_documents(TEXTS)  # 6 texts: batches of 4 and 2
    embedder.embed_query("one query")
    assert batches == [4, 2, 1]


def test_the_model_loads_and_runs_on_the_process_model_thread(
    checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every torch call on one thread (one OpenMP pool), whoever calls: loading, and the
    forward passes of calls from several threads."""
    import FlagEmbedding

    loaded_on = record_loads(monkeypatch, FlagEmbedding, "BGEM3FlagModel")
    embedder = BgeM3Embedder(checkpoint, batch_size=4, max_length=64)
    assert loaded_on == [True]
    calls: list[Callable[[], object]] = [
        *(functools.partial(embedder.embed_query, text) for text in TEXTS),
        *(functools.partial(embedder.embed_documents, [text, text]) for text in TEXTS),
    ]
    forwards = forward_threads(embedder._model.model, calls)
    assert len(forwards) == 2 * len(TEXTS)
    assert all(on for on, _ in forwards)
    assert {name for _, name in forwards} == {forwards[0][1]}
