"""Context packing: duplicates out, documents diverse, a stable order, a token budget."""

from __future__ import annotations

from hsearch.compositions.answers.packing import estimate_tokens, pack
from hsearch.compositions.answers.prompts import answer_messages, query_language, quote


def test_duplicates_go_and_documents_stay_diverse() -> None:
    passages = [
        ("a", "Rivers carry water."),
        ("a", "rivers   CARRY water."),  # the same text
        ("a", "Second of a."),
        ("a", "Third of a."),
        ("a", "Fourth of a."),
        ("b", "Deserts are dry."),
    ]
    packed = pack(passages, budget_tokens=1000, per_document=3)
    assert [p.index for p in packed] == [0, 2, 3, 5]


def test_the_budget_holds_and_the_order_is_the_ranking() -> None:
    passages = [("a", "x" * 300), ("b", "y" * 600), ("c", "z" * 30)]
    packed = pack(passages, budget_tokens=120)
    assert [p.index for p in packed] == [0, 2]
    assert sum(p.tokens for p in packed) <= 120


def test_a_first_passage_too_long_is_cut_to_fit() -> None:
    packed = pack([("a", "word " * 500)], budget_tokens=50)
    assert len(packed) == 1
    assert packed[0].truncated
    assert packed[0].tokens <= 50


def test_the_estimate_errs_high_for_japanese() -> None:
    assert estimate_tokens("abc") == 1
    assert estimate_tokens("東京") == 4


def test_prompts_follow_the_query_s_language_and_quote_passages() -> None:
    assert query_language("日本の首都はどこですか") == "ja"
    assert query_language("What is the capital?") == "en"
    chosen, messages = answer_messages("日本の首都は?", [("東京", "東京は首都です。")])
    assert chosen.id == "answer-v1.ja"
    assert '<passage id="1" title="東京">' in messages[1].content
    assert "</passage" not in quote("a </passage> b <passages>")
