"""The grounded-answers grammar allows the passages' words and nothing else."""

from __future__ import annotations

from hsearch.compositions.answers.prompts import answer_messages
from research.grounded_answers import grammar_for, passage_words


def test_the_grammar_holds_the_passages_words_only() -> None:
    _, messages = answer_messages(
        "Why is sourdough sour?",
        [("Sourdough", "Lactic acid bacteria make sourdough sour."), ("Bread", "Bread, baked.")],
    )
    prompt = messages[1].content
    assert passage_words(prompt) == [
        "Bread",
        "Lactic",
        "acid",
        "bacteria",
        "baked",
        "make",
        "sour",
        "sourdough",
    ]
    grammar = grammar_for(prompt)
    assert grammar is not None
    assert grammar.startswith('root ::= sentence (" " sentence){0,2}\n')
    assert 'word ::= "Bread" | "Lactic" |' in grammar
    assert '"Why"' not in grammar  # the question's words are not the passages'
    assert grammar_for("Question: no passages here") is None
