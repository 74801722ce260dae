"""Search request and response bodies.

The bounds that are server settings (``top_k``, ``candidates``, ``leg_timeout_ms``) are
not written here: :func:`search_request_model` adds them from the settings the app is
built with, so the OpenAPI document advertises exactly what the server enforces. The
same goes for the legs: the registered sources' names, as the ``Leg`` enum, key the
request's ``weights`` and every leg-named field of the response
(:func:`search_response_model`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    create_model,
)

from hsearch.config import SearchSettings
from hsearch.search.fusion import MAX_RRF_K, MIN_RRF_K
from hsearch.search.planner import MAX_QUERY_CHARS
from hsearch.search.sorting import MAX_SORT_CLAUSES, SortOrder
from hsearch.types import (
    CountScope,
    CountUnit,
    FusionMethod,
    LegStatus,
    SearchMode,
    TotalRelation,
    TotalTracking,
)

# Numbers are strict: JSON's true is not the number 1, nor "5" the number 5 (lax
# validation would take both). A whole number is still a valid float. So are booleans:
# "no", "off", "false" or 1 are not a boolean (lax validation would read them as one).
LegWeight = Annotated[
    StrictFloat,
    Field(
        ge=0.0,
        le=1.0,
    ),
]


SORT_CLAUSE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "string",
            "description": 'A field, or a field and an order: "metadata.year:desc".',
        },
        {
            "type": "object",
            "properties": {
                "field": {"type": "string"},
                "order": {"enum": [o.value for o in SortOrder]},
            },
            "required": ["field"],
            "additionalProperties": False,
        },
    ]
}
"""One clause of a search request's ``sort``, as the OpenAPI document shows it."""


