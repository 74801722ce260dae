"""Sending ingest work to the workers. The API sends tasks by name, so it never
imports worker code; workers register the same names (``hsearch_ingest.tasks``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol

from celery import Celery
from kombu.transport import virtual

from hsearch.errors import BackendError
from hsearch.logging import current_request_id

INGEST_QUEUE = "ingest"
INGEST_JOB_TASK = "ingest.job"
REQUEST_ID_TASK_HEADER = "hsearch_request_id"
"""The task header that carries the submitting request's id to the worker."""
TURN_TASK_HEADER = "hsearch_turn"
"""The task header that carries the job's turn when the message was sent
(:attr:`hsearch.db.models.IngestionJob.turn`); a header, not an argument, so that
workers of the previous release accept the messages of this one."""


class JobQueue(Protocol):
    """Where ingest jobs go to be indexed. Callers never send directly: a unit of work
    (:mod:`hsearch.ingestion.dispatch`) sends its jobs once their rows are committed."""

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        """Send ``job_id`` to the workers, for the job's turn ``turn`` (as committed:
        a message whose turn has been started by another is dropped); raises
        :class:`BackendError` if it cannot."""
        ...

    def ping(self, *, timeout_s: float) -> None:
        """Connect to the broker once; raises :class:`BackendError` if it cannot."""
        ...

    def depths(self, *, timeout_s: float) -> dict[str, int]:
        """Messages waiting per queue; raises :class:`BackendError` if the broker
        cannot tell within ``timeout_s``."""
        ...


def create_celery(
    broker_url: str,
    *,
    name: str = "hsearch",
    visibility_timeout_s: float = 120.0,
    heartbeat_s: float = 0.0,
    socket_timeout_s: float = 10.0,
) -> Celery:
    """The Celery app both edges share: late acks, prefetch 1, no result backend
    (job state lives in the metadata database); ``heartbeat_s`` is the AMQP heartbeat
    (0: off, see below); ``socket_timeout_s`` bounds each wait on a Redis broker's
    connection (``broker.socket_timeout_s``)."""
    app = Celery(name, broker=broker_url)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # One message held per worker: the one it runs. Celery reserves multiplier x
        # concurrency messages, and the concurrency defaults to the machine's cores even
        # for the solo pool, where one task runs at a time: a worker on a 32-core node
        # held 32 jobs behind its running one while other workers idled.
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        task_ignore_result=True,
        task_default_queue=INGEST_QUEUE,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        enable_utc=True,
    )
    if broker_url.startswith(("redis://", "rediss://")):
        # Unacknowledged (late-ack) messages come back after this long. Sized to the job
        # lease, not to the longest job: a message re-delivered while its job still runs
        # finds the job's lease held and returns at once (hsearch.ingestion.worker.leases).
        #
        # A read or write waits at most socket_timeout_s; then the connection is dropped
        # and made again. redis-py waits forever by default: a connection that stopped
        # answering (a frozen server, a failover, a NAT that forgot it) held the worker
        # in a heartbeat's publish or an ack, alive and consuming nothing. The worker's
        # poll (a BRPOP on its event loop, where no socket timeout applies) is given up
        # once its answer is a health-check interval late (kombu's own check): that
        # interval too, not kombu's 25 s.
        app.conf.broker_transport_options = {
            "visibility_timeout": visibility_timeout_s,
            "socket_timeout": socket_timeout_s,
            "socket_connect_timeout": socket_timeout_s,
            "socket_keepalive": True,
            "health_check_interval": socket_timeout_s,
        }
    elif broker_url.startswith(("amqp://", "amqps://", "pyamqp://")):
        # RabbitMQ re-delivers an unacknowledged message as soon as its consumer's
        # connection drops (a dead worker), so there is no visibility timeout to size.
        # Publisher confirms: a send returns only once the broker has the message, so a
        # job reported queued is in the queue. Tasks end within a turn
        # (ingest.batches_per_task), far inside the broker's consumer_timeout.
        app.conf.broker_transport_options = {"confirm_publish": True}
        # Off by default: a worker runs its task in its own process (the solo pool) and
        # sends no heartbeat until the task returns, so a turn that outlasts the
        # heartbeat (BGE-M3 on CPU, a large document) had RabbitMQ close the connection
        # and re-deliver the message on every such turn. A dead worker's connection
        # closes with its process, and TCP keepalive finds a lost host.
        app.conf.broker_heartbeat = heartbeat_s
    return app


class CeleryJobQueue:
    def __init__(self, app: Celery) -> None:
        self._app = app

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        headers: dict[str, str | int] = {TURN_TASK_HEADER: turn}
        request_id = current_request_id()
        if request_id:  # the worker's log lines for the job carry it
            headers[REQUEST_ID_TASK_HEADER] = request_id
        try:
            self._app.send_task(
                INGEST_JOB_TASK,
                kwargs={"job_id": str(job_id)},
                queue=INGEST_QUEUE,
                headers=headers,
                retry=True,
                retry_policy={"max_retries": 3, "interval_start": 0.2, "interval_step": 0.5},
            )
        except Exception as exc:  # kombu raises many unrelated types for a dead broker
            raise BackendError(f"could not enqueue ingest job {job_id}: {exc}") from exc

    def ping(self, *, timeout_s: float) -> None:
        try:
            with self._app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=0, timeout=timeout_s)
        except Exception as exc:  # kombu raises many unrelated types for a dead broker
            raise BackendError(f"broker unreachable: {type(exc).__name__}: {exc}") from exc

    def depths(self, *, timeout_s: float) -> dict[str, int]:
        try:
            with self._app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=0, timeout=timeout_s)
                channel = connection.default_channel
                # Every kombu transport answers a declare with the queue's message count.
                # Virtual transports (Redis, SQL) create nothing on it, and find no
                # queue while it is empty (Redis drops an empty list), so theirs is not
                # passive; AMQP's is, so that a scrape never creates a queue.
                declared = channel.queue_declare(
                    queue=INGEST_QUEUE, passive=not isinstance(channel, virtual.Channel)
                )
                return {INGEST_QUEUE: int(declared.message_count)}
        except Exception as exc:  # kombu raises many unrelated types for a dead broker
            raise BackendError(f"broker unreachable: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class JobMessage:
    """One message of :class:`InMemoryJobQueue`."""

    job_id: uuid.UUID
    turn: int


class InMemoryJobQueue:
    """Keeps the sent messages in order, for a consumer in the same process: unit tests,
    and the benchmark, which indexes the jobs itself."""

    def __init__(self) -> None:
        self.messages: list[JobMessage] = []

    @property
    def sent(self) -> list[uuid.UUID]:
        """The job ids of the messages, in order (a copy)."""
        return [message.job_id for message in self.messages]

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        self.messages.append(JobMessage(job_id, turn))

    def ping(self, *, timeout_s: float) -> None:
        del timeout_s  # always there

    def depths(self, *, timeout_s: float) -> dict[str, int]:
        del timeout_s
        return {INGEST_QUEUE: len(self.messages)}
