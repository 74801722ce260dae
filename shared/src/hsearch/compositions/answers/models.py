"""An answer and the events of its stream, as values (the API maps its schemas onto them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hsearch.compositions.lazy.budget import BudgetAsk, LazyLimits
from hsearch.compositions.lazy.models import LazyProgress, LazyReport
from hsearch.search.models import LegReport
from hsearch.types import FusionMethod, SearchMode
from hsearch.vectorstore.filters import FilterNode

__all__ = [
    "Answer",
    "AnswerRequest",
    "AnswerSentence",
    "AnswerStrategy",
    "AnswerTimings",
    "AnswerTokens",
    "Citation",
    "ContextPassage",
    "Delta",
    "Failed",
    "Finished",
    "Retrieved",
    "SentenceChecked",
    "Turn",
]


class Speaker(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class AnswerStrategy(StrEnum):
    DEFAULT = "default"
    """Retrieve, pack, answer."""
    LAZY = "lazy"
    """Lazy graph search: test candidates, take claims, deepen under a budget; answer
    from the claims (docs/lazy.md)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """An earlier turn of the conversation (for a follow-up question)."""

    role: Speaker
    content: str


@dataclass(frozen=True, slots=True)
class AnswerRequest:
    tenant_id: str
    query: str
    passages: int = 5
    """How many passages to retrieve (the model is given those that fit its budget)."""
    mode: SearchMode = SearchMode.HYBRID
    filter: object | None = None
    required_filter: FilterNode | None = None
    weights: dict[str, float] | None = None
    fusion: FusionMethod | None = None
    candidates: int | None = None
    messages: tuple[Turn, ...] = ()
    max_tokens: int | None = None
    """At most the server's ``llm.max_tokens``."""
    context_tokens: int | None = None
    """At most the server's ``llm.context_tokens``."""
    expand: bool = False
    """Also search the model's other ways to ask the question (multi-query expansion)."""
    llm_rerank: bool = False
    """Let the model order the passages before the answer is written (listwise)."""
    strategy: AnswerStrategy = AnswerStrategy.DEFAULT
    generate: bool = True
    """``False``: the context only (the passages the model would be given), no answer."""
    budget: BudgetAsk | LazyLimits | None = None
    """The lazy search's budget as asked (``None``, or a field left out: the server's
    default); the service replaces it by the :class:`LazyLimits` it runs with."""
    tester: str | None = None
    """The lazy search's relevance tester, ``cheap`` or ``model`` (``None``: the
    server's default)."""
    follow_up: str | None = None
    """The lazy search's turn this question follows (its report's ``session``)."""
    max_sources: int | None = None
    """The most chunks a lazy search may give the model (a search token's
    ``max_top_k``); ``None``: as many as fit the context."""


@dataclass(frozen=True, slots=True)
class ContextPassage:
    """A passage given to the model, numbered as in its prompt."""

    number: int
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    """As given to the model (cut at its end when ``truncated``)."""
    score: float
    rank: int
    char_start: int | None
    char_end: int | None
    truncated: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Citation:
    """``[number]`` in the answer: the passage it names, with the quote that supports
    the sentence and where that quote lies in the document."""

    number: int
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    quote: str
    char_start: int | None
    """Where ``quote`` starts in the document's text (``None``: unknown offsets)."""
    char_end: int | None


@dataclass(frozen=True, slots=True)
class AnswerSentence:
    index: int
    text: str
    start: int
    """Where the sentence lies in the answer text: ``answer[start:end] == text``."""
    end: int
    citations: tuple[int, ...]
    """The numbers of the passages it cites (checked); empty when unsupported."""
    supported: bool
    support: tuple[tuple[int, float], ...]
    """Every passage (number) that supports it, with its support score, best first."""
    written: tuple[int, ...] = ()
    """The markers the model wrote in it, unchecked: for evaluation (``bench.answers``)
    and logs, never sent to a client."""


@dataclass(frozen=True, slots=True)
class AnswerTimings:
    retrieval_ms: float = 0.0
    packing_ms: float = 0.0
    first_token_ms: float | None = None
    """From the request to the model's first token (``None``: none came)."""
    generation_ms: float = 0.0
    total_ms: float = 0.0


@dataclass(frozen=True, slots=True)
class AnswerTokens:
    prompt: int | None = None
    """As the endpoint counted them (``None``: it did not say)."""
    completion: int | None = None
    context: int = 0
    """The passages' tokens in the prompt, as packing counted them."""
    calls: int = 0
    """Model calls made: the answer's, and a rewrite, expansion or reranking."""


@dataclass(frozen=True, slots=True)
class Answer:
    query: str
    standalone_query: str
    """The question searched for: the query itself, or a follow-up rewritten to stand
    alone (``messages``)."""
    answer: str | None
    """``None`` when no answer could be written (``degraded`` says why)."""
    sentences: tuple[AnswerSentence, ...]
    citations: tuple[Citation, ...]
    passages: tuple[ContextPassage, ...]
    legs: tuple[LegReport, ...]
    degraded: tuple[str, ...]
    """Why the answer is partial or missing (``model_unavailable: ...``), and the search
    legs that failed (``leg:sparse``)."""
    model: str | None
    prompt_version: str | None
    timings: AnswerTimings
    tokens: AnswerTokens
    mode: SearchMode = SearchMode.HYBRID
    method: FusionMethod | None = None
    cached: bool = False
    """Served from the answer cache: an identical question on the same data and model
    (its timings and tokens are those of the answer that was cached)."""
    strategy: AnswerStrategy = AnswerStrategy.DEFAULT
    lazy: LazyReport | None = None
    """What the lazy search did (its budget used and allowed, its claims)."""

    @property
    def unsupported(self) -> int:
        return sum(1 for s in self.sentences if not s.supported)


# -- the stream --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Retrieved:
    """The passages the model is given (first event)."""

    passages: tuple[ContextPassage, ...]
    standalone_query: str


@dataclass(frozen=True, slots=True)
class Delta:
    """Answer text, as written (markers checked: only those the answer keeps)."""

    text: str


@dataclass(frozen=True, slots=True)
class SentenceChecked:
    """A sentence was completed and its citations checked."""

    sentence: AnswerSentence
    citations: tuple[Citation, ...]


@dataclass(frozen=True, slots=True)
class Failed:
    """The model failed mid-stream: the error contract's code and message."""

    code: str
    detail: str


@dataclass(frozen=True, slots=True)
class Finished:
    """The last event: the whole answer, as the non-streamed form returns it."""

    answer: Answer


AnswerEvent = LazyProgress | Retrieved | Delta | SentenceChecked | Failed | Finished
