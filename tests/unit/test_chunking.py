from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.ingestion.chunking import chunk_text, split_sentences


def test_short_text_is_one_verbatim_chunk() -> None:
    text = "One sentence.  Two\tsentences."
    assert chunk_text(text, max_chars=100) == [text]


def test_japanese_text_stays_verbatim() -> None:
    text = "東京は日本の首都です。人口が多い都市です。"
    assert chunk_text(text, max_chars=100) == [text]
    assert split_sentences(text) == ["東京は日本の首都です。", "人口が多い都市です。"]


def test_sentences_pack_up_to_the_limit_with_overlap() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(20))
    chunks = chunk_text(text, max_chars=80, overlap_chars=30)
    assert len(chunks) > 1
    assert all(len(c) <= 80 for c in chunks)
    assert all(c in text for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert b.startswith(split_sentences(a)[-1]), "consecutive chunks share a sentence"


def test_no_overlap_partitions_the_sentences() -> None:
    text = " ".join(f"Sentence {i}." for i in range(30))
    chunks = chunk_text(text, max_chars=40)
    assert [s for c in chunks for s in split_sentences(c)] == split_sentences(text)


def test_long_sentence_is_cut_hard() -> None:
    chunks = chunk_text("x" * 250, max_chars=100, overlap_chars=10)
    assert all(len(c) <= 100 for c in chunks)
    assert sum(len(c) for c in chunks) - 10 * (len(chunks) - 1) == 250


def test_a_long_sentence_is_cut_between_words() -> None:
    text = "0" * 24 + " " + "1" * 26  # one 51-character sentence
    assert chunk_text(text, max_chars=50) == ["0" * 24, "1" * 26]
    words = " ".join(f"w{i:02d}" for i in range(30))  # 119 characters, no sentence end
    chunks = chunk_text(words, max_chars=40, overlap_chars=8)
    assert all(len(c) <= 40 for c in chunks)
    assert all(c.split()[0] in words.split() and c.split()[-1] in words.split() for c in chunks)
    assert chunks[1].startswith("w08 w09"), "the shared part starts at a word"


def test_blank_text_has_no_chunks() -> None:
    assert chunk_text(" \n\n ", max_chars=100) == []


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_parameters(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"max_chars|overlap_chars"):
        chunk_text("abc", max_chars=size, overlap_chars=overlap)


@given(st.text(min_size=1, max_size=2000), st.integers(50, 400), st.integers(0, 49))
def test_chunks_are_verbatim_bounded_and_cover_the_text(text: str, size: int, overlap: int) -> None:
    chunks = chunk_text(text, max_chars=size, overlap_chars=overlap)
    assert all(0 < len(c) <= size for c in chunks)
    assert all(c in text for c in chunks)
    joined = " ".join(chunks)
    for word in text.split():
        if len(word) <= size - overlap:
            assert word in joined
