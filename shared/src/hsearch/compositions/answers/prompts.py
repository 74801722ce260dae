"""Prompts are versioned data: one file a prompt and language (``prompt_files/``), named
``<name>-v<version>.<lang>.txt``, with a ``### system`` and a ``### user`` part. The
version goes into every answer's response and its cache key; changing a prompt's text
means a new version (a new file), so cached answers of the old one are not served.

Passages enter a prompt quoted as data: each inside ``<passage id="n">``, with any text
that would close the quotation taken apart, so a passage cannot end its quotation and
speak as the instructions do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

from hsearch.compositions.answers.packing import estimate_tokens
from hsearch.llm.protocol import ChatMessage, Role

__all__ = [
    "ANSWER_PROMPT_VERSION",
    "Prompt",
    "answer_messages",
    "fill",
    "helper_messages",
    "prompt",
    "prompt_cost",
    "query_language",
]

ANSWER_PROMPT = "answer"
ANSWER_PROMPT_VERSION = 1
_LANGUAGES = ("en", "ja")
_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_QUOTE_BREAK = re.compile(r"</?\s*passages?\b", re.IGNORECASE)
_FIELD = re.compile(r"\{(\w+)\}")
MESSAGE_OVERHEAD = 8
"""Tokens a chat template adds a message (its role markers), erring high."""


@dataclass(frozen=True, slots=True)
class Prompt:
    name: str
    version: int
    language: str
    system: str
    user: str

    @property
    def id(self) -> str:
        """``answer-v1.en``: what a response and a cache key name."""
        return f"{self.name}-v{self.version}.{self.language}"


def query_language(text: str) -> str:
    """The prompt language for ``text``: ``ja`` when it is written in Japanese (kana or
    kanji), else ``en``."""
    return "ja" if _JAPANESE.search(text) else "en"


@cache
def prompt(name: str, version: int, language: str) -> Prompt:
    """The prompt file's two parts; a language without a file of its own gets English."""
    lang = language if language in _LANGUAGES else "en"
    folder = files("hsearch.compositions.answers") / "prompt_files"
    source = folder / f"{name}-v{version}.{lang}.txt"
    if not source.is_file():
        source, lang = folder / f"{name}-v{version}.en.txt", "en"
    text = source.read_text("utf-8")
    _, _, rest = text.partition("### system\n")
    system, _, user = rest.partition("### user\n")
    return Prompt(name, version, lang, system.strip(), user.strip())


def fill(template: str, fields: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` of ``fields`` replaced, in one pass: a value
    holding ``{other}`` stays as it is (a question cannot pull a passage in)."""
    return _FIELD.sub(lambda m: fields.get(m.group(1), m.group(0)), template)


def helper_messages(name: str, fields: Mapping[str, str]) -> list[ChatMessage]:
    """A helper prompt's messages (version 1, English: what the model is asked to do
    with the question, not the answer), ``fields`` filled in."""
    chosen = prompt(name, 1, "en")
    return [
        ChatMessage(Role.SYSTEM, chosen.system),
        ChatMessage(Role.USER, fill(chosen.user, fields)),
    ]


def prompt_cost(messages: Sequence[ChatMessage]) -> int:
    """The most ``messages`` can cost in the model's tokens, estimated high
    (:func:`~hsearch.compositions.answers.packing.estimate_tokens` and the template's
    markers)."""
    return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in messages)


def quote(text: str) -> str:
    """``text`` as it may stand inside a ``<passage>``: no tag of the quotation in it."""
    return _QUOTE_BREAK.sub(lambda m: m.group(0).replace("<", "\u2039"), text)


def answer_messages(
    question: str,
    passages: Sequence[tuple[str, str]],
    *,
    language: str | None = None,
    version: int = ANSWER_PROMPT_VERSION,
) -> tuple[Prompt, list[ChatMessage]]:
    """The answer prompt (``version``) for ``question`` over ``passages`` (``(title,
    text)``, numbered from 1 in order)."""
    chosen = prompt(ANSWER_PROMPT, version, language or query_language(question))
    quoted = "\n".join(
        f'<passage id="{i}" title="{_attribute(title)}">\n{quote(text)}\n</passage>'
        for i, (title, text) in enumerate(passages, start=1)
    )
    user = fill(chosen.user, {"question": question.strip(), "passages": quoted})
    return chosen, [ChatMessage(Role.SYSTEM, chosen.system), ChatMessage(Role.USER, user)]


def _attribute(title: str) -> str:
    return quote(title).replace('"', "'").replace("\n", " ")
