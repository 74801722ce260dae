"""The stats API's figures (``GET /v1/stats``): per tenant from the metadata database,
and the searches' from the metrics every process records (docs/metrics.md, Stats).

Never one process's memory: the search figures are the aggregated samples of every
API process (prometheus-client's multiprocess files, :mod:`hsearch.metrics`), and the
rest are read from the job and document records.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from hsearch.db.engine import Session, SessionFactory
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.jobs import JobRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.metrics.exposition import aggregated_families
from hsearch.metrics.history import SampleHistory
from hsearch.metrics.summary import SearchFigures, search_figures, search_samples, since
from hsearch.types import JobKind, JobStatus

__all__ = ["SearchableTimes", "Stats", "StatsService", "TenantStats"]

RECENT_JOBS = 500
"""How many of a tenant's latest searchable jobs its time to searchable is read from."""


@dataclass(frozen=True, slots=True)
class SearchableTimes:
    """Seconds from submission to searchable over a tenant's latest ingest jobs that
    ended searchable (exact percentiles, nearest rank)."""

    jobs: int
    p50_s: float | None = None
    p95_s: float | None = None
    max_s: float | None = None


@dataclass(frozen=True, slots=True)
class TenantStats:
    tenant: str
    documents: int
    chunks: int
    jobs: dict[str, int]
    """Jobs by status (every status, 0 included)."""
    last_ingest_at: datetime | None
    """When the tenant's latest ingest job became searchable."""
    time_to_searchable: SearchableTimes


@dataclass(frozen=True, slots=True)
class Stats:
    tenants: tuple[TenantStats, ...]
    search: SearchFigures
    search_scope: str
    """``tenant``: the figures are the tenant's own (it is in the allow-list);
    ``service``: they cover every tenant's searches (a tenant outside the allow-list
    has no figures of its own, by design: labels stay bounded)."""
    since: datetime | None = None
    """Where the search figures' window starts (a snapshot of the samples); None: since
    the stack started (no snapshot old enough yet)."""
    allow_listed: tuple[str, ...] = field(default=())


class StatsService:
    def __init__(
        self,
        sessions: SessionFactory,
        *,
        tenant_allow_list: Collection[str],
        history: SampleHistory,
    ) -> None:
        self._sessions = sessions
        self._allowed = frozenset(tenant_allow_list)
        self._history = history

    def stats(self, tenant_id: str | None) -> Stats:
        """The figures of ``tenant_id``, or of every tenant (``None``: operators)."""
        with self._sessions() as session:
            if tenant_id is not None:
                tenants = [tenant_id]
                documents = {tenant_id: DocumentRepository(session).totals(tenant_id)}
                jobs = {tenant_id: JobRepository(session).counts_by_status(tenant_id)}
            else:  # operators: every tenant
                tenants = [t.id for t in TenantRepository(session).list_all_tenants()]
                documents = DocumentRepository(session).totals_all_tenants()
                jobs = JobRepository(session).counts_by_status_all_tenants()
            per_tenant = tuple(
                _tenant_stats(
                    session,
                    tenant,
                    documents=documents.get(tenant, (0, 0)),
                    jobs=jobs.get(tenant, {}),
                )
                for tenant in tenants
            )
        samples = search_samples(aggregated_families())
        self._history.record(samples)
        baseline = self._history.baseline()
        recent = None if baseline is None else since(samples, baseline[1])
        started = None
        if baseline is not None and recent is not None:
            samples, started = recent, datetime.fromtimestamp(baseline[0], UTC)
        if tenant_id is not None and tenant_id in self._allowed:
            figures, scope = search_figures(samples, tenant=tenant_id), "tenant"
        else:
            figures, scope = search_figures(samples), "service"
        return Stats(
            tenants=per_tenant,
            search=figures,
            search_scope=scope,
            since=started,
            allow_listed=tuple(sorted(self._allowed)) if tenant_id is None else (),
        )


def _tenant_stats(
    session: Session, tenant: str, *, documents: tuple[int, int], jobs: dict[JobStatus, int]
) -> TenantStats:
    times = JobRepository(session).searchable_times(
        tenant, kinds=[JobKind.INGEST], limit=RECENT_JOBS
    )
    seconds = sorted((aware(f) - aware(c)).total_seconds() for c, f in times)
    return TenantStats(
        tenant=tenant,
        documents=documents[0],
        chunks=documents[1],
        jobs={status.value: jobs.get(status, 0) for status in JobStatus},
        last_ingest_at=aware(times[0][1]) if times else None,
        time_to_searchable=SearchableTimes(
            jobs=len(seconds),
            p50_s=_nearest_rank(seconds, 0.5),
            p95_s=_nearest_rank(seconds, 0.95),
            max_s=seconds[-1] if seconds else None,
        ),
    )


def _nearest_rank(ordered: Sequence[float], q: float) -> float | None:
    if not ordered:
        return None
    return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 3)


def aware(moment: datetime) -> datetime:
    """SQLite hands naive datetimes back (stored as UTC); Postgres aware ones."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
