"""``/v1/stats``: a tenant's figures (a key with the admin scope), or any or every
tenant's (an operator credential); docs/metrics.md, Stats."""

from __future__ import annotations

from collections.abc import Mapping

import anyio.to_thread
from fastapi import APIRouter

from hsearch.concepts.store import ConceptStatus
from hsearch.stats import Stats
from hsearch_api.deps import ServicesDep, StatsTenantDep
from hsearch_api.schemas.communities import ConceptStatusRead
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
    its Level 1 (concept) index; search latency per leg, degraded share and cache hit
    ratio."""
    found = await anyio.to_thread.run_sync(services.stats().stats, tenant)
    levels: dict[str, ConceptStatus] = {}
    if services.concepts is not None:
        for t in found.tenants:
            # A tenant's own request starts a build of its current data in the
            # background; an operator's view of every tenant only looks.
            levels[t.tenant] = (
                await services.concepts.observe(t.tenant)
                if tenant is not None
                else services.concepts.status(t.tenant)
            )
    return stats_read(found, levels=levels)


def concept_status_read(status: ConceptStatus) -> ConceptStatusRead:
    return ConceptStatusRead(
        state=status.state,
        version=status.version,
        chunks=status.chunks,
        concepts=status.concepts,
        links=status.links,
        communities={str(level): n for level, n in status.communities.items()},
        build_s=status.build_s,
        building=status.building,
        stage=status.stage,
        fraction=status.fraction,
        error=status.error,
    )


def stats_read(found: Stats, *, levels: Mapping[str, ConceptStatus] | None = None) -> StatsRead:
    figures = found.search
    levels = levels or {}
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
                level1=(concept_status_read(levels[t.tenant]) if t.tenant in levels else None),
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
