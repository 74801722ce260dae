"""The API's answers as typed values: search, answers and their stream, documents and
their links, jobs.

Each model mirrors a response schema of the API's OpenAPI document (``HitRead`` is
:class:`Hit` here, ``JobRead`` :class:`Job`); the repository's tests compare their
fields. Fields the API may add within ``/v1`` are kept (``extra="allow"``) and come back
in :meth:`ApiModel.to_json`, so a newer server's answer still reads; a value of a closed
vocabulary (a job's ``status``, a leg's name) is a plain ``str``, as the API may add
values too (the known ones are the ``StrEnum`` classes below). The inputs
(:class:`DocumentInput`, :class:`Link`, :class:`GraphOptions`) refuse a field they do not
know, as the API does.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "Answer",
    "AnswerEvent",
    "AnswerLeg",
    "AnswerTimings",
    "AnswerTokens",
    "ApiModel",
    "Citation",
    "CitationEvent",
    "ContextPassage",
    "DeltaEvent",
    "Document",
    "DocumentDeleted",
    "DocumentInput",
    "DocumentLinks",
    "DocumentPage",
    "DoneEvent",
    "Encoding",
    "ErrorEvent",
    "Explanation",
    "Facet",
    "FacetBasis",
    "FacetBucket",
    "GraphOptions",
    "Hit",
    "Job",
    "JobAccepted",
    "JobItemError",
    "JobPage",
    "JobStatus",
    "LegReport",
    "LegScore",
    "Link",
    "LinkedDocument",
    "LinkedPage",
    "RetrievalEvent",
    "SearchMode",
    "SearchResponse",
    "Sentence",
    "SortClause",
    "SortInfo",
    "Support",
    "TermMatch",
    "Timings",
    "Webhook",
]


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINISHED_STATUSES = frozenset(
    {JobStatus.SUCCEEDED, JobStatus.PARTIAL, JobStatus.FAILED, JobStatus.CANCELLED}
)
"""A job in one of these has ended and changes no more."""


class SearchMode(StrEnum):
    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    KEYWORD = "keyword"


class ApiModel(BaseModel):
    """A body the API sent: unknown fields kept, names as the API spells them."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    def to_json(self) -> dict[str, Any]:
        """The body as JSON values, named as the API names them (``from``, not
        ``from_``), with any field this version does not know."""
        return self.model_dump(mode="json", by_alias=True)


# Search.


class LegScore(ApiModel):
    rank: int | None = None
    """1-based rank in the leg; ``None``: not returned by it."""
    score: float | None = None
    detail: dict[str, Any] | None = None
    """How the leg found the hit, when it says. The graph leg's: ``seed`` (the external
    id of the other legs' hit it started from), ``hops``, ``path`` (external ids from
    the seed to the hit), ``via`` (the link types along it) and ``directions`` (``out``
    along a link, ``in`` back)."""


class TermMatch(ApiModel):
    query: str
    matched: str
    kind: str
    """``typo``, ``prefix`` or ``synonym``."""
    typos: int = 0


class Explanation(ApiModel):
    method: str
    fused_score: float
    legs: dict[str, LegScore] = Field(default_factory=dict)
    dense_rank: int | None = None
    sparse_rank: int | None = None
    dense_score: float | None = None
    sparse_score: float | None = None
    rerank_score: float | None = None
    matches: list[TermMatch] = Field(default_factory=list)


class LinkedPage(ApiModel):
    """An indexed document a hit's document links to or from (``include_linked``)."""

    external_id: str
    title: str = ""
    type: str = "link"
    """The link's type (``link``, ``mention``, ...)."""
    direction: str
    """``out``: the hit links to it; ``in``: it links to the hit."""


class Hit(ApiModel):
    chunk_id: str
    document_id: str
    external_id: str
    title: str = ""
    text: str = ""
    char_start: int | None = None
    char_end: int | None = None
    snippet: str | None = None
    """The text around the query's terms, each in ``<em>…</em>`` (with ``highlight``)."""
    score: float
    matching_chunks: int = 1
    source: str = ""
    lang: str = ""
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    explanation: Explanation | None = None
    linked_pages: list[LinkedPage] | None = None
    """With ``include_linked``: the indexed documents the hit's document links to and
    from that the search's filter allows; ``None`` when not asked for (or when they
    could not be read)."""


