from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from hsearch_api.schemas.communities import ConceptStatusRead


class SearchableTimesRead(BaseModel):
    jobs: int = Field(description="Ingest jobs the figures are read from (the latest 500).")
    p50_s: float | None
    p95_s: float | None
    max_s: float | None


class TenantStatsRead(BaseModel):
    tenant: str
    documents: int
    chunks: int
    jobs: dict[str, int] = Field(description="Jobs by status (jobs are kept for a while).")
    last_ingest_at: datetime | None = Field(
        description="When the tenant's latest ingest job became searchable."
    )
    time_to_searchable: SearchableTimesRead = Field(
        description="From submission to searchable, over the latest searchable jobs."
    )
    level1: ConceptStatusRead | None = Field(
        default=None,
        description="Its concept index (lazy search's Level 1) in the answering process; a "
        "tenant's own request starts a build when it is older than the tenant's data.",
    )


class LatencyRead(BaseModel):
    count: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None


class SearchStatsRead(BaseModel):
    since: datetime | None = Field(
        description="Where the figures' window starts (about metrics.stats_window_s ago); "
        "null: since the stack started."
    )
    scope: str = Field(
        description="`tenant`: the tenant's own searches (it is in "
        "metrics.tenant_allow_list); `service`: every tenant's searches."
    )
    searches: int
    outcomes: dict[str, int] = Field(description="Searches by outcome: ok, degraded, error.")
    degraded_share: float | None = Field(description="Degraded searches over searches.")
    legs: dict[str, LatencyRead] = Field(
        description="Per leg, its latency percentiles from the histogram's buckets "
        "(interpolated inside a bucket, as Prometheus' histogram_quantile does)."
    )
    leg_outcomes: dict[str, dict[str, int]] = Field(
        description="Per leg, how its runs ended (ok, timeout, error, skipped)."
    )
    cache_hit_ratio: dict[str, float | None] = Field(
        description="Per cache (result, embedding), hits over lookups."
    )


class StatsRead(BaseModel):
    tenants: list[TenantStatsRead]
    search: SearchStatsRead = Field(
        description="Since the stack started, summed over every API process."
    )