class SearchRequest(BaseModel):
    """The body of ``POST /v1/search``, without the server's limits: the app serves
    ``search_request_model(settings.search)``."""

    # NaN and infinities are refused in every number of the body (a NaN min_score
    # would filter out every hit, and a NaN never equals itself in a cache key).
    model_config = ConfigDict(
        extra="forbid",
        allow_inf_nan=False,
        json_schema_extra={
            "examples": [
                {"query": "how do I reset my password", "top_k": 5},
                {
                    "query": "password reset",
                    "mode": "hybrid",
                    "top_k": 10,
                    "filter": {"tags": {"contains_any": ["team-a"]}},
                    "facets": ["source"],
                },
            ]
        },
    )

    query: str = Field(min_length=1, max_length=MAX_QUERY_CHARS)
    top_k: StrictInt = Field(default=10, ge=1, description="Hits per page.")
    offset: StrictInt = Field(
        default=0,
        ge=0,
        description="Where the page starts in the fused ranking. An offset at or past "
        "`candidates` (the depth asked for) is refused with 422 naming `offset`; one below "
        "it but at or past the results found (the response's `window`) is an empty page "
        "(200, no hits, `next_cursor` null). Not with `cursor`: both are a 422.",
    )
    cursor: str | None = Field(
        default=None,
        description="Opaque: a previous response's `next_cursor`, sent with the same search: the "
        "next page, cut from the same fused list as that response (pages neither repeat "
        "nor skip hits across writes while it is kept; docs/api.md, Caching). Replaces "
        "`offset`: sending both (even `offset: 0`) is a 422 naming both; `top_k` may "
        "change.",
    )
    mode: SearchMode = SearchMode.HYBRID
    fusion: FusionMethod | None = Field(
        default=None,
        description="Fusion method; unset: the server's default (the encoder's unless "
        "HSEARCH_SEARCH__FUSION is set; docs/fusion.md).",
    )
    rrf_k: StrictInt | None = Field(
        default=None,
        ge=MIN_RRF_K,
        le=MAX_RRF_K,
        description="k of 1 / (k + rank) for rrf, and for adaptive when no leg's best "
        "candidate stands out (default: the server's for the method).",
    )
    weights: dict[str, LegWeight] | None = Field(
        default=None,
        description='Per-leg weights, e.g. {"dense": 0.7, "sparse": 0.3}; a leg not named '
        "gets 0 (default: the server's for the method).",
    )
    filter: dict[str, Any] | None = None
    candidates: StrictInt | None = Field(
        default=None,
        ge=1,
        description="The window: candidates each leg fetches, at least top_k (default: the "
        "configured one, whatever top_k and offset). Pages run through the first "
        "`candidates` fused results; the total and facets count the dense leg's window.",
    )
    leg_timeout_ms: StrictInt | None = Field(
        default=None,
        ge=1,
        description="Time budget of the retrieval, from the start of the request: query "
        "encoding and the legs (which run in parallel) share it, and a leg still running "
        "when it is spent is reported `timeout` (default: the configured one).",
    )
    min_score: StrictFloat | None = Field(
        default=None, description="Drop fused candidates scoring below this (finite)."
    )
    group_by_document: StrictBool = False
    rerank: StrictBool = Field(
        default=False, description="Rescore the best fused hits with the cross-encoder."
    )
    highlight: StrictBool = Field(
        default=True, description="Add a snippet with query terms in <em>."
    )
    typo_tolerance: StrictBool | None = Field(
        default=None,
        description="A query word of 5 or more letters the tenant's documents do not hold "
        "also matches their words within one typo (two from 9 letters; a swap of two "
        "letters is one), weighted below exact matches; `expansions` in the response and "
        "each hit's `explanation.matches` say which word matched which (docs/search.md, "
        "Typos). Latin-script words; others are unchanged. Default: the server's "
        "(`search.typo_tolerance`, on).",
    )
    prefix: StrictBool = Field(
        default=False,
        description="The last query word also matches as the start of longer words, "
        "the tenant's most frequent first (search as you type).",
    )
    track_total: StrictBool | TotalTracking = Field(
        default=TotalTracking.BOUND,
        description="How `total` and the facets are counted (as Elasticsearch's "
        "`track_total_hits`). `bound` (the default): from what the legs returned, no "
        "request more; `total` is exact (`total_relation` `eq`) when the legs' windows hold "
        "every match, else a lower bound (`gte`), and the facets count the window. "
        "`exact` or true: count every keyword match for both (up to the server's count "
        "limit; one store request more). `window` or false: count the window only "
        "(`total_basis` `window`).",
    )
    facets: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description="Fields to count over the window, or over every match with "
        '`track_total` "exact" (`facet_basis` in the response says which): "source", or '
        '{"field": "metadata.year", "size": 10, "ranges": [{"from": 2000, "to": 2010}]}.',
    )
    facet_unit: CountUnit = Field(
        default=CountUnit.DOCUMENT,
        description="What facets count: documents (each once per value, however many of "
        "its chunks match) or chunks.",
    )
    # Items are typed in the schema only: hsearch.search.sorting parses them, so that an
    # invalid clause is refused naming it (``sort[1].order``), not a union's branches.
    sort: list[Any] = Field(
        default_factory=list,
        max_length=MAX_SORT_CLAUSES,
        description="Order the window (the first `candidates` fused results, which pages, "
        "cursors and offsets then cut) by fields instead of relevance: a list of clauses, "
        'each {"field": ..., "order": "asc" | "desc"}, a field ("metadata.year"), or a field '
        'and an order ("metadata.year:desc"). Fields: `_score` (relevance, default desc), '
        "`external_id`, `title`, `source`, `lang`, `created_at` and `metadata.<key>` "
        "paths (default asc). A hit without the field sorts last in either order; ties "
        "keep the relevance order (docs/search.md, Sorting). Empty: by relevance.",
        examples=[[{"field": "metadata.year", "order": "desc"}, "_score"]],
        json_schema_extra={"items": SORT_CLAUSE_SCHEMA},
    )
    # Checked by the graph leg (hsearch.graph.params), which names the field it refuses.
    graph: dict[str, Any] | None = Field(
        default=None,
        description="What the graph leg follows (run it with `weights.graph` > 0, or a "
        "server default): `scoring` (`proximity`: the sum over seeds of 1/hops, or "
        "`pagerank`: personalised PageRank, or `bridge`: the documents linked to the best "
        "hit that the other legs found too, by their match), `depth` (hops, 1 to 3), "
        "`types` (link types to follow; null: all), `direction` (`out`, `in`, `both`), "
        "`seeds` (each other leg's best documents that seed it, 1 to 100), "
        "`include_seeds`, `alpha` (PageRank's restart probability). docs/graph.md.",
        examples=[{"scoring": "proximity", "depth": 2, "types": ["link"]}],
    )
    include_linked: StrictBool = Field(
        default=False,
        description="Each hit lists the indexed documents it links to and from "
        "(`linked_pages`), those the search's filter (and a search token's) allows.",
    )


