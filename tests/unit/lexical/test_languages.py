"""The ``lang`` tags accepted at submission: what the analyzer reads, nothing else."""

from __future__ import annotations

import json

import pytest

from hsearch.lexical.analyzer import analyze
from hsearch.lexical.languages import lang_problem
from hsearch.stack import sample_documents


@pytest.mark.parametrize(
    "lang", ["", "en", "EN", "en-GB", "en_GB", "ja", "und", "pt-BR", "zh-Hant-TW", "de"]
)
def test_tags_the_analyzer_reads_are_accepted(lang: str) -> None:
    assert lang_problem(lang) is None


@pytest.mark.parametrize(
    ("lang", "hint"),
    [("english", "'en'"), ("eng", "'en'"), ("ENG", "'en'"), ("ger", "'de'"), ("iw", "'he'")],
)
def test_a_name_or_three_letter_code_is_refused_with_its_two_letter_code(
    lang: str, hint: str
) -> None:
    problem = lang_problem(lang)
    assert problem is not None
    assert f"did you mean {hint}" in problem
    assert "ISO 639-1" in problem, "it lists what is accepted"
    assert "'und'" in problem


@pytest.mark.parametrize("lang", ["klingon", "xx", "e", "en-", "en-GB!", " ", "tlh"])
def test_anything_else_is_refused(lang: str) -> None:
    problem = lang_problem(lang)
    assert problem is not None
    assert repr(lang) in problem
    assert "did you mean" not in problem


def test_why_it_matters_a_refused_tag_would_lose_the_english_rules() -> None:
    assert analyze("volcanoes", lang="en") == ["volcano"]
    assert analyze("volcanoes", lang="english") != ["volcano"]


def test_the_sample_corpus_carries_accepted_tags() -> None:
    documents = sample_documents()
    assert documents
    bad = {d["lang"] for d in documents if lang_problem(d.get("lang", "")) is not None}
    assert not bad, json.dumps(sorted(bad))
