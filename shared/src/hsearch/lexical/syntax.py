"""The search box's query syntax: phrases, exclusions and alternatives.

Elasticsearch's ``simple_query_string`` is the yardstick, with its default operator
(OR): plain words are optional and ranked by the legs as before; the syntax adds
conditions a hit must meet.

* ``"flat plate"``: a **phrase**. In a query of phrases (and exclusions), a hit must hold
  its words adjacent and in order (as the analyzer reads words: ``"flat plates"``
  matches *flat plate*, a stop word inside a phrase stands for any one word). Beside
  plain words (``"flat plate" heat transfer``) a phrase is not a condition: a hit may
  match the plain words instead, as with the OR operator; its words are searched as
  any others. A long question that quotes a few words (``the role of a "linguistic
  filter" in ...``) thus keeps every candidate that answers it.
* ``-turbulent``, ``-"boundary layer"``: **excluded**. No hit holds the word (any of its
  forms) or the phrase. The word is not searched: the dense leg never sees it either.
* ``a | b``: **either**. Alternatives joined by ``|`` form one condition met by any of
  them. Between phrases it relaxes "every phrase" to "one of them"
  (``"flat plate" | "curved plate"``); plain words are optional anyway, so ``a | b``
  searches as ``a b``.

Malformed syntax degrades to plain words, never to an error: a quote without its
closing quote is dropped, a ``-`` or ``|`` with nothing to act on is ignored, and a
query whose every word is excluded is read as plain words (there is nothing left to
rank by). Japanese and other CJK text works the same way; its phrases match as
written (characters adjacent), without spaces.

:func:`parse_query` is pure; :meth:`ParsedQuery.admits` checks a chunk's text against
the conditions. The search applies them to every leg's candidates (docs/search.md,
Query syntax).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property

from hsearch.lexical.analyzer import is_cjk, match_terms, tokens

__all__ = ["Clause", "ParsedQuery", "TextTerms", "parse_query"]

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class Clause:
    """A word or a phrase of the query, as written (without quotes)."""

    text: str
    phrase: bool = False

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(t.text for t in tokens(self.text))


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A query read for its syntax (the module docstring)."""

    raw: str
    """The query as sent."""
    text: str
    """What the legs search: the words and phrases that are not excluded, without the
    syntax (quotes, ``-``, ``|``)."""
    required: tuple[tuple[Clause, ...], ...] = ()
    """Conditions a hit must meet: each one by any of its clauses."""
    excluded: tuple[Clause, ...] = ()
    """Clauses no hit may hold."""
    words: tuple[str, ...] = ()
    """The words searched (of :attr:`text`), in order, each once."""

    @property
    def constrained(self) -> bool:
        """Whether hits are checked against conditions (:meth:`admits`)."""
        return bool(self.required or self.excluded)

    def admits(self, text: str) -> bool:
        """Whether a chunk whose text is ``text`` meets every condition."""
        if not self.constrained:
            return True
        read = TextTerms(text)
        if any(read.holds(clause) for clause in self.excluded):
            return False
        return all(any(read.holds(c) for c in alternatives) for alternatives in self.required)


class TextTerms:
    """A text read once for :meth:`holds`: its words' terms, in order."""

    def __init__(self, text: str) -> None:
        self._text = text

    @cached_property
    def _positions(self) -> list[frozenset[str]]:
        return [match_terms(t.text) for t in tokens(self._text) if not t.cjk]

    @cached_property
    def _compact(self) -> str:
        """The text normalised with every space removed: where CJK clauses are found."""
        return _SPACE.sub("", _normal(self._text))

    def holds(self, clause: Clause) -> bool:
        """Whether the text holds ``clause``: a word in any of its forms, a phrase's words
        adjacent and in order (a stop word of the phrase matching any one word); CJK
        text as a run of characters."""
        if any(is_cjk(char) for char in clause.text):
            return _SPACE.sub("", _normal(clause.text)) in self._compact
        wanted = [match_terms(word) for word in clause.words]
        if not wanted:
            return False
        if not clause.phrase:
            return any(not w.isdisjoint(p) for w in wanted if w for p in self._positions)
        span = len(wanted)
        positions = self._positions
        for start in range(len(positions) - span + 1):
            if all(not w or not w.isdisjoint(positions[start + i]) for i, w in enumerate(wanted)):
                return True
        return False


def _normal(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


@dataclass(slots=True)
class _Part:
    clause: Clause
    negated: bool


def _scan(query: str) -> list[_Part | None]:
    """The query's parts in order; ``None`` stands for an ``|`` between two parts."""
    parts: list[_Part | None] = []
    i, n = 0, len(query)
    while i < n:
        char = query[i]
        if char.isspace():
            i += 1
            continue
        if char == "|":
            parts.append(None)
            i += 1
            continue
        negated = False
        if char == "-" and i + 1 < n and not query[i + 1].isspace() and query[i + 1] != "|":
            negated = True
            i += 1
            char = query[i]
        if char == '"':
            close = query.find('"', i + 1)
            if close == -1:  # no closing quote: it is dropped, what follows is plain
                i += 1
                continue
            inner = query[i + 1 : close].strip()
            words = [t.text for t in tokens(inner)]
            if words:
                # A quoted CJK run is a phrase too: its characters must stay adjacent.
                phrase = len(words) > 1 or any(is_cjk(c) for c in inner)
                parts.append(_Part(Clause(inner, phrase=phrase), negated))
            i = close + 1
            continue
        end = i
        while end < n and not query[end].isspace() and query[end] not in '"|':
            end += 1
        word = query[i:end]
        if next(tokens(word), None) is not None:
            parts.append(_Part(Clause(word), negated))
        i = max(end, i + 1)
    return parts


def parse_query(query: str) -> ParsedQuery:
    """Read ``query``'s syntax (the module docstring); never raises."""
    if not any(c in query for c in '"-|'):
        return ParsedQuery(raw=query, text=query, words=_words([Clause(query)]))
    parts = _scan(query)
    groups: list[list[_Part]] = []
    joined = False
    for part in parts:
        if part is None:
            joined = bool(groups)
            continue
        if joined and groups:
            groups[-1].append(part)
        else:
            groups.append([part])
        joined = False
    excluded = [p.clause for group in groups for p in group if p.negated]
    kept = [[p.clause for p in group if not p.negated] for group in groups]
    kept = [group for group in kept if group]
    positive = [clause for group in kept for clause in group]
    if not positive:
        # Nothing left to rank by: the query is read as plain words.
        plain = " ".join(p.clause.text for p in parts if p is not None) or query
        return ParsedQuery(raw=query, text=plain, words=_words([Clause(plain)]))
    # As simple_query_string's OR reads them: beside a plain word (a clause a hit may
    # match instead), a phrase is one more way to match, not a condition; its words are
    # searched as any others. Only a query of phrases (and exclusions) requires them.
    free = any(not any(c.phrase for c in group) for group in kept)
    required = () if free else tuple(tuple(group) for group in kept)
    text = " ".join(c.text for c in positive)
    return ParsedQuery(
        raw=query,
        text=text,
        required=required,
        excluded=tuple(dict.fromkeys(excluded)),
        words=_words(positive),
    )


def _words(clauses: list[Clause]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(w for clause in clauses for w in clause.words))
