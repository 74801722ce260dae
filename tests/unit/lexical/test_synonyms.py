"""Synonym rules: what they add, and what is refused."""

from __future__ import annotations

import pytest

from hsearch.errors import InvalidRequestError
from hsearch.lexical.synonyms import MAX_RULES, Synonyms, parse_rules

RULES = parse_rules(
    [
        {"words": ["car", "automobile", "motor car"]},
        {"from": "NYC", "to": ["new york", "NYC"]},
    ]
)


def test_rules_are_normalised() -> None:
    assert RULES == [
        {"words": ["car", "automobile", "motor car"]},
        {"from": "NYC", "to": ["new york"]},
    ]


def test_a_multi_way_rule_adds_the_others_and_a_one_way_rule_its_targets() -> None:
    synonyms = Synonyms(RULES)
    assert synonyms.lookup("fast cars") == [("car", "automobile"), ("car", "motor car")]
    assert synonyms.lookup("a motor car") == [
        ("car", "automobile"),
        ("car", "motor car"),
        ("motor car", "car"),
        ("motor car", "automobile"),
    ]
    assert synonyms.lookup("traffic in nyc") == [("NYC", "new york")]
    assert synonyms.lookup("traffic in new york") == [], "one-way"
    assert not Synonyms()
    assert Synonyms().lookup("car") == []


@pytest.mark.parametrize(
    ("rules", "field"),
    [
        ([{"words": ["car"]}], "synonyms[0].words"),
        ([{"words": ["car", "car"]}], "synonyms[0].words"),
        ([{"from": "car"}], "synonyms[0]"),
        ([{"words": ["a"], "from": "b", "to": ["c"]}], "synonyms[0]"),
        ([{"from": "car", "to": ["car"]}], "synonyms[0].to"),
        ([{"from": "...", "to": ["car"]}], "synonyms[0].from"),
        ([{"words": ["car", 5]}], "synonyms[0].words[1]"),
        ([{"words": ["car", "one two three four five six"]}], "synonyms[0].words[1]"),
        ([{"words": ["car", "auto"]}] * (MAX_RULES + 1), "synonyms"),
    ],
)
def test_a_bad_rule_is_refused_naming_it(rules: list[dict[str, object]], field: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        parse_rules(rules)
    assert raised.value.errors[0].field == field
