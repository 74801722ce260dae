"""Nothing stuck: leases on running jobs, and a sweeper that re-sends abandoned jobs.

A worker that starts a job takes a lease on it (``lease_owner``, ``lease_expires_at``,
``ingest.lease_s`` long) and renews it while it works on the job and while the job waits
for its flush (:class:`LeaseKeeper`, every third of the lease). A worker that dies, is
killed or is stopped mid-job stops renewing; a graceful stop lets its leases expire at
once. The :class:`JobSweeper` (run by every worker, every ``ingest.sweep_interval_s``)
re-sends to the queue:

* a running job whose lease has expired: its worker is gone, whatever the broker does
  with the message it had (the SQLite broker never re-delivers it; Redis only after its
  visibility timeout);
* a queued job never sent (``sent_at`` empty) a while after it was committed: the
  process that committed it died before the send;
* a queued job sent more than a lease ago and not started since, then ever less often
  (as long again as it has waited, at most :data:`MAX_REQUEUE_CHECK_LEASES` leases
  apart): the broker may have lost its message (a Redis restarted without persistence,
  a connection that stopped answering after it took the message), and nothing else
  would ever send it again. Not while its message is waiting behind a busy worker,
  though (:func:`resend_unstarted`): while some worker holds a live lease, such a job is
  re-sent only if the queue holds fewer messages than there are jobs waiting.

It also purges finished jobs older than ``ingest.job_retention_days`` (with their
per-document errors; the documents stay) and delivers the webhooks of jobs that have
ended (:mod:`hsearch.ingestion.webhooks`).

Re-sending is safe: indexing is idempotent and resumes at the first unfinished item, a
job already finished is left as it is, and a message that reaches a job whose lease
another worker holds returns at once (:meth:`IndexingService.process_job`), so a job is
never indexed by two workers at the same time. Nor does a re-send add a turn: every
message carries the job's ``turn`` as it was sent, and the first message for a turn
starts it, so the other is dropped when it arrives. A job that waits between turns
longer than its lease (many jobs take turns) is re-sent although its message is still
queued; that message keeps its place, and whichever of the two comes first runs the
turn. Without turns, both ran, each sent the job back, and the job kept one more
message for every long wait. The same holds for a job that waits long for its first
turn. Many sweepers may run: each locks the
rows it re-sends (skipping rows locked by another) and gives a re-sent job a fresh,
unowned lease, so it is not re-sent again before the lease has passed.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from hsearch.db.base import utcnow
from hsearch.db.engine import SessionFactory, transaction
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.db.repositories.jobs import JobRepository
from hsearch.errors import BackendError
from hsearch.ingestion.queue import JobQueue
from hsearch.ingestion.webhooks import WebhookSender
from hsearch.logging import bind_request_id

__all__ = ["JobSweeper", "LeaseKeeper", "aware", "resend_unstarted", "worker_identity"]

logger = logging.getLogger(__name__)

MAX_REQUEUE_CHECK_LEASES = 10
"""The longest the sweeper waits between re-sends of a job waiting in the queue (for its
first turn or its next), in leases: how long a job whose message the broker lost (a
Redis restarted without persistence) may wait, at most, once it has waited that long
already."""


DEPTH_TIMEOUT_S = 5.0
"""How long the sweeper waits for the broker to tell the ingest queue's depth."""


def resend_unstarted(*, busy: int, waiting: int, depth: int | None) -> bool:
    """Whether a job sent and not started since is re-sent (once its wait is due).

    ``busy``: jobs a live worker is running (its lease renewed, not between turns);
    ``waiting``: jobs whose message should be in the queue (sent and not started, or
    sent back between turns); ``depth``: messages the broker holds in the ingest queue
    (``None``: it could not tell).

    With no worker busy, a message in the queue would have been taken: it is re-sent
    (the broker may have lost it). With workers busy, each job's message most likely
    waits behind them (an 840,000-character document held the only worker for minutes,
    and the job behind it was re-sent every lease): it is re-sent only when the queue
    holds fewer messages than jobs wait for, so some message is missing. A broker that
    cannot tell is no reason to send: the workers are busy, and once none is, a job
    still not started is re-sent."""
    if busy == 0:
        return True
    if depth is None:
        return False
    return depth < waiting


