"""Answers written in the passages' own words: does it close the citation gap?

With the local 135M model a third of the answer's sentences are supported by no passage
(docs/benchmarks.md, "Answers"), so the checked citations score below the baseline that
cites the top-ranked passage for every sentence. This experiment asks whether that is the
whole gap: it runs :mod:`bench.answers` unchanged, except that the answer's request
carries a llama.cpp GBNF ``grammar`` allowing only the words of the passages in its
prompt (up to three sentences of 3 to 31 words). Every sentence is then made of
passage words, so the checker finds support for nearly all of them; what is left of the
gap is which passage the model answers from.

Usage (from the repository root; llama.cpp's server reads ``grammar``, the local model
server is one)::

    python -m research.grounded_answers --dataset ../shared/datasets/en-musique-train-100 \
        --max-queries 40 --json

Every ``bench.answers`` option applies. Not product code: the product sends no grammar.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from bench import answers

from hsearch.llm.openai_compatible import OpenAICompatibleLLM

_PASSAGES = re.compile(r"<passages>(.*)</passages>", re.S)
_TAG = re.compile(r"<passage[^>]*>|</passage>")
_EDGES = ".,;:!?()\"'"


def passage_words(prompt: str) -> list[str]:
    """The distinct words of the passages quoted in ``prompt`` (their edges' punctuation
    stripped), sorted; none when the prompt quotes no passages."""
    found = _PASSAGES.search(prompt)
    if found is None:
        return []
    body = _TAG.sub(" ", found.group(1))
    return sorted({w.strip(_EDGES) for w in body.split()} - {""})


def grammar_for(prompt: str) -> str | None:
    """A GBNF grammar: up to three sentences, each of 3 to 31 of the passages' words."""
    words = passage_words(prompt)
    if not words:
        return None
    alternatives = " | ".join(json.dumps(w, ensure_ascii=False) for w in words)
    return (
        'root ::= sentence (" " sentence){0,2}\n'
        'sentence ::= word (","? " " word){2,30} "."\n'
        f"word ::= {alternatives}\n"
    )


def install() -> None:
    """Every chat completion the model adapter sends carries its prompt's grammar."""
    original = OpenAICompatibleLLM.__init__

    def init(self: OpenAICompatibleLLM, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        chat = self._client.chat.completions
        create = chat.create

        async def grounded(*call: Any, **options: Any) -> Any:
            messages = options.get("messages") or []
            user = next((m["content"] for m in messages if m["role"] == "user"), "")
            grammar = grammar_for(user)
            if grammar is not None:
                options["extra_body"] = {**(options.get("extra_body") or {}), "grammar": grammar}
            return await create(*call, **options)

        chat.create = grounded  # type: ignore[method-assign]

    OpenAICompatibleLLM.__init__ = init  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    install()
    return answers.main(argv)


if __name__ == "__main__":
    sys.exit(main())
