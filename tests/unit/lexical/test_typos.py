"""Typo distances over a tenant's vocabulary, prefixes, and what the vocabulary lists."""

from __future__ import annotations

import pytest

from hsearch.lexical.typos import Vocabulary, allowed_typos, fold_word, vocabulary_words


@pytest.mark.parametrize(
    ("word", "typos"), [("layr", 0), ("plate", 1), ("boundary", 1), ("hypersonic", 2)]
)
def test_typos_allowed_grow_with_the_length_of_the_word(word: str, typos: int) -> None:
    assert allowed_typos(word) == typos


def test_the_vocabulary_lists_folded_latin_words_without_stop_words_or_numbers() -> None:
    words = vocabulary_words(["The Café's 2024 boundary-layer at Mach 5", "東京大学 naïve"])
    assert words == {"cafe", "boundary", "layer", "mach", "naive"}
    assert fold_word("Über") == "uber"
    assert fold_word("the") == fold_word("12345") == fold_word("ab") == ""


VOCABULARY = Vocabulary(["boundary", "boundaries", "plate", "plane", "planet", "hypersonic"])


def test_a_dropped_doubled_swapped_or_wrong_letter_is_one_typo() -> None:
    for typed in ["boundry", "bounddary", "bouhdary", "bonudary"]:
        assert VOCABULARY.corrections(typed, max_typos=1) == [("boundary", 1)], typed


def test_only_the_closest_words_are_given() -> None:
    # "plaet" is one swap from "plate", one insertion from "planet", two from "plane".
    assert VOCABULARY.corrections("plaet", max_typos=2) == [("planet", 1), ("plate", 1)]
    assert VOCABULARY.corrections("hypresnoic", max_typos=2) == [("hypersonic", 2)]
    assert VOCABULARY.corrections("hypresnoic", max_typos=1) == []


def test_a_listed_word_is_never_corrected() -> None:
    assert VOCABULARY.corrections("plane", max_typos=1) == []


def test_completions_are_the_longer_words_with_the_prefix_shortest_first() -> None:
    assert VOCABULARY.completions("pla", limit=5) == ["plane", "plate", "planet"]
    assert VOCABULARY.completions("plane", limit=5) == ["planet"]
    assert VOCABULARY.completions("bound", limit=1) == ["boundary"]
    assert VOCABULARY.completions("x", limit=5) == []


def test_a_typo_of_a_form_the_text_does_not_hold_is_found_through_the_stems() -> None:
    vocabulary = Vocabulary(["volcanoes", "eruptions", "erupted"])
    # "vulcano" is 3 edits from "volcanoes" but 1 from its stem "volcano".
    assert vocabulary.corrections("vulcano", max_typos=1) == [("volcanoes", 1)]
    # A word close to a listed word is matched on words, not stems.
    assert vocabulary.corrections("eruptoins", max_typos=2) == [("eruptions", 1)]
    assert vocabulary.corrections("tectonic", max_typos=1) == []
