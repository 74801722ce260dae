"""``POST /v1/answer`` bodies and its stream's events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    create_model,
)

from hsearch.search.planner import MAX_QUERY_CHARS
from hsearch.types import FusionMethod, LegStatus, SearchMode
from hsearch_api.schemas.search import LegWeight, leg_enum


class TurnWrite(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=4000)


class LazyBudgetWrite(BaseModel):
    """Each field left out takes the server's default (`lazy.*`); each given, at most the
    server's maximum (`lazy.max_*`)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    relevance_tests: StrictInt | None = Field(default=None, ge=1)
    llm_calls: StrictInt | None = Field(
        default=None,
        ge=0,
        description="Model calls, the answer's and a follow-up's rewrite included.",
    )
    tokens: StrictInt | None = Field(
        default=None, ge=0, description="Model tokens, read and written, every call."
    )
    seconds: StrictFloat | StrictInt | None = Field(
        default=None, gt=0, description="Wall time, the answer's included."
    )


class AnswerRequestBody(BaseModel):
    """The body of ``POST /v1/answer``: the search's retrieval fields, the stream switch,
    earlier turns and generation limits."""

    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"query": "How do volcanoes form?"},
                {
                    "query": "And where?",
                    "messages": [{"role": "user", "content": "Which is Japan's capital?"}],
                    "stream": True,
                },
            ]
        },
    )

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    passages: StrictInt = Field(
        default=5,
        ge=1,
        le=50,
        description="Passages to retrieve; the model is given those that fit its context budget.",
    )
    mode: SearchMode = SearchMode.HYBRID
    filter: dict[str, Any] | None = None
    weights: dict[str, LegWeight] | None = None
    fusion: FusionMethod | None = None
    candidates: StrictInt | None = Field(default=None, ge=1)
    stream: StrictBool = Field(
        default=False,
        description="Server-sent events: `progress` (lazy search), `retrieval`, `delta` (text), "
        "`citation` (a sentence "
        "checked), `error` (the model broke off), `done` (the whole answer, as without "
        "streaming).",
    )
    messages: list[TurnWrite] = Field(
        default_factory=list,
        max_length=20,
        description="Earlier turns, oldest first: the question is then rewritten to stand "
        "alone before it is searched (`standalone_query`).",
    )
    max_tokens: StrictInt | None = Field(default=None, ge=1, description="At most the server's.")
    context_tokens: StrictInt | None = Field(
        default=None, ge=64, description="The passages' token budget; at most the server's."
    )
    expand: StrictBool = Field(
        default=False,
        description="Also search the model's other ways to ask the question, fused with the "
        "question's own passages (one more model call; docs/answers.md).",
    )
    llm_rerank: StrictBool = Field(
        default=False,
        description="Let the model order the passages before it answers (listwise; one more "
        "model call). Not the search's `rerank`, which uses the cross-encoder.",
    )
    strategy: Literal["default", "lazy"] = Field(
        default="default",
        description="`lazy`: lazy graph search (relevance tests of candidates from the "
        "question's retrieval, its concepts' communities and the document links; claims "
        "from the relevant ones; deepening until they suffice or the `budget` is spent); the "
        "answer is written from the claims (docs/lazy.md).",
    )
    generate: StrictBool = Field(
        default=True,
        description="False: the context only (the passages the model would be given, and the "
        "lazy search's report), no answer and no model call for it.",
    )
    budget: LazyBudgetWrite | None = Field(
        default=None,
        description="The lazy search's budget; each field at most the server's maximum "
        "(unset: the server's default).",
    )
    follow_up: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="`strategy: lazy`: the `lazy.session` of the answer this question follows "
        "up: its relevant chunks are tested again first and the chunks it found irrelevant "
        "are not, unless this question's leads reach them. Ignored (`lazy.followed: false`) "
        "once the tenant's data changed, after `lazy.memory_ttl_s`, or under another filter.",
    )
    tester: Literal["cheap", "model"] | None = Field(
        default=None,
        description="The lazy search's relevance tester: `cheap` (code) or `model` (the "
        "model judges a batch a call, paid from the budget). Unset: the server's default.",
    )


