from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hsearch.embedding.fake import AnalyzerTokenizer
from hsearch.ingestion.chunking import Chunk, Chunker, sentence_spans, split_sentences
from hsearch.ingestion.records import embedding_text


def chunker(window: int = 512, *, max_tokens: int = 512, overlap: int = 0) -> Chunker:
    return Chunker(AnalyzerTokenizer(window), max_tokens=max_tokens, overlap_tokens=overlap)


def count(text: str) -> int:
    return AnalyzerTokenizer().count_tokens([text])[0]


def check_verbatim(text: str, chunks: list[Chunk]) -> None:
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text
        assert c.text == c.text.strip()


def test_short_text_is_one_verbatim_chunk_with_its_offsets() -> None:
    text = "  One sentence.  Two\tsentences.\n"
    assert chunker().chunk(text) == [Chunk("One sentence.  Two\tsentences.", 2, 31)]


def test_japanese_sentences_end_at_their_full_stops() -> None:
    text = "東京は日本の首都です。人口が多い都市です！本当に？"
    assert split_sentences(text, lang="ja") == [
        "東京は日本の首都です。",
        "人口が多い都市です！",
        "本当に？",
    ]
    chunks = chunker(max_tokens=12).chunk(text, lang="ja")
    assert [c.text for c in chunks] == ["東京は日本の首都です。", "人口が多い都市です！本当に？"]
    check_verbatim(text, chunks)


def test_english_abbreviations_do_not_end_sentences() -> None:
    text = "Dr. Smith met Mr. Jones in Washington, D.C. on Jan. 5, e.g. at noon. They talked."
    assert split_sentences(text, lang="en") == [
        "Dr. Smith met Mr. Jones in Washington, D.C. on Jan. 5, e.g. at noon.",
        "They talked.",
    ]
    # A chunk boundary never falls after "Dr." or "Mr.": the first sentence stays whole.
    chunks = chunker(max_tokens=count(split_sentences(text)[0])).chunk(text)
    assert [c.text for c in chunks] == split_sentences(text)


def test_language_tags_are_read_by_their_primary_subtag() -> None:
    text = "Hello there. General Kenobi."
    assert sentence_spans(text, lang="en-GB") == sentence_spans(text, lang="en")
    assert sentence_spans(text, lang="") == sentence_spans(text, lang="en")
    assert len(sentence_spans(text, lang="xx")) == 2, "an unknown language: generic rules"


def test_sentences_pack_up_to_the_budget_with_overlap() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(20))  # 5 tokens each
    chunks = chunker(max_tokens=16, overlap=5).chunk(text)
    check_verbatim(text, chunks)
    assert len(chunks) > 1
    assert all(count(c.text) <= 16 for c in chunks)
    for a, b in itertools.pairwise(chunks):
        assert b.text.startswith(split_sentences(a.text)[-1]), "consecutive chunks share a sentence"
        assert b.start < a.end


def test_no_overlap_partitions_the_sentences() -> None:
    text = " ".join(f"Sentence {i}." for i in range(30))
    chunks = chunker(max_tokens=9).chunk(text)
    assert [s for c in chunks for s in split_sentences(c.text)] == split_sentences(text)
    assert all(a.end <= b.start for a, b in itertools.pairwise(chunks))


def test_the_title_takes_its_share_of_the_window() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    title = "three word title"
    plain = chunker(40, max_tokens=512)
    assert plain.budget() == 40, "capped at the encoder's window"
    assert plain.budget(title) == 37
    for c in plain.chunk(text, title=title):
        assert count(embedding_text(title, c.text)) <= 40, "title and chunk fit the window"
    assert chunker(40, max_tokens=20).budget(title) == 20, "max_tokens when it is smaller"
    assert plain.budget("t " * 100) == 10, "a huge title leaves a quarter of the window"


def test_a_long_sentence_is_cut_between_words_with_overlap() -> None:
    words = " ".join(f"w{i:02d}" for i in range(30))  # one sentence of 30 tokens
    chunks = chunker(max_tokens=10, overlap=3).chunk(words)
    check_verbatim(words, chunks)
    assert all(count(c.text) <= 10 for c in chunks)
    assert [c.text.split()[0] for c in chunks] == ["w00", "w07", "w14", "w21"]
    for a, b in itertools.pairwise(chunks):
        assert count(words[b.start : a.end]) == 3, "consecutive pieces share 3 tokens"