def leg_enum(legs: Sequence[str]) -> type[StrEnum]:
    """The ``Leg`` enum of the OpenAPI document: the registered sources' names."""
    return StrEnum("Leg", [(name.upper(), name) for name in legs], module=__name__)  # type: ignore[return-value]  # the functional API's type


def search_request_model(settings: SearchSettings, legs: Sequence[str]) -> type[SearchRequest]:
    """:class:`SearchRequest` with the limits of ``settings``: the maxima of ``top_k``,
    ``offset``, ``candidates`` and ``leg_timeout_ms`` the search service enforces
    (:class:`~hsearch.search.service.SearchService` validates with the same settings),
    and ``weights`` keyed by the registered ``legs``."""
    fields = SearchRequest.model_fields
    leg: Any = leg_enum(legs)
    return create_model(
        "SearchRequest",
        __base__=SearchRequest,
        __module__=__name__,
        weights=(dict[leg, LegWeight] | None, fields["weights"]),
        top_k=(Annotated[StrictInt, Field(le=settings.max_top_k)], fields["top_k"]),
        # The planner refuses an offset past the request's own window with a 422 that
        # names it; this is the bound no window can exceed.
        offset=(Annotated[StrictInt, Field(le=settings.max_candidates - 1)], fields["offset"]),
        candidates=(
            Annotated[StrictInt | None, Field(le=settings.max_candidates)],
            fields["candidates"],
        ),
        leg_timeout_ms=(
            Annotated[StrictInt | None, Field(le=max_leg_timeout_ms(settings))],
            fields["leg_timeout_ms"],
        ),
    )


def max_leg_timeout_ms(settings: SearchSettings) -> int:
    """The largest whole ``leg_timeout_ms`` whose seconds (``ms / 1000``, the service's
    conversion) stay within ``max_leg_timeout_s``; exact where ``s * 1000`` rounds."""
    limit = settings.max_leg_timeout_s
    ms = int(limit * 1000)
    while (ms + 1) / 1000 <= limit:
        ms += 1
    while ms > 0 and ms / 1000 > limit:
        ms -= 1
    return ms


class LegScoreRead(BaseModel):
    rank: int | None = Field(description="1-based rank in the leg; null: not returned by it.")
    score: float | None = Field(description="The leg's raw score; null: not returned by it.")
    detail: dict[str, Any] | None = Field(
        default=None,
        description="How the leg found the hit, when it says: the graph leg gives the "
        "`seed` (external id), `hops`, the `path` of external ids from the seed and the "
        "link types along it (`via`, with `directions`: `out` along a link, `in` back).",
    )


class TermMatchRead(BaseModel):
    query: str = Field(description="The query's word (or a synonym rule's side it holds).")
    matched: str = Field(description="The word (or words) searched for because of it.")
    kind: str = Field(description="`typo`, `prefix` or `synonym`.")
    typos: int = Field(description="For a typo: how many (Damerau-Levenshtein).")


class ExplanationRead(BaseModel):
    method: FusionMethod
    fused_score: float
    legs: dict[str, LegScoreRead] = Field(
        description="Every leg of the search's mode, by name, with its rank and score "
        "(null where the leg did not return the hit)."
    )
    dense_rank: int | None = Field(description="The same as `legs.dense.rank`.")
    sparse_rank: int | None = Field(description="The same as `legs.sparse.rank`.")
    dense_score: float | None = Field(description="The same as `legs.dense.score`.")
    sparse_score: float | None = Field(description="The same as `legs.sparse.score`.")
    rerank_score: float | None
    matches: list[TermMatchRead] = Field(
        default_factory=list,
        description="The words searched for beyond the query's (the response's "
        "`expansions`) that this hit holds.",
    )


