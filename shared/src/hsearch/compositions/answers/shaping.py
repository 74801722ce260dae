"""What a model may add before the answer is written: query expansion and listwise
reranking (both off by default; docs/answers.md says what ``bench.answers`` measured).

* **Expansion**: the model writes other ways to search for the answer; each is searched
  like the question, and their passages are fused with the question's by reciprocal
  rank (the question's own list weighs as much as all the others together).
* **Listwise reranking**: the model is shown the numbered passages and asked for their
  order. Its reply is untrusted input: only numbers of passages it was shown count,
  each once; passages it leaves out keep their order after those it names; a reply
  with none is ignored (the retrieval's order stands).

Both parse the model's text here (pure), so hostile or broken replies are tested
without a model.
"""

from __future__ import annotations

import re

__all__ = ["parse_order", "parse_queries"]

MAX_EXPANSIONS = 3
MAX_QUERY_CHARS = 300
_NUMBER = re.compile(r"\d+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")


def parse_queries(reply: str, *, question: str, limit: int = MAX_EXPANSIONS) -> list[str]:
    """The expansions in a model's ``reply``: one a line, bullets and numbering taken
    off, empty, overlong and repeated lines (and the question itself) left out."""
    seen = {question.strip().casefold()}
    queries: list[str] = []
    for line in reply.splitlines():
        text = _BULLET.sub("", line).strip().strip('"').strip()
        key = text.casefold()
        if not text or len(text) > MAX_QUERY_CHARS or key in seen:
            continue
        seen.add(key)
        queries.append(text)
        if len(queries) == limit:
            break
    return queries


def parse_order(reply: str, *, count: int) -> list[int] | None:
    """The 0-based order of ``count`` passages a model's ``reply`` gives (1-based numbers
    in it): numbers out of range or repeated are ignored, the passages it leaves out
    follow in their own order; ``None`` when it names none."""
    named: list[int] = []
    for match in _NUMBER.findall(reply):
        n = int(match) - 1
        if 0 <= n < count and n not in named:
            named.append(n)
    if not named:
        return None
    return named + [n for n in range(count) if n not in named]
