"""A tenant's synonyms: which query words also search for which others.

Two kinds of rule, as Meilisearch and Elasticsearch have them:

* **multi-way** ``{"words": ["car", "automobile", "motor car"]}``: any of them in a query
  also searches for the others;
* **one-way** ``{"from": "nyc", "to": ["new york"]}``: ``nyc`` also searches for *new
  york*, and not the other way round.

A rule's side is a word or a few words; it is found in a query as a phrase is
(:mod:`hsearch.lexical.syntax`: in any of the analyzer's forms, so ``cars`` finds the
rule of ``car``). What it adds goes to the keyword leg, weighted below the words typed
(:mod:`hsearch.lexical.additions`), and each hit's explanation says which word brought
it. :func:`parse_rules` checks rules as ``PUT /v1/synonyms`` receives them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from hsearch.errors import FieldError, InvalidRequestError
from hsearch.lexical.analyzer import analyze_query, tokens
from hsearch.lexical.syntax import Clause, TextTerms

__all__ = ["MAX_RULES", "MAX_TERM_CHARS", "MAX_TERM_WORDS", "Synonyms", "parse_rules"]

MAX_RULES: Final = 1000
MAX_SIDE_TERMS: Final = 20
MAX_TERM_CHARS: Final = 100
MAX_TERM_WORDS: Final = 5


@dataclass(frozen=True, slots=True)
class _Rule:
    sources: tuple[str, ...]
    targets: tuple[str, ...]
    one_way: bool


class Synonyms:
    """A tenant's rules, ready to be looked up. Immutable."""

    def __init__(self, rules: Sequence[Mapping[str, Any]] = ()) -> None:
        parsed: list[_Rule] = []
        for rule in rules:
            if "words" in rule:
                words = tuple(str(w) for w in rule["words"])
                parsed.append(_Rule(words, words, one_way=False))
            else:
                targets = tuple(str(w) for w in rule.get("to", ()))
                parsed.append(_Rule((str(rule.get("from", "")),), targets, one_way=True))
        self._rules = tuple(parsed)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def lookup(self, query: str) -> list[tuple[str, str]]:
        """``(what the query holds, what it also searches for)`` pairs, each once, in
        the rules' order."""
        if not self._rules:
            return []
        read = TextTerms(query)
        found: dict[tuple[str, str], None] = {}
        for rule in self._rules:
            for source in rule.sources:
                if not read.holds(Clause(source, phrase=len(source.split()) > 1)):
                    continue
                for target in rule.targets:
                    if target != source:
                        found[(source, target)] = None
        return list(found)


def parse_rules(raw: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``raw`` checked and normalised (sides stripped, duplicates out), as stored.

    Raises:
        InvalidRequestError: a rule that is neither kind, a side with no searchable word
            (only stop words or punctuation), or past the limits; the error names the
            rule (``synonyms[3].to[0]``).
    """
    if len(raw) > MAX_RULES:
        _fail("synonyms", f"at most {MAX_RULES} rules, got {len(raw)}")
    rules: list[dict[str, Any]] = []
    for i, rule in enumerate(raw):
        where = f"synonyms[{i}]"
        keys = set(rule)
        if keys == {"words"}:
            words = _side(rule["words"], f"{where}.words", minimum=2)
            rules.append({"words": words})
        elif keys == {"from", "to"}:
            source = _term(rule["from"], f"{where}.from")
            targets = [t for t in _side(rule["to"], f"{where}.to", minimum=1) if t != source]
            if not targets:
                _fail(f"{where}.to", "must name at least one term other than 'from'")
            rules.append({"from": source, "to": targets})
        else:
            _fail(
                where,
                'a rule is either {"words": [...]} (multi-way) or {"from": "...", '
                f'"to": [...]}} (one-way); got the keys {sorted(keys)}',
            )
    return rules


def _side(value: object, where: str, *, minimum: int) -> list[str]:
    if not isinstance(value, list):
        _fail(where, "must be a list of terms")
    terms = list(dict.fromkeys(_term(v, f"{where}[{j}]") for j, v in enumerate(value)))
    if len(terms) < minimum:
        _fail(where, f"must hold at least {minimum} distinct terms")
    if len(terms) > MAX_SIDE_TERMS:
        _fail(where, f"at most {MAX_SIDE_TERMS} terms")
    return terms


def _term(value: object, where: str) -> str:
    if not isinstance(value, str):
        _fail(where, "must be a string")
    term = " ".join(value.split())
    if not term or len(term) > MAX_TERM_CHARS:
        _fail(where, f"must hold 1 to {MAX_TERM_CHARS} characters")
    if sum(1 for _ in tokens(term)) > MAX_TERM_WORDS:
        _fail(where, f"at most {MAX_TERM_WORDS} words")
    if not analyze_query(term):
        _fail(where, f"{term!r} holds no searchable word (only stop words or punctuation)")
    return term


def _fail(field: str, message: str) -> NoReturn:
    raise InvalidRequestError.of([FieldError(field, message)])