def answer_request_model(legs: Sequence[str]) -> type[AnswerRequestBody]:
    """The request body with ``weights`` keyed by the registered legs."""
    leg: Any = leg_enum(legs)
    return create_model(
        "AnswerRequest",
        __base__=AnswerRequestBody,
        __module__=__name__,
        weights=(dict[leg, LegWeight] | None, AnswerRequestBody.model_fields["weights"]),
    )


class SupportRead(BaseModel):
    passage: int
    score: float = Field(description="The share of the sentence's terms the passage holds.")


class SentenceRead(BaseModel):
    index: int
    text: str
    start: int = Field(description="answer[start:end] == text (the citation markers follow it).")
    end: int
    citations: list[int] = Field(description="The passages it cites, checked by the server.")
    supported: bool = Field(description="False: no passage supports it (it cites nothing).")
    support: list[SupportRead]


class CitationRead(BaseModel):
    number: int = Field(description="The marker `[number]` in the answer.")
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    quote: str = Field(description="The passage's sentence that supports the citing sentence.")
    char_start: int | None = Field(description="Where the quote starts in the document's text.")
    char_end: int | None


class ContextPassageRead(BaseModel):
    number: int
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str = Field(description="As given to the model (cut at its end when `truncated`).")
    score: float
    rank: int
    char_start: int | None
    char_end: int | None
    truncated: bool


class AnswerLegRead(BaseModel):
    leg: str
    status: LegStatus
    took_ms: float
    candidates: int
    error: str | None


class AnswerTimingsRead(BaseModel):
    retrieval_ms: float
    packing_ms: float
    first_token_ms: float | None = Field(description="From the request to the model's first token.")
    generation_ms: float
    total_ms: float


class AnswerTokensRead(BaseModel):
    prompt: int | None = Field(description="As the model's endpoint counted them.")
    completion: int | None
    context: int = Field(description="The passages' tokens in the prompt, as packed.")
    calls: int = Field(
        description="Model calls made for this answer (rewrite, expansion, reranking, a lazy "
        "search's relevance judgements, the answer)."
    )


class BudgetLineRead(BaseModel):
    used: float
    allowed: float


class ClaimRead(BaseModel):
    text: str
    chunk_id: str
    start: int = Field(description="Where the claim lies in its chunk's text.")
    end: int
    score: float


class LazyReportRead(BaseModel):
    budget: dict[str, BudgetLineRead] = Field(
        description="`relevance_tests`, `llm_calls`, `tokens` and `elapsed_ms`: used and allowed."
    )
    stopped: str = Field(
        description="Why it stopped: `sufficient`, `budget_spent` or `exhausted` (nothing "
        "left to test)."
    )
    levels: dict[str, int] = Field(
        description="Chunks tested, by how they were first reached: `retrieval` (Level 0), "
        "`concepts` and `communities` (Level 1), `links`, `memory` (the turn followed up). "
        "Only chunks the request's filter (and a search token's) lets through are counted."
    )
    depth: int = Field(description="The deepest step from Level 0 a relevant chunk lay at.")
    tested: int
    relevant: int
    claims: list[ClaimRead]
    tester: str
    session: str | None = Field(
        default=None, description="Name it as `follow_up` to reuse this search in the next turn."
    )
    followed: bool = Field(default=False, description="It reused the turn `follow_up` named.")


class AnswerResponse(BaseModel):
    query: str
    standalone_query: str
    answer: str | None = Field(
        description="The answer, with checked citation markers `[n]`; null when none could be "
        "written (`degraded` says why: the passages are still returned)."
    )
    sentences: list[SentenceRead]
    citations: list[CitationRead]
    unsupported_sentences: int
    passages: list[ContextPassageRead]
    legs: list[AnswerLegRead]
    degraded: list[str]
    model: str | None
    prompt_version: str | None
    timings: AnswerTimingsRead
    tokens: AnswerTokensRead
    cached: bool = Field(
        description="True: the answer of an earlier identical question on the same data, "
        "model and prompt (its timings and tokens are that answer's)."
    )
    strategy: Literal["default", "lazy"] = "default"
    lazy: LazyReportRead | None = Field(
        default=None, description="What the lazy search did (`strategy: lazy`)."
    )