def test_a_long_sentence_prefers_a_line_break() -> None:
    text = "alpha beta gamma delta epsilon zeta\neta theta iota kappa lambda"
    chunks = chunker(max_tokens=8).chunk(text)
    assert chunks[0].text == "alpha beta gamma delta epsilon zeta"


def test_japanese_without_spaces_or_full_stops_is_cut_between_tokens() -> None:
    text = "東京都の人口は約千四百万人で日本で最も人口の多い都道府県です" * 3
    chunks = chunker(max_tokens=20, overlap=4).chunk(text, lang="ja")
    check_verbatim(text, chunks)
    assert all(count(c.text) <= 20 for c in chunks)
    assert (chunks[0].start, chunks[-1].end) == (0, len(text))
    for a, b in itertools.pairwise(chunks):
        assert count(text[b.start : a.end]) == 4


def test_blank_text_has_no_chunks() -> None:
    assert chunker().chunk(" \n\n ") == []
    assert chunker().chunk("") == []


def test_punctuation_only_text_is_one_chunk() -> None:
    assert chunker(max_tokens=4).chunk("... !!! ???") == [Chunk("... !!! ???", 0, 11)]


@pytest.mark.parametrize(("size", "overlap"), [(0, 0), (10, 10), (10, -1)])
def test_bad_parameters(size: int, overlap: int) -> None:
    with pytest.raises(ValueError, match=r"max_tokens|overlap_tokens"):
        chunker(max_tokens=size, overlap=overlap)


class SliceDependentTokenizer(AnalyzerTokenizer):
    """Counts a text's first word twice, as a SentencePiece tokenizer may add a word-start
    piece to a slice that it did not have inside the whole text."""

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [n + 1 if n else 0 for n in super().count_tokens(texts)]


def test_a_chunk_counted_longer_on_its_own_is_cut_again() -> None:
    text = " ".join(f"Sentence {i}." for i in range(30))  # 2 tokens each
    split = Chunker(SliceDependentTokenizer(), max_tokens=8, overlap_tokens=0)
    chunks = split.chunk(text)
    check_verbatim(text, chunks)
    assert all(n <= 8 for n in split.tokenizer.count_tokens([c.text for c in chunks]))


WORDS = st.sampled_from(
    ["alpha", "Beta", "e.g.", "Dr.", "3.14", "東京", "は", "日本", "です。", "¿Qué?", "naïve", "x"]
)
SEPARATORS = st.sampled_from([" ", "  ", "\n", "\n\n", ". ", "! ", "。", "", "\t", ", "])
TEXTS = st.lists(st.tuples(WORDS, SEPARATORS), max_size=120).map(
    lambda parts: "".join(w + s for w, s in parts)
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(TEXTS, st.text(max_size=600)),
    st.integers(8, 64),
    st.integers(0, 7),
    st.sampled_from(["", "A title", "東京の話"]),
    st.sampled_from(["", "en", "ja"]),
)
def test_chunks_are_verbatim_bounded_and_cover_the_text(
    text: str, size: int, overlap: int, title: str, lang: str
) -> None:
    split = Chunker(AnalyzerTokenizer(96), max_tokens=size, overlap_tokens=overlap)
    budget = split.budget(title)
    chunks = split.chunk(text, title=title, lang=lang)
    check_verbatim(text, chunks)
    for c in chunks:
        assert count(c.text) <= budget or count(c.text) == 1, "within budget"
    covered = {i for c in chunks for i in range(c.start, c.end)}
    assert all(ch.isspace() or i in covered for i, ch in enumerate(text)), "every character"
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start, "in document order"
        assert a.end < b.end
        if b.start < a.end:
            assert count(text[b.start : a.end]) <= min(overlap, budget // 2), "overlap bound"


def test_a_text_sentencex_cannot_take_still_splits_into_sentences() -> None:
    text = "Hello there. A lone \ud800 surrogate. End"  # from a JSON escape
    assert split_sentences(text) == ["Hello there.", "A lone \ud800 surrogate.", "End"]
