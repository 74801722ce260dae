from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hsearch.types import FusionMethod, Leg, LegStatus, SearchMode


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4096)
    top_k: int = Field(default=10, ge=1, le=1000, description="Hits per page.")
    offset: int = Field(default=0, ge=0, le=10000)
    mode: SearchMode = SearchMode.HYBRID
    fusion: FusionMethod | None = Field(
        default=None, description="Fusion method; unset: the configured default."
    )
    rrf_k: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="k of 1 / (k + rank) for rrf, and for adaptive when no leg's best "
        "candidate stands out (default: the configured one, 60).",
    )
    weights: dict[Leg, float] | None = Field(
        default=None, description='Per-leg weights, e.g. {"dense": 0.7, "sparse": 0.3}.'
    )
    filter: dict[str, Any] | None = None
    candidates: int | None = Field(default=None, ge=1, le=16384)
    leg_timeout_ms: int | None = Field(default=None, ge=1, le=60000)
    min_score: float | None = None
    group_by_document: bool = False
    rerank: bool = Field(
        default=False, description="Rescore the best fused hits with the cross-encoder."
    )
    highlight: bool = Field(default=True, description="Add a snippet with query terms in <em>.")
    facets: list[str | dict[str, Any]] = Field(
        default_factory=list,
        description='Fields to count over the fused candidates: "source", or '
        '{"field": "metadata.year", "size": 10, "ranges": [{"from": 2000, "to": 2010}]}.',
    )


class ExplanationRead(BaseModel):
    method: FusionMethod
    fused_score: float
    dense_rank: int | None
    sparse_rank: int | None
    dense_score: float | None
    sparse_score: float | None
    rerank_score: float | None


class HitRead(BaseModel):
    chunk_id: str
    document_id: str
    external_id: str
    title: str
    text: str
    snippet: str | None
    score: float
    matching_chunks: int
    source: str
    lang: str
    tags: list[str]
    metadata: dict[str, Any]
    explanation: ExplanationRead


class LegRead(BaseModel):
    leg: Leg
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


class SearchResponse(BaseModel):
    query: str
    mode: SearchMode
    method: FusionMethod
    offset: int
    top_k: int
    total_candidates: int
    degraded: list[Leg]
    legs: list[LegRead]
    took_ms: float
    rerank_ms: float | None
    weights: dict[Leg, float] = Field(
        description="Per leg that answered: the weight the query was fused with "
        "(configured or requested; 0 for a dense encoder that cannot read the query)."
    )
    applied_weights: dict[Leg, float] = Field(
        description="Per active leg: its share of this query's fusion (sums to 1). "
        "For adaptive fusion, moved from `weights` towards the legs whose best "
        "candidate stands out (docs/fusion.md)."
    )
    hits: list[HitRead]
    facets: list[FacetRead]