def worker_identity() -> str:
    """A lease owner name unique to this process: host, pid and a random part."""
    return f"{socket.gethostname()[:80]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def aware(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime (SQLite hands naive ones back)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


class JobSweeper:
    """Re-sends the jobs no worker is working on (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionFactory,
        queue: JobQueue,
        *,
        lease_s: float,
        unsent_after_s: float = 30.0,
        retention_s: float | None = None,
        webhooks: WebhookSender | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._webhooks = webhooks
        self._wake = threading.Event()
        self._retention = None if retention_s is None else timedelta(seconds=retention_s)
        self._sessions = sessions
        self._queue = queue
        self._lease = timedelta(seconds=lease_s)
        self._unsent_after = timedelta(seconds=unsent_after_s)
        self._clock = clock

    def sweep(self) -> list[uuid.UUID]:
        """Re-send every abandoned job once; returns their ids. A send that fails is
        logged and tried again at a later sweep: a queued job's at the next, a running
        job's a lease later."""
        now = self._clock()
        sends: list[tuple[uuid.UUID, int, str | None]] = []
        # Read before the rows are locked: the broker is asked only when a worker is
        # busy and messages wait, and never while the write lock is held.
        behind_busy = self._waiting_behind_busy_worker(now)
        with transaction(self._sessions) as session:
            jobs = JobRepository(session)
            # The rows read are locked (stale()); each is also taken by a conditional
            # update, which leaves alone a job a worker started or renewed since.
            stale = jobs.stale_all_tenants(
                now=now, unsent_before=now - self._unsent_after, sent_before=now - self._lease
            )
            for job in stale:
                if job.status is JobStatus.RUNNING:
                    if not jobs.take_expired(job, now=now, until=self._next_check(job, now)):
                        continue
                    logger.warning(
                        "ingest.job.lease_expired job_id=%s owner=%s: re-sending",
                        job.id,
                        job.lease_owner,
                    )
                elif job.sent_at is None:
                    if not jobs.take_unsent(job, now=now):
                        continue
                    logger.warning("ingest.job.never_sent job_id=%s: sending", job.id)
                else:
                    if behind_busy or not jobs.take_unstarted(
                        job, now=now, until=self._next_check(job, now)
                    ):
                        continue
                    logger.warning(
                        "ingest.job.not_started job_id=%s sent_at=%s: re-sending",
                        job.id,
                        aware(job.sent_at).isoformat(),
                    )
                sends.append((job.id, job.turn, job.request_id))
        for job_id, turn, request_id in sends:
            # The job's own request id travels with it again (logs and task header).
            with bind_request_id(request_id):
                try:
                    self._queue.enqueue_job(job_id, turn=turn)
                except BackendError as exc:
                    logger.warning(
                        "ingest.job.resend_failed job_id=%s error=%s", job_id, exc.message
                    )
                    # Sent again at a later sweep: a queued job at the next, a running
                    # one a lease from now (not after the backoff of _next_check: the
                    # send it stands for did not happen).
                    with transaction(self._sessions) as session:
                        JobRepository(session).resend_failed(
                            job_id, turn=turn, until=now + self._lease
                        )
        if self._retention is not None:
            with transaction(self._sessions) as session:
                purged = JobRepository(session).purge_finished(before=now - self._retention)
            if purged:
                logger.info("ingest.jobs.purged count=%d", purged)
        if self._webhooks is not None:
            self._webhooks.deliver_due()
        return [job_id for job_id, _, _ in sends]

    def _waiting_behind_busy_worker(self, now: datetime) -> bool:
        """Whether the jobs sent and not started are waiting behind busy workers, so
        none is re-sent this sweep (:func:`resend_unstarted`)."""
        with self._sessions() as session:
            busy, waiting = JobRepository(session).busy_and_waiting_all_tenants(now=now)
        if not busy or not waiting:
            return not resend_unstarted(busy=busy, waiting=waiting, depth=None)
        try:
            depth = sum(self._queue.depths(timeout_s=DEPTH_TIMEOUT_S).values())
        except BackendError as exc:
            logger.warning("ingest.sweep.depth_unknown error=%s", exc.message)
            depth = None
        if resend_unstarted(busy=busy, waiting=waiting, depth=depth):
            return False
        logger.info(
            "ingest.jobs.behind_busy_workers busy=%d waiting=%d depth=%s: none re-sent",
            busy,
            waiting,
            depth,
        )
        return True

    def _next_check(self, job: IngestionJob, now: datetime) -> datetime:
        """When to look at re-sent ``job`` again: a lease from now, or, for a job that
        waits in the queue (sent and never started, or sent back at the end of a turn),
        as long again as it has waited since it was sent (at most
        :data:`MAX_REQUEUE_CHECK_LEASES` leases). Its message is most likely still
        queued behind other jobs, and each re-send adds a message that the workers drop
        (one turn per message) but the queue's depth counts."""
        waiting = job.status is JobStatus.QUEUED or job.between_turns
        if waiting and job.lease_owner is None and job.sent_at is not None:
            waited = now - aware(job.sent_at)
            return now + min(max(self._lease, waited), self._lease * MAX_REQUEUE_CHECK_LEASES)
        return now + self._lease

    def wake(self) -> None:
        """Make :meth:`run` sweep now (a job has ended: its webhook is due)."""
        self._wake.set()

    def run(self, stop: threading.Event, *, interval_s: float) -> None:
        """Sweep now (a restart finds abandoned jobs at once), then every
        ``interval_s`` or when woken, until ``stop`` is set. Never raises: the database
        may be away a while."""
        while not stop.is_set():
            self._wake.clear()
            try:
                self.sweep()
            except Exception as exc:  # the loop never dies
                logger.warning("ingest.sweep.failed error=%s", exc)
            self._wake.wait(interval_s)

    def close(self) -> None:
        self._wake.set()
        if self._webhooks is not None:
            self._webhooks.close()


