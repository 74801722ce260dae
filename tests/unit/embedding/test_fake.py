from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedder, SparseKind, Tokenizer
from hsearch.lexical.analyzer import query_term_frequencies, term_frequencies


def _cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def _norm(v: tuple[float, ...]) -> float:
    return math.sqrt(sum(x * x for x in v))


def test_satisfies_the_protocol() -> None:
    assert isinstance(FakeEmbedder(), Embedder)


def test_info() -> None:
    info = FakeEmbedder(dimension=48).info
    assert info.name == "fake"
    assert info.dimension == 48
    assert info.sparse_kind is SparseKind.TERM_FREQUENCY
    # The analyzer's version is part of the encoder's: lex1 collections are refused.
    assert info.version == "fake1.lex2"
    assert info.fingerprint == "fake|48|fake1.lex2|term_frequency"
    assert FakeEmbedder(dimension=48).info == info


def test_the_query_sparse_side_needs_no_model() -> None:
    embedder = FakeEmbedder()
    assert not embedder.info.sparse_needs_model
    for text in ("Rivers flow into the sea", "東京の人口", ""):
        made = embedder.embed_query_without_model(text)
        assert made == embedder.embed_query(text, dense=False).sparse


@pytest.mark.parametrize("dimension", [0, 1, -3, 40_000, True])
def test_rejects_bad_dimensions(dimension: int) -> None:
    with pytest.raises(ValueError, match="dimension"):
        FakeEmbedder(dimension=dimension)


@pytest.mark.parametrize("dimension", [2, 32, 100])  # 100 > one hash block of 32 values
def test_dense_is_normalised_with_the_right_dimension(dimension: int) -> None:
    embedding = FakeEmbedder(dimension=dimension).embed_query("hybrid search on milvus")
    assert len(embedding.dense) == dimension
    assert _norm(embedding.dense) == pytest.approx(1.0)


def test_deterministic_across_instances() -> None:
    text = "reciprocal rank fusion 東京"
    assert FakeEmbedder().embed_query(text) == FakeEmbedder().embed_query(text)


def test_shared_words_make_texts_similar() -> None:
    fake = FakeEmbedder(dimension=64)
    query = fake.embed_query("milvus sparse vectors")
    related = fake.embed_query("sparse vectors stored in milvus collections")
    unrelated = fake.embed_query("a recipe for tomato soup with basil")
    assert _cosine(query.dense, related.dense) > _cosine(query.dense, unrelated.dense) + 0.3


def test_sparse_is_lexical_term_counts() -> None:
    text = "the cat and the hat"
    (embedding,) = FakeEmbedder().embed_documents([text])
    expected, length = term_frequencies(text)
    assert embedding.sparse == expected
    assert sum(embedding.sparse.values) == length
    assert FakeEmbedder().embed_query(text).sparse == query_term_frequencies(text)


def test_text_without_terms_still_gets_a_unit_vector() -> None:
    fake = FakeEmbedder()
    empty = fake.embed_query("")
    assert _norm(empty.dense) == pytest.approx(1.0)
    assert len(empty.sparse) == 0
    assert fake.embed_query("?!").dense == empty.dense


def test_documents_in_order_and_like_queries() -> None:
    fake = FakeEmbedder()
    texts = ["one", "two words", "", "three little words"]
    documents = fake.embed_documents(texts)
    queries = [fake.embed_query(t) for t in texts]
    assert [d.dense for d in documents] == [q.dense for q in queries]
    # A query also holds each word as documents in other languages have it.
    for document, query in zip(documents, queries, strict=True):
        assert set(document.sparse.indices) <= set(query.sparse.indices)
        assert len(query.sparse) == 2 * len(document.sparse)
    assert fake.embed_documents([]) == []


def test_documents_are_analysed_in_their_language() -> None:
    fake = FakeEmbedder()
    english, german, unknown = fake.embed_documents(
        ["the volcanoes", "the volcanoes", "the volcanoes"], langs=["en", "de", ""]
    )
    assert english.sparse == unknown.sparse == term_frequencies("volcano")[0]
    assert german.sparse == term_frequencies("the volcanoes", lang="de")[0]
    assert len(german.sparse) == 2  # no stop words, no stems outside English
    with pytest.raises(ValueError, match="2 language tags for 3 texts"):
        fake.embed_documents(["a", "b", "c"], langs=["en", "de"])


@given(st.text(max_size=200))
def test_any_text_gives_a_unit_vector(text: str) -> None:
    embedding = FakeEmbedder(dimension=16).embed_query(text)
    assert len(embedding.dense) == 16
    assert _norm(embedding.dense) == pytest.approx(1.0)


def test_a_query_can_be_encoded_for_one_side_only() -> None:
    fake = FakeEmbedder()
    both = fake.embed_query("rivers and the sea")
    assert (fake.dense_computed, fake.sparse_computed) == (1, 1)
    dense = fake.embed_query("rivers and the sea", sparse=False)
    assert (fake.dense_computed, fake.sparse_computed) == (2, 1)
    assert dense.dense == both.dense
    assert len(dense.sparse) == 0
    sparse = fake.embed_query("rivers and the sea", dense=False)
    assert (fake.dense_computed, fake.sparse_computed) == (2, 2)
    assert sparse.sparse == both.sparse
    assert sparse.dense == ()
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        fake.embed_query("rivers", dense=False, sparse=False)


def test_the_tokenizer_counts_words_and_cjk_characters() -> None:
    tokenizer = FakeEmbedder(max_tokens=100).tokenizer
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.max_tokens == 100
    text = "Naïve résumé, 東京は大きい! 42"
    spans = tokenizer.token_spans(text)
    assert [text[a:b] for a, b in spans] == ["Naïve", "résumé", *"東京は大きい", "42"]
    assert tokenizer.count_tokens([text, "", "..."]) == [9, 0, 0]


@given(st.lists(st.sampled_from(["word", "東京", " ", ", ", "\n", "x1"]), max_size=30))
def test_token_counts_add_up_over_texts_cut_between_tokens(parts: list[str]) -> None:
    tokenizer = FakeEmbedder().tokenizer
    text = "".join(parts)
    spans = tokenizer.token_spans(text)
    for cut in {a for a, _ in spans}:
        left, right = tokenizer.count_tokens([text[:cut], text[cut:]])
        assert left + right == len(spans)


@pytest.mark.parametrize("max_tokens", [0, -1, True])
def test_the_window_must_hold_a_token(max_tokens: int) -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        FakeEmbedder(max_tokens=max_tokens)


def test_queries_encoded_together_equal_queries_encoded_alone() -> None:
    embedder = FakeEmbedder()
    texts = ["red fox", "", "東京の人口", "red fox", "a longer query about rivers"]
    for dense, sparse in ((True, True), (True, False), (False, True)):
        together = embedder.embed_queries(texts, dense=dense, sparse=sparse)
        assert together == [embedder.embed_query(t, dense=dense, sparse=sparse) for t in texts]
    assert embedder.embed_queries([]) == []
    with pytest.raises(ValueError, match="dense side, the sparse side or both"):
        embedder.embed_queries(["x"], dense=False, sparse=False)
