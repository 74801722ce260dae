"""``/v1/stats``: a tenant's figures (a key with the admin scope), or any or every
tenant's (an operator credential); docs/metrics.md, Stats."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter

from hsearch.stats import Stats
from hsearch_api.deps import ServicesDep, StatsTenantDep
from hsearch_api.schemas.errors import COMMON_ERRORS
from hsearch_api.schemas.stats import (
    LatencyRead,
    SearchableTimesRead,
    SearchStatsRead,
    StatsRead,
    TenantStatsRead,
)

router = APIRouter(prefix="/v1", tags=["operations"], responses=COMMON_ERRORS)


@router.get("/stats")
async def stats(tenant: StatsTenantDep, services: ServicesDep) -> StatsRead:
    """Documents, chunks, jobs by status, last ingest and time to searchable per tenant;
    search latency per leg, degraded share and cache hit ratio."""
    return stats_read(await anyio.to_thread.run_sync(services.stats().stats, tenant))


def stats_read(found: Stats) -> StatsRead:
    figures = found.search
    return StatsRead(
        tenants=[
            TenantStatsRead(
                tenant=t.tenant,
                documents=t.documents,
                chunks=t.chunks,
                jobs=t.jobs,
                last_ingest_at=t.last_ingest_at,
                time_to_searchable=SearchableTimesRead(
                    jobs=t.time_to_searchable.jobs,
                    p50_s=t.time_to_searchable.p50_s,
                    p95_s=t.time_to_searchable.p95_s,
                    max_s=t.time_to_searchable.max_s,
                ),
            )
            for t in found.tenants
        ],
        search=SearchStatsRead(
            since=found.since,
            scope=found.search_scope,
            searches=figures.searches,
            outcomes=dict(figures.outcomes),
            degraded_share=figures.degraded_share,
            legs={
                leg: LatencyRead(
                    count=lat.count, p50_ms=lat.p50_ms, p95_ms=lat.p95_ms, p99_ms=lat.p99_ms
                )
                for leg, lat in figures.legs.items()
            },
            leg_outcomes={leg: dict(v) for leg, v in figures.leg_outcomes.items()},
            cache_hit_ratio=dict(figures.cache_hit_ratio),
        ),
    )
