"""The query syntax: phrases, exclusions, either-or; malformed input as plain words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.lexical.syntax import Clause, parse_query


def test_plain_words_are_left_as_they_are() -> None:
    parsed = parse_query("hypersonic boundary layer")
    assert parsed.text == "hypersonic boundary layer"
    assert not parsed.constrained
    assert parsed.words == ("hypersonic", "boundary", "layer")


def test_a_phrase_alone_is_required_and_searched() -> None:
    parsed = parse_query('"flat plate"')
    assert parsed.text == "flat plate"
    assert parsed.required == ((Clause("flat plate", phrase=True),),)
    assert parsed.admits("heat on a Flat Plates edge")  # stems, case
    assert not parsed.admits("the plate was flat")
    assert not parsed.admits("flat, but a plate")


def test_a_phrase_beside_plain_words_is_searched_not_required() -> None:
    """As simple_query_string's OR operator reads it: a hit may match the plain words
    instead; a long question that quotes a few words keeps every candidate."""
    parsed = parse_query('"flat plate" heat')
    assert parsed.text == "flat plate heat"
    assert parsed.required == ()
    assert not parsed.constrained
    assert parsed.admits("heat transfer in the wake")
    question = parse_query('the role of a "linguistic filter" for incorrect queries')
    assert not question.constrained
    assert question.text == "the role of a linguistic filter for incorrect queries"


def test_a_phrase_beside_plain_words_still_honours_exclusions() -> None:
    parsed = parse_query('"flat plate" heat -turbulent')
    assert parsed.required == ()
    assert not parsed.admits("turbulent heat on a flat plate")
    assert parsed.admits("heat on a curved plate")


def test_punctuation_between_the_words_of_a_phrase_does_not_break_it() -> None:
    assert parse_query('"flat plate"').admits("flat-plate theory")


def test_a_stop_word_in_a_phrase_stands_for_any_one_word() -> None:
    parsed = parse_query('"state of the art"')
    assert parsed.admits("the State of THE art methods")
    assert parsed.admits("state in a art")
    assert not parsed.admits("state art")


def test_excluded_words_and_phrases_are_not_searched_and_never_admitted() -> None:
    parsed = parse_query('wing -turbulent -"boundary layer"')
    assert parsed.text == "wing"
    assert not parsed.admits("wing in turbulence")  # any form of the word (its stem)
    assert not parsed.admits("wing boundary layer")
    assert parsed.admits("wing boundary and its layer")


def test_a_hyphen_inside_a_word_is_no_exclusion() -> None:
    parsed = parse_query("x-ray diffraction")
    assert parsed.text == "x-ray diffraction"
    assert not parsed.excluded


def test_either_between_phrases_needs_one_of_them() -> None:
    parsed = parse_query('"flat plate" | "curved plate"')
    assert parsed.admits("a curved plate")
    assert parsed.admits("a flat plate")
    assert not parsed.admits("a plate")
    both = parse_query('"flat plate" "curved plate"')
    assert not both.admits("a curved plate")
    assert both.admits("a curved plate beside a flat plate")


def test_either_between_plain_words_changes_nothing() -> None:
    assert parse_query("a | b").text == "a b"
    assert not parse_query("flow | wing").constrained


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ('"unclosed phrase', "unclosed phrase"),
        ("| wing |", "wing"),
        ("-turbulent", "turbulent"),  # nothing left to rank by: plain words
        ("wing - flow", "wing flow"),
        ('wing ""', "wing"),
    ],
)
def test_malformed_syntax_degrades_to_plain_words(query: str, text: str) -> None:
    parsed = parse_query(query)
    assert parsed.text == text
    assert not parsed.constrained


def test_japanese_phrases_match_as_written() -> None:
    parsed = parse_query('"大学入試" -東京')
    assert parsed.admits("京都大学入試の話")
    assert not parsed.admits("東京大学入試の話")
    assert not parsed.admits("大学の入試")


@given(st.text(max_size=80))
def test_any_query_parses_without_error(query: str) -> None:
    parsed = parse_query(query)
    assert isinstance(parsed.text, str)
    parsed.admits(query)