class LinkedPageRead(BaseModel):
    external_id: str
    title: str
    type: str = Field(description="The link's type (`link`, `mention`, ...).")
    direction: str = Field(description="`out`: the hit links to it; `in`: it links to the hit.")


class HitRead(BaseModel):
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    char_start: int | None = Field(
        description="Where the chunk's text starts in the document's text, in characters "
        "(Unicode code points): text == document_text[char_start:char_end]."
    )
    char_end: int | None = Field(
        description="Where the chunk's text ends in the document's text (exclusive)."
    )
    snippet: str | None
    score: float
    matching_chunks: int
    source: str
    lang: str
    tags: list[str]
    metadata: dict[str, Any]
    explanation: ExplanationRead
    linked_pages: list[LinkedPageRead] | None = Field(
        default=None,
        description="With `include_linked`: the indexed documents this hit's document "
        "links to (`out`) and from (`in`) that the search's filter allows; null when not "
        "asked for (or when they could not be read).",
    )


class LegRead(BaseModel):
    leg: str
    status: LegStatus
    took_ms: float
    candidates: int
    error: str | None


class FacetBucketRead(BaseModel):
    value: str | int | float | bool
    count: int
    from_: float | None = Field(default=None, serialization_alias="from")
    to: float | None = None


class FacetRead(BaseModel):
    field: str
    buckets: list[FacetBucketRead]
    missing: int
    other: int


class FacetBasisRead(BaseModel):
    unit: CountUnit
    scope: CountScope = Field(
        description="`matches`: every keyword match and the dense leg's window, under the "
        'filter (with `track_total` "exact", or when the window holds them all); '
        "`window`: only what the legs returned (the default when matches lie past the "
        "window, and with `min_score`)."
    )
    exact: bool = Field(description="False: the counts are lower bounds.")


class SortClauseRead(BaseModel):
    field: str
    order: SortOrder


class SortRead(BaseModel):
    """How the hits are ordered when the request sorts."""

    by: list[SortClauseRead] = Field(
        description="The clauses in the order they apply, as normalised: the last is "
        "`_score` (ties keep the relevance order; clauses sent after a `_score` clause "
        "are dropped, as they could never apply)."
    )
    basis: Literal["window"] = Field(
        description="What was sorted: `window`, the first `candidates` fused results (the "
        "response's `window` of them), never hits beyond it."
    )
    window: int = Field(description="How many results were sorted (the response's `window`).")


class TimingsRead(BaseModel):
    """Milliseconds per stage of the query path. The stages run one after another and
    sum to `took_ms`."""

    plan_ms: float = Field(description="Validation of the request into a plan.")
    cache_ms: float = Field(
        description="The result cache: the lookup, and the wait for an identical search "
        "being computed (0 when no cache is configured)."
    )
    encode_ms: float = Field(description="Query encoding (only the sides the legs read).")
    statistics_ms: float = Field(description="The tenant's BM25 statistics applied to the query.")
    retrieval_ms: float = Field(
        description="Wall time of the legs, which run in parallel. Each leg's own time is "
        "`legs[].took_ms`: those overlap, so they do not add up to this."
    )
    fusion_ms: float = Field(description="Weights, fusion, min_score and grouping.")
    facets_ms: float = Field(
        description="The total and facet counts (0 when reused from an earlier page)."
    )
    rerank_ms: float = Field(description="The cross-encoder (0 unless `rerank` was asked).")
    hydrate_ms: float = Field(description="The page mapped to hits: fields and snippets.")