class GraphOptions(ApiModel):
    """What the graph leg follows (a search's ``graph``; the leg runs when ``weights``
    gives ``graph`` a weight, or by the server's default). A field left ``None`` is not
    sent: the server's default applies."""

    model_config = ConfigDict(extra="forbid")

    scoring: str | None = None
    """``proximity`` (the sum over seeds of 1/hops), ``pagerank`` (personalised
    PageRank from the seeds) or ``bridge`` (the documents linked to the best hit that
    the other legs found too, by their match)."""
    depth: int | None = None
    """Hops followed from a seed, 1 to 3 (proximity)."""
    types: list[str] | None = None
    """Follow only links of these types (``None``: every type)."""
    direction: str | None = None
    """``out`` (along links), ``in`` (back-links) or ``both``."""
    seeds: int | None = None
    """How many of each other leg's best documents seed the walk, 1 to 100."""
    include_seeds: bool | None = None
    """Rank the seeds by the graph leg too (by default only what the links lead to)."""
    alpha: float | None = None
    """PageRank's restart probability, strictly between 0 and 1."""


class LegReport(ApiModel):
    leg: str
    status: str
    """``ok``, ``timeout``, ``error`` or ``skipped``."""
    took_ms: float = 0.0
    candidates: int = 0
    error: str | None = None


class FacetBucket(ApiModel):
    value: str | int | float | bool
    count: int
    from_: float | None = Field(default=None, alias="from")
    to: float | None = None


class Facet(ApiModel):
    field: str
    buckets: list[FacetBucket] = Field(default_factory=list)
    missing: int = 0
    other: int = 0


class FacetBasis(ApiModel):
    unit: str
    scope: str
    exact: bool


class SortClause(ApiModel):
    field: str
    order: str


class SortInfo(ApiModel):
    by: list[SortClause]
    basis: str
    window: int


class Timings(ApiModel):
    plan_ms: float = 0.0
    cache_ms: float = 0.0
    encode_ms: float = 0.0
    statistics_ms: float = 0.0
    retrieval_ms: float = 0.0
    fusion_ms: float = 0.0
    facets_ms: float = 0.0
    rerank_ms: float = 0.0
    hydrate_ms: float = 0.0


class SearchResponse(ApiModel):
    """One page of a search (``POST /v1/search``)."""

    query: str
    mode: str
    method: str
    offset: int = 0
    top_k: int
    total: int
    total_exact: bool = True
    total_relation: str = "eq"
    """``eq``: ``total`` is the count; ``gte``: a lower bound."""
    total_basis: str = "matches"
    window: int = 0
    total_candidates: int = 0
    """Deprecated by the API: the same as ``window``."""
    degraded: list[str] = Field(default_factory=list)
    legs: list[LegReport] = Field(default_factory=list)
    took_ms: float = 0.0
    rerank_ms: float | None = None
    timings: Timings = Field(default_factory=Timings)
    cached: bool = False
    next_cursor: str | None = None
    """Send it as ``cursor`` with the same search for the next page."""
    weights: dict[str, float] = Field(default_factory=dict)
    applied_weights: dict[str, float] = Field(default_factory=dict)
    keyword_coverage: float | None = None
    """The share of the query the keyword leg's first hit holds, when the fusion reads
    it."""
    expansions: list[TermMatch] = Field(default_factory=list)
    hits: list[Hit]
    facets: list[Facet] = Field(default_factory=list)
    facet_basis: FacetBasis | None = None
    sort: SortInfo | None = None


# Answers.


class Support(ApiModel):
    passage: int
    score: float


class Sentence(ApiModel):
    index: int
    text: str
    start: int
    end: int
    citations: list[int] = Field(default_factory=list)
    supported: bool
    support: list[Support] = Field(default_factory=list)


class Citation(ApiModel):
    number: int
    """The marker ``[number]`` in the answer."""
    chunk_id: str
    document_id: str
    external_id: str
    title: str = ""
    quote: str
    """The passage's sentence that supports the citing sentence."""
    char_start: int | None = None
    char_end: int | None = None


class ContextPassage(ApiModel):
    number: int
    chunk_id: str
    document_id: str
    external_id: str
    title: str = ""
    text: str
    score: float
    rank: int
    char_start: int | None = None
    char_end: int | None = None
    truncated: bool = False


class AnswerLeg(ApiModel):
    leg: str
    status: str
    took_ms: float = 0.0
    candidates: int = 0
    error: str | None = None


class AnswerTimings(ApiModel):
    retrieval_ms: float = 0.0
    packing_ms: float = 0.0
    first_token_ms: float | None = None
    generation_ms: float = 0.0
    total_ms: float = 0.0


class AnswerTokens(ApiModel):
    prompt: int | None = None
    completion: int | None = None
    context: int = 0
    calls: int = 0


