"""HuggingFaceTokenizer on the tiny XLM-R tokenizer the BGE-M3 fixture ships (Unigram,
Metaspace, ``<s> $A </s>``): what the chunker measures must be what the encoder reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hsearch.embedding.protocol import Tokenizer
from hsearch.embedding.tokenizer import HuggingFaceTokenizer
from hsearch.errors import EncoderError
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.records import embedding_text
from tests.fixtures.tiny_bge_m3 import save_tiny_tokenizer


@pytest.fixture(scope="module")
def model_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from transformers import AutoTokenizer

    target = tmp_path_factory.mktemp("tiny-tokenizer")
    save_tiny_tokenizer(target)
    return AutoTokenizer.from_pretrained(str(target), local_files_only=True)


def test_the_window_is_net_of_the_special_tokens(model_tokenizer: Any) -> None:
    tokenizer = HuggingFaceTokenizer(model_tokenizer, window=64)
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.max_tokens == 62, "<s> and </s> take two of the 64"
    with pytest.raises(EncoderError, match="no room"):
        HuggingFaceTokenizer(model_tokenizer, window=2)


def test_counts_are_the_models_tokens_without_special_tokens(model_tokenizer: Any) -> None:
    tokenizer = HuggingFaceTokenizer(model_tokenizer, window=64)
    texts = ["the quick brown fox", "東京は日本の首都です", "", "milvus " * 100]
    expected = [len(model_tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
    assert tokenizer.count_tokens(texts) == expected
    assert expected[3] > 64, "never truncated at the window"
    assert tokenizer.count_tokens([]) == []


def test_the_models_truncation_does_not_leak_into_counts(model_tokenizer: Any) -> None:
    # transformers leaves truncation set on its backend after a truncating call.
    model_tokenizer("milvus " * 100, truncation=True, max_length=8)
    tokenizer = HuggingFaceTokenizer(model_tokenizer, window=64)
    assert tokenizer.count_tokens(["milvus " * 100]) == [100]


def test_spans_locate_each_token_in_the_text(model_tokenizer: Any) -> None:
    tokenizer = HuggingFaceTokenizer(model_tokenizer, window=64)
    text = "the lazy dog 東京は日本"
    spans = tokenizer.token_spans(text)
    assert len(spans) == tokenizer.count_tokens([text])[0]
    assert [text[a:b] for a, b in spans][:3] == ["the", "lazy", "dog"]
    assert all(0 <= a <= b <= len(text) for a, b in spans)
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)


def test_a_tokenizer_without_a_rust_backend_is_refused(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match="not backed by the tokenizers library"):
        HuggingFaceTokenizer(object(), window=64)


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("the quick brown fox jumps over the lazy dog. " * 12, "en"),
        ("東京は日本の首都です。検索エンジンは文書を索引します。" * 8, "ja"),
        ("ハイブリッド検索は密ベクトルと疎ベクトルを使います" * 6, "ja"),  # no full stop
    ],
)
def test_chunks_and_their_title_fit_the_window(model_tokenizer: Any, text: str, lang: str) -> None:
    tokenizer = HuggingFaceTokenizer(model_tokenizer, window=24)
    chunks = Chunker(tokenizer, max_tokens=512, overlap_tokens=4).chunk(
        text, title="hybrid search", lang=lang
    )
    assert len(chunks) > 1
    assert all(text[c.start : c.end] == c.text for c in chunks)
    read = tokenizer.count_tokens([embedding_text("hybrid search", c.text) for c in chunks])
    assert max(read) <= tokenizer.max_tokens, "the encoder reads title and chunk whole"