class SearchResponse(BaseModel):
    query: str
    mode: SearchMode
    method: FusionMethod
    offset: int
    top_k: int
    total: int = Field(
        description="How many results the query has: chunks, or documents when grouping "
        "by document. Counted on `total_basis`, whatever `top_k` and `offset` are."
    )
    total_exact: bool = Field(
        description="False: `total` is a lower bound (keyword matches past the legs' "
        "windows not counted, more than the server counts, a leg that failed, or a window "
        "that was full under `min_score`). The same as `total_relation` `eq`."
    )
    total_relation: TotalRelation = Field(
        description="`eq`: `total` is the count; `gte`: there are at least `total` (as "
        'Elasticsearch\'s `hits.total.relation`). Send `track_total: "exact"` to count.'
    )
    total_basis: CountScope = Field(
        description="`matches`: every chunk holding a keyword query term and the dense "
        "leg's `candidates` nearest chunks, under the filter (counted, or bounded: "
        "`total_relation`); `window`: only the fused window."
    )
    window: int = Field(
        description="How many results pages run through (the first `candidates` of the "
        "fused ranking, or fewer when fewer were found)."
    )
    total_candidates: int = Field(
        description="Deprecated: the same as `window`.", json_schema_extra={"deprecated": True}
    )
    degraded: list[str] = Field(
        description="The legs that failed or missed the deadline: the hits are the other "
        "legs'. `legs[].error` says why; an error ending in `keyword fallback` means the "
        "query could not be encoded in time and the keyword leg answered without the "
        "model (docs/search.md, When the encoder fails)."
    )
    legs: list[LegRead] = Field(
        description="Every leg of the mode: `ok`, `timeout`, `error`, or `skipped` (not run: "
        "its weight is 0 for this query). `took_ms` is the leg's own time; the legs run in "
        "parallel, so their times overlap and do not add up."
    )
    took_ms: float = Field(description="The whole search: the sum of `timings`.")
    rerank_ms: float | None
    timings: TimingsRead
    cached: bool = Field(
        description="True: the result of an earlier identical search on the same data, "
        "or a page cut from a cursor's snapshot (docs/api.md, Caching); `timings` and "
        "`took_ms` are this request's."
    )
    next_cursor: str | None = Field(
        description="Send it as `cursor` with the same search for the next page; null on "
        "the window's last page."
    )
    weights: dict[str, float] = Field(
        description="Per leg that answered: the weight the query was fused with "
        "(configured or requested; 0 for a dense encoder that cannot read the query)."
    )
    applied_weights: dict[str, float] = Field(
        description="Per active leg: its share of this query's fusion (sums to 1). "
        "For adaptive fusion, moved from `weights` towards the legs whose best "
        "candidate stands out (docs/fusion.md)."
    )
    keyword_coverage: float | None = Field(
        default=None,
        description="The share of the query's weight the keyword leg's first hit holds "
        "(0 to 1), when the fusion reads it: where nothing stands out, the keyword leg's "
        "say shrinks as it grows, and the evidence that its first hit stands out is "
        "scaled by it (docs/fusion.md); null when not read.",
    )
    expansions: list[TermMatchRead] = Field(
        default_factory=list,
        description="What the keyword leg searched for beyond the words typed: typo "
        "corrections, completions of the last word (`prefix`), synonyms.",
    )
    hits: list[HitRead]
    facets: list[FacetRead]
    facet_basis: FacetBasisRead | None = Field(
        description="What the facets counted; null when no facet was asked for."
    )
    sort: SortRead | None = Field(
        description="The order of the hits when the request sorts by fields: the clauses "
        "and the basis (the window); null when the hits are in relevance order."
    )


def search_response_model(legs: Sequence[str]) -> type[SearchResponse]:
    """:class:`SearchResponse` with every leg-named field typed by the registered
    ``legs`` (the ``Leg`` enum of the OpenAPI document)."""
    leg: Any = leg_enum(legs)
    leg_read = create_model("LegRead", __base__=LegRead, __module__=__name__, leg=(leg, ...))
    explanation = create_model(
        "ExplanationRead",
        __base__=ExplanationRead,
        __module__=__name__,
        legs=(dict[leg, LegScoreRead], ExplanationRead.model_fields["legs"]),
    )
    hit = create_model(
        "HitRead", __base__=HitRead, __module__=__name__, explanation=(explanation, ...)
    )
    fields = SearchResponse.model_fields
    return create_model(
        "SearchResponse",
        __base__=SearchResponse,
        __module__=__name__,
        degraded=(list[leg], fields["degraded"]),
        legs=(list[leg_read], fields["legs"]),
        weights=(dict[leg, float], fields["weights"]),
        applied_weights=(dict[leg, float], fields["applied_weights"]),
        hits=(list[hit], fields["hits"]),
    )