class BudgetLine(ApiModel):
    used: float
    allowed: float


class Claim(ApiModel):
    """A statement a lazy search took from a relevant chunk: ``text`` lies at
    ``start:end`` of the chunk's text."""

    text: str
    chunk_id: str
    start: int
    end: int
    score: float


class LazyReport(ApiModel):
    """A lazy search's budget (``relevance_tests``, ``llm_calls``, ``tokens``,
    ``elapsed_ms``: used and allowed), why it stopped, how far it went, its claims."""

    budget: dict[str, BudgetLine] = Field(default_factory=dict)
    stopped: str = ""
    levels: dict[str, int] = Field(default_factory=dict)
    depth: int = 0
    tested: int = 0
    relevant: int = 0
    claims: list[Claim] = Field(default_factory=list)
    tester: str = ""
    session: str | None = None
    """Pass as ``follow_up`` to reuse this search in the next turn."""
    followed: bool = False


class Answer(ApiModel):
    """An answer (``POST /v1/answer``): ``answer`` is ``None`` when none could be written
    (``degraded`` says why), and the passages found are there either way."""

    query: str
    standalone_query: str
    answer: str | None
    sentences: list[Sentence] = Field(default_factory=list)
    citations: list[Citation] = Field(default_factory=list)
    unsupported_sentences: int = 0
    passages: list[ContextPassage] = Field(default_factory=list)
    legs: list[AnswerLeg] = Field(default_factory=list)
    degraded: list[str] = Field(default_factory=list)
    model: str | None = None
    prompt_version: str | None = None
    timings: AnswerTimings = Field(default_factory=AnswerTimings)
    tokens: AnswerTokens = Field(default_factory=AnswerTokens)
    cached: bool = False
    strategy: str = "default"
    lazy: LazyReport | None = None
    """What a lazy search did (``strategy="lazy"``)."""


class ProgressEvent(ApiModel):
    """A lazy search's progress, before the ``retrieval`` event."""

    event: Literal["progress"] = "progress"
    stage: str
    """``starting``, ``testing``, ``deepening``, then why it stopped: ``sufficient``,
    ``budget_spent`` or ``exhausted``."""
    tested: int = 0
    relevant: int = 0
    claims: int = 0


class RetrievalEvent(ApiModel):
    """The stream's first event: the passages the answer is written from."""

    event: Literal["retrieval"] = "retrieval"
    standalone_query: str
    passages: list[ContextPassage] = Field(default_factory=list)


class DeltaEvent(ApiModel):
    """More of the answer's text, as the model writes it."""

    event: Literal["delta"] = "delta"
    text: str


class CitationEvent(ApiModel):
    """A sentence of the answer checked against the passages, with its citations."""

    event: Literal["citation"] = "citation"
    sentence: Sentence
    citations: list[Citation] = Field(default_factory=list)


class ErrorEvent(ApiModel):
    """The model broke off (``error`` is a stable code); ``done`` still follows."""

    event: Literal["error"] = "error"
    error: str
    detail: str = ""


class DoneEvent(ApiModel):
    """The last event: the whole answer, as without streaming."""

    event: Literal["done"] = "done"
    answer: Answer


AnswerEvent = ProgressEvent | RetrievalEvent | DeltaEvent | CitationEvent | ErrorEvent | DoneEvent
"""One event of an answer's stream; ``event`` names which."""


# Documents and jobs.


class Link(ApiModel):
    """A link to another document of the tenant, to submit (``LinkCreate`` in the API)."""

    model_config = ConfigDict(extra="forbid")

    target: str
    """The linked document's external id; it need not be indexed yet (the link resolves
    when it is)."""
    type: str = "link"
    """What the link is (a free name): a search can follow only some types."""
    weight: float = 1.0
    """How much the link counts in the graph leg."""


class DocumentInput(ApiModel):
    """A document to submit (``DocumentCreate`` in the API)."""

    model_config = ConfigDict(extra="forbid")

    external_id: str
    text: str
    title: str = ""
    source: str = ""
    lang: str = ""
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    links: list[Link] = Field(default_factory=list)
    """Its links to other documents of the tenant (a target and type given twice counts
    once, with the larger weight)."""
    text_links: list[str] | None = None
    """The links to find in its text: ``hyperlinks`` (Markdown, HTML and ``[[wiki]]``
    links naming a document) and ``mentions`` (other documents' titles named in it);
    ``None``: the tenant's setting."""


