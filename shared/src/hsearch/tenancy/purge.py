"""Deleting a tenant with everything it has: ``hsearch tenants delete``.

In order, so that nothing of the tenant survives and nothing is written for it meanwhile:

1. the tenant is suspended (its keys and tokens refused: at once in this process, in
   the API processes within ``auth.cache_ttl_s``), and the purge waits ``grace_s``
   (the CLI: ``auth.cache_ttl_s``) so that no API process still accepts them: a
   request with a cached credential could otherwise submit a job after the rows are
   gone, and a submission creates its tenant's row;
2. its data generation is bumped (cached results keyed by it go stale) and its
   unfinished jobs are cancelled (workers check a document's item before writing it),
   in one committed transaction;
3. what is derived from its documents outside the metadata database is swept
   (:data:`DerivedData`, the registered kinds of :mod:`hsearch.ingestion.derived`): its
   chunks are deleted from the vector store by the tenant condition (the tenant is
   Milvus's partition key: only its partition is touched);
4. its rows are deleted in one transaction: the derived kinds' (lexical statistics,
   vocabulary), job items, jobs, documents, keys and the tenant itself; the audit log
   keeps what was done;
5. the derived data is swept again (its chunks deleted again), for whatever a worker
   already past its check wrote between 3 and 4 (its commit then fails: the tenant's
   rows are gone);
6. the purge hooks run (:data:`PurgeHook`): what caches data of the tenant outside
   the metadata database and the vector store (a Redis result cache) registers one on
   :attr:`hsearch.runtime.Services.tenant_purge_hooks` to drop it. A hook that fails is
   logged and reported; the tenant is deleted all the same.

Run again after a failure it finishes the job (each step is idempotent); a tenant whose
row is already gone is still swept from the store and the hooks with ``force``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hsearch.db.engine import Session, SessionFactory, transaction
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.tenancy.service import TenancyService
from hsearch.types import TenantStatus
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["DerivedData", "PurgeHook", "PurgeReport", "TenantPurge"]

logger = logging.getLogger(__name__)

PurgeHook = Callable[[str], None]
"""Called with the tenant id once its rows and chunks are gone: drop what you cache of it."""


class DerivedData(Protocol):
    """What is derived from the tenant's documents, as the purge removes it: the
    registered kinds (:class:`hsearch.ingestion.derived.registry.DerivedKinds`, passed
    in by the wiring; tenancy does not import ingestion)."""

    def sweep_tenant(self, tenant_id: str) -> None:
        """Remove what is kept of the tenant outside the metadata database."""
        ...

    def purge_tenant(self, session: Session, tenant_id: str) -> dict[str, int]:
        """Delete the tenant's rows in ``session``; rows deleted, by table."""
        ...


@dataclass(frozen=True, slots=True)
class PurgeReport:
    tenant_id: str
    chunks: int
    """Chunks the store held for the tenant before the purge."""
    rows: Mapping[str, int]
    """Rows deleted, by table."""
    jobs_cancelled: int
    seconds: float
    hooks_failed: tuple[str, ...] = field(default=())


class TenantPurge:
    def __init__(
        self,
        sessions: SessionFactory,
        *,
        store: VectorStore,
        derived: DerivedData,
        tenancy: TenancyService,
        hooks: Sequence[PurgeHook] = (),
    ) -> None:
        """``store``: where the tenant's chunks are counted for the report; ``derived``:
        what is derived from its documents, removed with it."""
        self._sessions = sessions
        self._store = store
        self._derived = derived
        self._tenancy = tenancy
        self._hooks = hooks

    def delete(
        self,
        tenant_id: str,
        *,
        actor: str,
        force: bool = False,
        grace_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> PurgeReport:
        """Delete the tenant and everything it has (the module docstring says how),
        waiting ``grace_s`` after the suspension for other API processes to drop the
        tenant's credentials (0: this process is the only one serving it).

        Raises:
            TenantNotFoundError: no such tenant (unless ``force``: then the store and
                the hooks are swept for it all the same).
            VectorStoreError: the store failed; nothing of the tenant's rows is deleted
                yet, and a second run finishes the job.
        """
        started = time.monotonic()
        cancelled = 0
        try:
            self._tenancy.set_tenant_status(tenant_id, TenantStatus.SUSPENDED, actor=actor)
        except TenantNotFoundError:
            if not force:
                raise
        else:
            if grace_s > 0:
                logger.info("tenant.purge.grace tenant=%s seconds=%.0f", tenant_id, grace_s)
                sleep(grace_s)
            with transaction(self._sessions) as session:
                tenants = TenantRepository(session)
                tenants.bump_generation(tenant_id)
                cancelled = tenants.cancel_jobs(tenant_id)
        chunks = self._store.count(tenant_id=tenant_id)
        self._derived.sweep_tenant(tenant_id)
        with transaction(self._sessions) as session:
            # The derived kinds' rows first: they may refer to the documents.
            rows = self._derived.purge_tenant(session, tenant_id)
            rows.update(TenantRepository(session).purge(tenant_id))
            self._tenancy.record(
                session,
                actor=actor,
                action="tenant.delete",
                tenant_id=tenant_id,
                detail={"chunks": chunks, "rows": rows, "jobs_cancelled": cancelled},
            )
        self._derived.sweep_tenant(tenant_id)
        self._tenancy.forget_tenant(tenant_id)
        failed: list[str] = []
        for hook in self._hooks:
            try:
                hook(tenant_id)
            except Exception:
                name = getattr(hook, "__qualname__", repr(hook))
                logger.exception("tenant.purge.hook_failed tenant=%s hook=%s", tenant_id, name)
                failed.append(name)
        report = PurgeReport(
            tenant_id=tenant_id,
            chunks=chunks,
            rows=rows,
            jobs_cancelled=cancelled,
            seconds=time.monotonic() - started,
            hooks_failed=tuple(failed),
        )
        logger.info(
            "tenant.purge.done tenant=%s chunks=%d rows=%d",
            tenant_id,
            chunks,
            sum(rows.values()),
        )
        return report
