"""Drift between the documents and what is derived from them, found and repaired
(``hsearch reconcile [--repair]``).

Every registered kind of derived data (:mod:`hsearch.ingestion.derived`) checks a
tenant and repairs what it found; the report shows each kind's figures. Per tenant:

* **chunks** (the vector store): the metadata database records, per indexed document,
  the ids of its chunks (``documents.chunk_ids``); the store should hold exactly those.

  * *orphans*: chunks the store holds that no document records and no write in flight
    will record (an item of an unfinished job records the ids it is about to write
    before it writes them, so those are left alone). They are searchable and belong to
    nothing: repair deletes them by primary key.
  * *missing*: chunks a document records that the store lacks (a lost write, a restored
    backup). The document is incomplete or unsearchable: repair submits it again from
    its stored text, as a job of its own, with its content hash cleared so that the
    indexer does not skip it as unchanged.

* **lexical statistics**: the tenant's BM25 statistics against the sum of its
  documents' recorded contributions; repair replaces them by that sum.
* **vocabulary**: the words of the documents' text the tenant's vocabulary lacks;
  repair lists them.

Run it with ingestion idle for an exact report; a write that finishes during the scan
can show as drift that is gone on the next run.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hsearch.config import IngestSettings
from hsearch.db.engine import SessionFactory, transaction
from hsearch.db.repositories.documents import DocumentRepository
from hsearch.db.repositories.links import LinkRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.graph.links import Link, LinkOrigin, TextLinks
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.derived.chunks import ChunkDrift
from hsearch.ingestion.derived.protocol import KindDrift
from hsearch.ingestion.derived.registry import DerivedKinds, standard_kinds
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import JobQueue
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.vectorstore.protocol import VectorStore

__all__ = ["Drift", "Reconciler"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Drift:
    """One tenant's drift: what each registered kind found."""

    tenant_id: str
    documents: int
    kinds: tuple[KindDrift, ...] = ()
    """Each kind's drift, in registration order."""
    repaired: bool = False
    repair_job: uuid.UUID | None = None
    """The (first) job that re-indexes the documents a repair submitted again."""

    @property
    def clean(self) -> bool:
        return all(k.clean for k in self.kinds)

    def figures(self) -> dict[str, object]:
        """Every kind's figures, for the report line."""
        out: dict[str, object] = {}
        for kind in self.kinds:
            out.update(kind.figures())
        return out

    @property
    def _chunks(self) -> ChunkDrift | None:
        return next((k for k in self.kinds if isinstance(k, ChunkDrift)), None)

    @property
    def orphans(self) -> tuple[str, ...]:
        """Chunk ids in the store that no document records (sorted)."""
        chunks = self._chunks
        return () if chunks is None else chunks.orphans

    @property
    def missing(self) -> dict[str, int]:
        """Per external id, how many of the document's chunks the store lacks."""
        chunks = self._chunks
        return {} if chunks is None else chunks.missing

    @property
    def recorded_chunks(self) -> int:
        chunks = self._chunks
        return 0 if chunks is None else chunks.recorded_chunks

    @property
    def stored_chunks(self) -> int:
        chunks = self._chunks
        return 0 if chunks is None else chunks.stored_chunks


class Reconciler:
    def __init__(
        self,
        sessions: SessionFactory,
        *,
        store: VectorStore,
        queue: JobQueue,
        settings: IngestSettings,
        derived: DerivedKinds | None = None,
    ) -> None:
        """``derived``: the kinds checked (default:
        :func:`~hsearch.ingestion.derived.registry.standard_kinds` on ``store``)."""
        self._sessions = sessions
        self._queue = queue
        self._settings = settings
        self._derived = derived or standard_kinds(
            store=store, statistics=LexicalStatistics(sessions)
        )

    def tenants(self) -> list[str]:
        """Every tenant, in id order: those registered (a tenant with no document left
        may still have chunks in the store) and those with documents."""
        with self._sessions() as session:
            registered = {t.id for t in TenantRepository(session).list_all_tenants()}
            holding = DocumentRepository(session).tenant_ids_all_tenants()
        return sorted(registered | holding)

    def require(self, tenant_ids: Sequence[str]) -> None:
        """Raise TenantNotFoundError naming the first of ``tenant_ids`` that is not a
        tenant (a mistyped id would otherwise report a tenant with nothing, no drift)."""
        known = set(self.tenants())
        for tenant_id in tenant_ids:
            if tenant_id not in known:
                raise TenantNotFoundError(f"tenant {tenant_id!r} not found")

    def check(self, tenant_id: str) -> Drift:
        """Every registered kind's drift for the tenant."""
        kinds = self._derived.check(self._sessions, tenant_id)
        with self._sessions() as session:
            documents = DocumentRepository(session).count(tenant_id)
        return Drift(tenant_id=tenant_id, documents=documents, kinds=kinds)

    def repair(self, drift: Drift) -> Drift:
        """Each kind's drift repaired by the kind (the orphan chunks deleted, ...); the
        documents a kind asks for are submitted again."""
        done = self._derived.repair(self._sessions, drift.kinds)
        if done.changed:
            with transaction(self._sessions) as session:
                # Searches found what changed (the orphans): cached results go stale.
                TenantRepository(session).bump_generation(drift.tenant_id)
        job_id = self._resubmit(drift.tenant_id, done.resubmit) if done.resubmit else None
        return replace(drift, repaired=True, repair_job=job_id)

    def _resubmit(self, tenant_id: str, external_ids: Sequence[str]) -> uuid.UUID:
        """Submit the documents again (in as many jobs as the batch limit needs);
        returns the first job's id."""
        size = self._settings.max_documents_per_request
        jobs = [
            self._resubmit_batch(tenant_id, external_ids[i : i + size])
            for i in range(0, len(external_ids), size)
        ]
        return jobs[0]

    def _resubmit_batch(self, tenant_id: str, external_ids: Sequence[str]) -> uuid.UUID:
        with transaction(self._sessions) as session:
            docs = DocumentRepository(session).by_external_ids(tenant_id, external_ids)
            stored = LinkRepository(session).stored_from(tenant_id, [d.id for d in docs])
            inputs = [
                DocumentInput(
                    external_id=d.external_id,
                    text=d.content,
                    title=d.title,
                    source=d.source,
                    lang=d.lang,
                    tags=tuple(d.tags),
                    metadata=dict(d.metadata_),
                    # Its links as they stand (unresolved ones too); those found in the
                    # text are found again.
                    links=tuple(
                        Link(r.target_external_id, r.type, r.weight)
                        for r in sorted(
                            stored.get(d.id, ()), key=lambda r: (r.type, r.target_external_id)
                        )
                        if r.origin == LinkOrigin.GIVEN.value
                    ),
                    text_links=(
                        None if d.text_links is None else frozenset(map(TextLinks, d.text_links))
                    ),
                )
                for d in docs
            ]
            for d in docs:
                d.content_hash = ""  # not "unchanged": the indexer writes it again
        with unit_of_work(self._sessions, queue=self._queue) as uow:
            job = JobService(uow, settings=self._settings).submit(
                tenant_id=tenant_id, documents=inputs
            )
        logger.warning(
            "reconcile.resubmitted tenant=%s documents=%d job_id=%s",
            tenant_id,
            len(inputs),
            job.id,
        )
        return job.id
