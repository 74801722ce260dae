from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, delete, func, not_, or_, select, update
from sqlalchemy.orm import Session

from hsearch.db.engine import hold_write_lock
from hsearch.db.models import IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.db.repositories.bulk import update_by_key
from hsearch.db.values import in_values
from hsearch.types import FINISHED_JOB_STATUSES, SEARCHABLE_JOB_STATUSES, JobKind


@dataclass(frozen=True, slots=True)
class ItemRow:
    """A job item's columns, read without an ORM object behind them: the indexer reads
    and changes a group's items with a statement each (:meth:`JobRepository.item_rows`,
    :meth:`JobRepository.update_items`), where objects cost it a third of its time."""

    id: int
    external_id: str
    title: str
    source: str
    lang: str
    tags: list[str]
    metadata: dict[str, Any]
    content: str
    content_hash: str
    status: JobItemStatus
    chunk_ids: list[str] | None
    links: list[dict[str, Any]] | None
    text_links: list[str] | None


@dataclass(frozen=True, slots=True)
class ItemState:
    """What of a job item changes once it is submitted: its status, and the chunk ids
    its attempts recorded (the rest of :class:`ItemRow` never changes)."""

    status: JobItemStatus
    chunk_ids: list[str] | None


_ITEM_COLUMNS = (
    JobItem.id,
    JobItem.external_id,
    JobItem.title,
    JobItem.source,
    JobItem.lang,
    JobItem.tags,
    JobItem.metadata_,
    JobItem.content,
    JobItem.content_hash,
    JobItem.status,
    JobItem.chunk_ids,
    JobItem.links,
    JobItem.text_links,
)


# The indexer's reads of a group's items, built once: a statement built per call
# coerces each id of its ``IN`` list and computes its cache key again. Each list is one
# parameter (hsearch.db.values).
_ITEM_ROWS = select(*_ITEM_COLUMNS).where(in_values(JobItem.id, "ids")).order_by(JobItem.ordinal)
_ITEM_STATES = select(JobItem.id, JobItem.status, JobItem.chunk_ids).where(
    in_values(JobItem.id, "ids")
)
_UNFINISHED = select(JobItem.document_id, JobItem.chunk_ids).where(
    in_values(JobItem.document_id, "documents"),
    JobItem.status.in_([JobItemStatus.PENDING, JobItemStatus.FAILED]),
    not_(in_values(JobItem.id, "writers")),
)


class JobRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, job: IngestionJob) -> None:
        self._session.add(job)
        self._session.flush()

    def active_count_all_tenants(self) -> int:
        """Jobs of any tenant that are queued or running."""
        active = (JobStatus.QUEUED, JobStatus.RUNNING)
        stmt = select(func.count()).select_from(IngestionJob).where(IngestionJob.status.in_(active))
        return int(self._session.scalar(stmt) or 0)

    def counts_by_status(self, tenant_id: str) -> dict[JobStatus, int]:
        """``{status: jobs}`` of the tenant (jobs are kept ``ingest.job_retention_days``
        after they end)."""
        stmt = (
            select(IngestionJob.status, func.count())
            .where(IngestionJob.tenant_id == tenant_id)
            .group_by(IngestionJob.status)
        )
        return {JobStatus(status): int(n) for status, n in self._session.execute(stmt)}

    def counts_by_status_all_tenants(self) -> dict[str, dict[JobStatus, int]]:
        """``{tenant: {status: jobs}}`` of every tenant that has jobs."""
        stmt = select(IngestionJob.tenant_id, IngestionJob.status, func.count()).group_by(
            IngestionJob.tenant_id, IngestionJob.status
        )
        out: dict[str, dict[JobStatus, int]] = {}
        for tenant, status, n in self._session.execute(stmt):
            out.setdefault(tenant, {})[JobStatus(status)] = int(n)
        return out

    def status_totals_all_tenants(self) -> dict[JobStatus, int]:
        """Jobs of every tenant by status."""
        stmt = select(IngestionJob.status, func.count()).group_by(IngestionJob.status)
        return {JobStatus(status): int(n) for status, n in self._session.execute(stmt)}

    def searchable_times(
        self, tenant_id: str, *, kinds: Sequence[JobKind], limit: int
    ) -> list[tuple[datetime, datetime]]:
        """``(created_at, finished_at)`` of the tenant's latest ``limit`` jobs of
        ``kinds`` that ended searchable, newest first."""
        stmt = (
            select(IngestionJob.created_at, IngestionJob.finished_at)
            .where(
                IngestionJob.tenant_id == tenant_id,
                IngestionJob.kind.in_(kinds),
                IngestionJob.status.in_(SEARCHABLE_JOB_STATUSES),
                IngestionJob.finished_at.is_not(None),
            )
            .order_by(IngestionJob.finished_at.desc())
            .limit(limit)
        )
        return [(c, f) for c, f in self._session.execute(stmt) if f is not None]

    def get(self, job_id: uuid.UUID, *, tenant_id: str) -> IngestionJob | None:
        """The tenant's job ``job_id`` (another tenant's is not found)."""
        return self._session.scalar(
            select(IngestionJob).where(
                IngestionJob.id == job_id, IngestionJob.tenant_id == tenant_id
            )
        )

    def get_any_tenant(self, job_id: uuid.UUID) -> IngestionJob | None:
        """The job ``job_id``, whichever tenant's: for a process that holds the id from
        its own records (the one that sent it, the webhook sender)."""
        return self._session.scalar(select(IngestionJob).where(IngestionJob.id == job_id))

    def lock(self, job_id: uuid.UUID, *, tenant_id: str) -> IngestionJob | None:
        """The tenant's job ``job_id`` (another tenant's is not found), its row locked
        for this transaction (on SQLite: the database's write lock)."""
        hold_write_lock(self._session)
        return self._session.scalar(
            select(IngestionJob)
            .where(IngestionJob.id == job_id, IngestionJob.tenant_id == tenant_id)
            .with_for_update()
        )

    def lock_any_tenant(self, job_id: uuid.UUID) -> IngestionJob | None:
        """The job ``job_id``, whichever tenant's, its row locked for this transaction
        (on SQLite: the database's write lock): for the worker, whose message names the
        job, not the tenant."""
        hold_write_lock(self._session)
        return self._session.scalar(
            select(IngestionJob).where(IngestionJob.id == job_id).with_for_update()
        )

    def pending_item_ids(self, job_id: uuid.UUID) -> list[int]:
        return list(
            self._session.scalars(
                select(JobItem.id)
                .where(JobItem.job_id == job_id, JobItem.status == JobItemStatus.PENDING)
                .order_by(JobItem.ordinal)
            )
        )

    def written_ids_all_tenants(self, *, started_before: datetime) -> list[uuid.UUID]:
        """Jobs started before ``started_before``, still running with no pending
        item: every chunk written, the job not yet reported finished (it waits for a
        flush)."""
        pending = (
            select(JobItem.id)
            .where(JobItem.job_id == IngestionJob.id, JobItem.status == JobItemStatus.PENDING)
            .exists()
        )
        return list(
            self._session.scalars(
                select(IngestionJob.id).where(
                    IngestionJob.status == JobStatus.RUNNING,
                    IngestionJob.started_at < started_before,
                    ~pending,
                )
            )
        )

    def items(self, item_ids: Sequence[int]) -> list[JobItem]:
        return list(
            self._session.scalars(
                select(JobItem).where(JobItem.id.in_(item_ids)).order_by(JobItem.ordinal)
            )
        )

    def item_rows(self, item_ids: Sequence[int]) -> list[ItemRow]:
        """The items of ``item_ids`` in submission order, as rows (:class:`ItemRow`)."""
        rows = self._session.execute(_ITEM_ROWS, {"ids": list(item_ids)})
        return [ItemRow(*row) for row in rows]

    def item_states(self, item_ids: Sequence[int]) -> dict[int, ItemState]:
        """The items of ``item_ids`` that exist, their state by id: a read of two
        columns, for an indexer that holds the items' rows from an earlier read."""
        rows = self._session.execute(_ITEM_STATES, {"ids": list(item_ids)})
        return {item_id: ItemState(status, chunk_ids) for item_id, status, chunk_ids in rows}

    def update_items(self, changes: Sequence[Mapping[str, Any]]) -> None:
        """Change items by id: each of ``changes`` holds an item's ``id`` and the
        attributes that change; one statement (executed for many parameter sets) per
        set of attributes. Items loaded as objects in this session are not refreshed."""
        update_by_key(self._session, JobItem, changes)

    def failed_items(self, job_id: uuid.UUID, *, limit: int = 100) -> list[JobItem]:
        return list(
            self._session.scalars(
                select(JobItem)
                .where(JobItem.job_id == job_id, JobItem.status == JobItemStatus.FAILED)
                .order_by(JobItem.ordinal)
                .limit(limit)
            )
        )

    def unfinished_chunk_ids_of(
        self, writers: Mapping[uuid.UUID, int]
    ) -> dict[uuid.UUID, set[str]]:
        """Per document id, the chunk ids written for it by attempts that never finished
        (pending or failed items), the items ``writers`` names (the ones writing them
        now) left out by the query: they are pending too, and usually the only ones;
        one query for them all."""
        if not writers:
            return {}
        rows = self._session.execute(
            _UNFINISHED, {"documents": list(writers), "writers": list(writers.values())}
        )
        out: dict[uuid.UUID, set[str]] = {doc: set() for doc in writers}
        for doc, ids in rows:
            if doc is not None and ids:
                out[doc].update(ids)
        return out

    def in_flight_chunk_ids(self, tenant_id: str) -> set[str]:
        """The chunk ids recorded by the tenant's pending items of unfinished jobs: what
        their attempts are about to write, or are writing."""
        rows = self._session.scalars(
            select(JobItem.chunk_ids)
            .join(IngestionJob, IngestionJob.id == JobItem.job_id)
            .where(
                IngestionJob.tenant_id == tenant_id,
                IngestionJob.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]),
                JobItem.status == JobItemStatus.PENDING,
            )
        )
        return {cid for ids in rows if ids for cid in ids}

    def stale_all_tenants(
        self, *, now: datetime, unsent_before: datetime, sent_before: datetime, limit: int = 100
    ) -> list[IngestionJob]:
        """Jobs no worker is working on, locked (skipping rows another sweeper holds):
        running with an expired lease (its worker died); queued and never sent (the
        process that committed it died before the send); or queued, sent before
        ``sent_before`` and not started, and due for a look (``lease_expires_at``, empty
        until the sweeper first re-sends it: the broker may have lost its message)."""
        hold_write_lock(self._session)
        stmt = (
            select(IngestionJob)
            .where(
                or_(
                    and_(
                        IngestionJob.status == JobStatus.RUNNING,
                        or_(
                            IngestionJob.lease_expires_at.is_(None),
                            IngestionJob.lease_expires_at < now,
                        ),
                    ),
                    and_(
                        IngestionJob.status == JobStatus.QUEUED,
                        IngestionJob.sent_at.is_(None),
                        IngestionJob.created_at < unsent_before,
                    ),
                    and_(
                        IngestionJob.status == JobStatus.QUEUED,
                        IngestionJob.sent_at < sent_before,
                        or_(
                            IngestionJob.lease_expires_at.is_(None),
                            IngestionJob.lease_expires_at < now,
                        ),
                    ),
                )
            )
            .order_by(IngestionJob.created_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return list(self._session.scalars(stmt))

    def webhooks_due_all_tenants(
        self, *, now: datetime, max_attempts: int, limit: int = 20
    ) -> list[IngestionJob]:
        """Ended jobs whose webhook is neither delivered nor given up and is due now,
        locked (skipping rows another sender holds; on SQLite, the database's write
        lock, so two workers' senders take turns)."""
        hold_write_lock(self._session)
        stmt = (
            select(IngestionJob)
            .where(
                IngestionJob.webhook_url.is_not(None),
                IngestionJob.status.in_(FINISHED_JOB_STATUSES),
                IngestionJob.webhook_delivered_at.is_(None),
                IngestionJob.webhook_attempts < max_attempts,
                or_(IngestionJob.webhook_next_at.is_(None), IngestionJob.webhook_next_at <= now),
            )
            .order_by(IngestionJob.finished_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        return list(self._session.scalars(stmt))

    def record_encoding(
        self, job_id: uuid.UUID, *, document: str, done: int, total: int, at: datetime
    ) -> None:
        """Record how far running ``job_id``'s worker has encoded ``document``: ``done``
        of its ``total`` chunks, at ``at`` (a plain update: no row is read or locked
        first, so a write holding the job's row only delays it)."""
        self._session.execute(
            update(IngestionJob)
            .where(IngestionJob.id == job_id, IngestionJob.status == JobStatus.RUNNING)
            .values(
                encoding_document=document[:512],
                encoding_done=done,
                encoding_total=total,
                encoding_at=at,
            )
            .execution_options(synchronize_session=False)
        )

    def busy_and_waiting_all_tenants(self, *, now: datetime) -> tuple[int, int]:
        """Jobs a live worker holds (running, lease unexpired, not between turns), and
        jobs whose message waits in the queue (queued and sent, or sent back between
        turns): what the sweeper weighs before re-sending a job that has not started."""
        busy = self._session.scalar(
            select(func.count())
            .select_from(IngestionJob)
            .where(
                IngestionJob.status == JobStatus.RUNNING,
                IngestionJob.between_turns.is_(False),
                IngestionJob.lease_owner.is_not(None),
                IngestionJob.lease_expires_at >= now,
            )
        )
        waiting = self._session.scalar(
            select(func.count())
            .select_from(IngestionJob)
            .where(
                or_(
                    and_(
                        IngestionJob.status == JobStatus.QUEUED,
                        IngestionJob.sent_at.is_not(None),
                    ),
                    and_(
                        IngestionJob.status == JobStatus.RUNNING,
                        IngestionJob.between_turns.is_(True),
                    ),
                )
            )
        )
        return int(busy or 0), int(waiting or 0)

    def renew_leases(self, job_ids: Sequence[uuid.UUID], *, owner: str, until: datetime) -> int:
        """Extend the leases ``owner`` holds on ``job_ids``; returns how many it holds."""
        held = self._lock_held(job_ids, owner=owner)
        if held:
            self._session.execute(
                update(IngestionJob)
                .where(IngestionJob.id.in_(held))
                .values(lease_expires_at=until)
                .execution_options(synchronize_session=False)
            )
        return len(held)

    def release_leases(self, job_ids: Sequence[uuid.UUID], *, owner: str, now: datetime) -> None:
        """Let the leases ``owner`` holds on ``job_ids`` expire now: the next sweep
        re-sends those jobs still running."""
        held = self._lock_held(job_ids, owner=owner)
        if held:
            self._session.execute(
                update(IngestionJob)
                .where(IngestionJob.id.in_(held))
                .values(lease_owner=None, lease_expires_at=now)
                .execution_options(synchronize_session=False)
            )

    def _lock_held(self, job_ids: Sequence[uuid.UUID], *, owner: str) -> list[uuid.UUID]:
        """The jobs of ``job_ids`` whose lease ``owner`` holds, their rows locked in id
        order, the order of every transaction that locks several jobs (a document's
        delete, a flush). An ``UPDATE ... WHERE id IN`` alone locks them in the order
        Postgres scans them, which can be the table's: holding one job while it waits
        for another that a delete holds, which waits for the first, deadlocks."""
        if not job_ids:
            return []
        hold_write_lock(self._session)
        return list(
            self._session.scalars(
                select(IngestionJob.id)
                .where(IngestionJob.id.in_(sorted(set(job_ids))), IngestionJob.lease_owner == owner)
                .order_by(IngestionJob.id)
                .with_for_update()
            )
        )

    def start_turn(self, job: IngestionJob, *, owner: str, until: datetime, now: datetime) -> bool:
        """Start ``job``'s next turn for ``owner`` (running, leased until ``until``, an
        attempt more unless the last turn ended as planned) if no one has started one
        since ``job`` was read; returns whether it did, with ``job`` refreshed. A
        compare-and-set on ``turn``, a guard besides the lock :meth:`lock_any_tenant`
        takes: it holds for a row read without it too."""
        result = self._session.execute(
            update(IngestionJob)
            .where(IngestionJob.id == job.id, IngestionJob.turn == job.turn)
            .values(
                status=JobStatus.RUNNING,
                attempts=case(
                    (IngestionJob.between_turns, IngestionJob.attempts),
                    else_=IngestionJob.attempts + 1,
                ),
                between_turns=False,
                turn=IngestionJob.turn + 1,
                started_at=func.coalesce(IngestionJob.started_at, now),
                lease_owner=owner,
                lease_expires_at=until,
            )
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            return False
        self._session.refresh(job)
        return True

    def take_expired(self, job: IngestionJob, *, now: datetime, until: datetime) -> bool:
        """Give running ``job``, whose lease had expired when it was read, a fresh unowned
        lease until ``until``, unless a worker has taken or renewed it since; returns
        whether it did (the caller then re-sends it)."""
        result = self._session.execute(
            update(IngestionJob)
            .where(
                IngestionJob.id == job.id,
                IngestionJob.status == JobStatus.RUNNING,
                IngestionJob.turn == job.turn,
                or_(IngestionJob.lease_expires_at.is_(None), IngestionJob.lease_expires_at < now),
            )
            .values(lease_owner=None, lease_expires_at=until)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0) == 1  # type: ignore[attr-defined]

    def take_unsent(self, job: IngestionJob, *, now: datetime) -> bool:
        """Mark queued ``job``, never sent when it was read, sent at ``now`` unless it has
        been since; returns whether it did (the caller then sends it)."""
        result = self._session.execute(
            update(IngestionJob)
            .where(
                IngestionJob.id == job.id,
                IngestionJob.status == JobStatus.QUEUED,
                IngestionJob.sent_at.is_(None),
            )
            .values(sent_at=now)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0) == 1  # type: ignore[attr-defined]

    def take_unstarted(self, job: IngestionJob, *, now: datetime, until: datetime) -> bool:
        """Mark queued ``job``, sent and due for a look when it was read, looked at again
        at ``until`` unless a worker has started it since; returns whether it did (the
        caller then sends it again)."""
        result = self._session.execute(
            update(IngestionJob)
            .where(
                IngestionJob.id == job.id,
                IngestionJob.status == JobStatus.QUEUED,
                IngestionJob.turn == job.turn,
                IngestionJob.sent_at.is_not(None),
                or_(IngestionJob.lease_expires_at.is_(None), IngestionJob.lease_expires_at < now),
            )
            .values(lease_expires_at=until)
            .execution_options(synchronize_session=False)
        )
        return int(result.rowcount or 0) == 1  # type: ignore[attr-defined]

    def resend_failed(self, job_id: uuid.UUID, *, turn: int, until: datetime) -> None:
        """The sweeper's send of ``job_id`` for ``turn`` failed: a queued job counts as
        never sent again, and a running one nobody has started since is looked at again
        at ``until``."""
        self._session.execute(
            update(IngestionJob)
            .where(IngestionJob.id == job_id, IngestionJob.status == JobStatus.QUEUED)
            .values(sent_at=None, lease_expires_at=None)
            .execution_options(synchronize_session=False)
        )
        self._session.execute(
            update(IngestionJob)
            .where(
                IngestionJob.id == job_id,
                IngestionJob.status == JobStatus.RUNNING,
                IngestionJob.lease_owner.is_(None),
                IngestionJob.turn == turn,
            )
            .values(lease_expires_at=until)
            .execution_options(synchronize_session=False)
        )

    def reopen_turn(self, job_id: uuid.UUID, *, owner: str, turn: int, now: datetime) -> None:
        """Let ``owner``'s lease on ``job_id`` expire now and, if no message has started
        a turn since ``turn``, reopen it: a message sent for it may start it again."""
        self._session.execute(
            update(IngestionJob)
            .where(
                IngestionJob.id == job_id,
                IngestionJob.lease_owner == owner,
                IngestionJob.turn == turn,
            )
            .values(turn=turn - 1)
            .execution_options(synchronize_session=False)
        )
        self.release_leases([job_id], owner=owner, now=now)

    def mark_sent(self, job_ids: Sequence[uuid.UUID], *, now: datetime) -> None:
        if job_ids:
            self._session.execute(
                update(IngestionJob)
                .where(IngestionJob.id.in_(job_ids))
                .values(sent_at=now)
                .execution_options(synchronize_session=False)
            )

    def page(
        self,
        *,
        tenant_id: str,
        status: JobStatus | None,
        before: tuple[datetime, uuid.UUID] | None,
        limit: int,
    ) -> list[IngestionJob]:
        """The tenant's jobs, newest first: keyset pages in ``(created_at, id)`` order,
        the first ``limit`` older than ``before`` (``None``: from the newest)."""
        stmt = (
            select(IngestionJob)
            .where(IngestionJob.tenant_id == tenant_id)
            .order_by(IngestionJob.created_at.desc(), IngestionJob.id.desc())
            .limit(limit)
        )
        if status is not None:
            stmt = stmt.where(IngestionJob.status == status)
        if before is not None:
            created, job_id = before
            stmt = stmt.where(
                or_(
                    IngestionJob.created_at < created,
                    and_(IngestionJob.created_at == created, IngestionJob.id < job_id),
                )
            )
        return list(self._session.scalars(stmt))

    def pending_jobs(
        self,
        tenant_id: str,
        external_ids: Sequence[str],
        *,
        kinds: Sequence[JobKind] | None = None,
    ) -> dict[str, tuple[uuid.UUID, ...]]:
        """Per external id, the tenant's unfinished jobs (of ``kinds``; default: any)
        holding a pending item of it (a version to index, or a delete to run), oldest
        first."""
        if not external_ids:
            return {}
        stmt = (
            select(JobItem.external_id, JobItem.job_id)
            .join(IngestionJob, IngestionJob.id == JobItem.job_id)
            .where(
                IngestionJob.tenant_id == tenant_id,
                IngestionJob.status.in_([JobStatus.QUEUED, JobStatus.RUNNING]),
                JobItem.status == JobItemStatus.PENDING,
                JobItem.external_id.in_(external_ids),
            )
            .order_by(IngestionJob.created_at)
        )
        if kinds is not None:
            stmt = stmt.where(IngestionJob.kind.in_(kinds))
        out: dict[str, list[uuid.UUID]] = {}
        for external_id, job_id in self._session.execute(stmt):
            out.setdefault(external_id, []).append(job_id)
        return {k: tuple(v) for k, v in out.items()}

    def pending_items_of(self, job_id: uuid.UUID, *, external_id: str) -> Sequence[JobItem]:
        """The job's pending items of the document ``external_id``."""
        return self._session.scalars(
            select(JobItem).where(
                JobItem.job_id == job_id,
                JobItem.external_id == external_id,
                JobItem.status == JobItemStatus.PENDING,
            )
        ).all()

    def purge_finished(self, *, before: datetime, limit: int = 1000) -> int:
        """Delete up to ``limit`` jobs that finished before ``before`` (their items go
        with them); returns how many."""
        ids = list(
            self._session.scalars(
                select(IngestionJob.id)
                .where(
                    IngestionJob.status.in_(FINISHED_JOB_STATUSES),
                    IngestionJob.finished_at < before,
                )
                .limit(limit)
            )
        )
        if ids:
            self._session.execute(delete(JobItem).where(JobItem.job_id.in_(ids)))
            self._session.execute(delete(IngestionJob).where(IngestionJob.id.in_(ids)))
        return len(ids)