class Document(ApiModel):
    external_id: str
    status: str
    """``indexed``, or ``pending`` when only an unfinished job holds it."""
    title: str = ""
    source: str = ""
    lang: str = ""
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    chunk_count: int = 0
    pending_jobs: list[uuid.UUID] = Field(default_factory=list)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    text: str | None = None
    """The full text as submitted: only when asked for (``include_text``)."""


class DocumentPage(ApiModel):
    documents: list[Document]
    next_cursor: str | None = None


class LinkedDocument(ApiModel):
    """A document at the other end of a link, and the link."""

    external_id: str
    title: str | None = None
    """``None``: no document of that external id is indexed (the link is unresolved
    until one is)."""
    type: str = "link"
    weight: float = 1.0
    direction: str
    """``out``: the document links to it; ``in``: it links to the document."""
    origin: str = "given"
    """``given`` (submitted or set by a patch) or ``text`` (found in the text)."""


class DocumentLinks(ApiModel):
    """A document's links (``GET /v1/documents/{external_id}/links``)."""

    external_id: str
    out: list[LinkedDocument] = Field(default_factory=list)
    """Its links, resolved or not, by type then target."""
    back: list[LinkedDocument] = Field(default_factory=list)
    """The indexed documents linking to it, by type then source."""


class CommunityDocument(ApiModel):
    external_id: str
    title: str = ""


class Community(ApiModel):
    """A concept community of the tenant's Level 1 index (``GET /v1/communities``)."""

    id: str
    level: int
    parent: str | None = None
    children: list[str] = Field(default_factory=list)
    concepts: list[str] = Field(default_factory=list)
    """Representative phrases, best first."""
    size: int = 0
    chunk_count: int = 0
    documents: list[CommunityDocument] = Field(default_factory=list)


class CommunityList(ApiModel):
    version: str
    communities: list[Community] = Field(default_factory=list)


class CommunityChunk(ApiModel):
    chunk_id: str
    external_id: str
    title: str = ""
    concepts: list[str] = Field(default_factory=list)


class CommunityDetail(Community):
    """One community with its chunks, best first (``GET /v1/communities/{id}``)."""

    version: str
    chunks: list[CommunityChunk] = Field(default_factory=list)


class DocumentDeleted(ApiModel):
    external_id: str
    deleted_chunks: int
    superseded_jobs: list[uuid.UUID] = Field(default_factory=list)


class JobItemError(ApiModel):
    ordinal: int = 0
    external_id: str
    error: str


class Webhook(ApiModel):
    url: str
    attempts: int = 0
    delivered_at: datetime | None = None
    next_attempt_at: datetime | None = None
    error: str | None = None


class Encoding(ApiModel):
    """A large document a worker is encoding for the job, and how far it has got."""

    document: str
    done: int
    total: int
    updated_at: datetime | None = None


class Job(ApiModel):
    id: uuid.UUID
    kind: str = "ingest"
    """``ingest`` or ``delete``."""
    status: str
    """A :class:`JobStatus` value."""
    total: int | None = None
    """``None`` for a delete job not started yet (its documents are selected then)."""
    indexed: int = 0
    skipped: int = 0
    failed: int = 0
    deleted: int = 0
    error: str | None = None
    attempts: int = 0
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    searchable_at: datetime | None = None
    errors: list[JobItemError] = Field(default_factory=list)
    """The first failed documents (up to 100; none in a list of jobs)."""
    webhook: Webhook | None = None
    request_id: str | None = None
    encoding: Encoding | None = None
    processed: int = 0
    """Documents the job is done with, whatever became of them (counted from the others
    when a server does not send it)."""

    @model_validator(mode="after")
    def _count_processed(self) -> Job:
        if "processed" not in self.model_fields_set:
            self.processed = self.indexed + self.skipped + self.failed + self.deleted
        return self

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    @property
    def failed_ids(self) -> frozenset[str] | None:
        """The external ids of its failed documents, or ``None`` when the API listed
        only some of them."""
        if len(self.errors) < self.failed:
            return None
        return frozenset(e.external_id for e in self.errors)


class JobAccepted(ApiModel):
    job_id: uuid.UUID
    status: str = JobStatus.QUEUED.value
    total: int | None = None
    status_url: str = ""


class JobPage(ApiModel):
    jobs: list[Job]
    next_cursor: str | None = None


class TenantSettings(ApiModel):
    """The tenant's settings (``GET /v1/settings``)."""

    text_links: list[str] = Field(default_factory=list)
    """The kinds of links found in documents' texts when their submission does not say
    (``hyperlinks``, ``mentions``)."""
