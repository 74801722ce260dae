"""A text's language for documents sent without one: an ISO 639-1 code the service
accepts, or ``und`` when the model cannot tell; never an empty string."""

from __future__ import annotations

import pytest

from hsearch.client.language import detect_language
from hsearch.lexical.languages import UNKNOWN_LANG, lang_problem


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Volcanoes erupt where tectonic plates meet and magma rises.", "en"),
        ("Les volcans entrent en éruption là où les plaques se rencontrent.", "fr"),
        ("Der Vulkan bricht aus, wenn die Platten aufeinandertreffen.", "de"),
        ("火山はプレートの境界で噴火する。マグマが地表に上がる。", "ja"),
        ("Вулканы извергаются там, где встречаются тектонические плиты.", "ru"),
    ],
)
def test_a_text_gets_its_language(text: str, lang: str) -> None:
    assert detect_language(text) == lang


@pytest.mark.parametrize("text", ["", "   ", "12 345 6789", "—", "Some text."])
def test_what_cannot_be_told_is_undetermined(text: str) -> None:
    assert detect_language(text) == UNKNOWN_LANG


def test_every_answer_is_a_tag_the_service_accepts() -> None:
    samples = ["Kijiji kina watu wengi.", "Ĉu vi parolas Esperanton?", "Ein Haus.", "ok"]
    assert all(lang_problem(detect_language(t)) is None for t in samples)
    assert all(detect_language(t) for t in samples)