class LeaseKeeper:
    """Renews the leases one worker holds, every third of the lease, in a daemon thread;
    :meth:`close` stops it and lets the leases still held expire at once."""

    def __init__(self, sessions: SessionFactory, *, owner: str, lease_s: float) -> None:
        self.owner = owner
        self.lease = timedelta(seconds=lease_s)
        self._sessions = sessions
        self._held: set[uuid.UUID] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def until(self) -> datetime:
        return utcnow() + self.lease

    def hold(self, job_id: uuid.UUID) -> None:
        """Renew ``job_id``'s lease (taken by the caller) until :meth:`drop`."""
        with self._lock:
            self._held.add(job_id)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="hsearch-lease-keeper", daemon=True
                )
                self._thread.start()

    def drop(self, job_id: uuid.UUID) -> None:
        with self._lock:
            self._held.discard(job_id)

    def renew(self) -> None:
        with self._lock:
            held = list(self._held)
        if held:
            with transaction(self._sessions) as session:
                JobRepository(session).renew_leases(held, owner=self.owner, until=self.until())

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            held = list(self._held)
            self._held.clear()
        if held:
            with transaction(self._sessions) as session:
                JobRepository(session).release_leases(held, owner=self.owner, now=utcnow())

    def _run(self) -> None:
        interval = self.lease.total_seconds() / 3
        while not self._stop.wait(interval):
            try:
                self.renew()
            except Exception as exc:  # a failed renewal is retried; the thread never dies
                logger.warning("ingest.lease.renew_failed error=%s", exc)
