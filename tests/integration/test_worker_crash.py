"""A worker killed mid-job (kill -9 of its process group) loses nothing and leaves
nothing stuck: a new worker finishes the job within the lease plus 30 s of its start,
with exact counts, and Milvus and the metadata database agree chunk for chunk. Run per
profile: the embedded one (SQLite metadata and SQLite broker, where the SQLite broker
never re-delivers the message the dead worker held), Postgres + Redis, and Postgres +
RabbitMQ (which re-delivers the message at once, to a worker that finds the dead one's
lease still held). The fake encoder: the encoder is not what is tested.

A second test kills the process that runs a task just after the worker received it
(the embedded profile, where a worker that lived on without consuming was reported)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import redis
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import Document, IngestionJob, JobStatus
from hsearch.ingestion.queue import (
    INGEST_JOB_TASK,
    INGEST_QUEUE,
    CeleryJobQueue,
    create_celery,
)
from hsearch.local.processes import Child, start_worker, worker_command
from hsearch.vectorstore.milvus import MilvusVectorStore
from tests.integration.conftest import api_client, settings_from_env, stack_env
from tests.integration.proxy import ProxyMode, TcpProxy
from tests.integration.services import (
    postgres_database,
    private_redis,
    rabbitmq_vhost,
    start_test_worker,
)

pytestmark = [
    pytest.mark.integration,
    # kombu's SQLAlchemy transport (the embedded broker, sending from this process)
    # maps its tables with a loader strategy SQLAlchemy 2.1 deprecates.
    pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated"),
]

LEASE_S = 4
DOCUMENTS = 200


@pytest.fixture(params=["embedded", "postgres-redis", "postgres-rabbitmq"])
def profile(
    request: pytest.FixtureRequest, tmp_path: Path, milvus_uri: str
) -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        if request.param == "embedded":
            database = f"sqlite:///{tmp_path / 'meta.sqlite'}"
            upgrade_database(database)
            broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
        else:
            # A database of the test's own, never the session's: every worker's sweeper
            # re-sends the expired jobs of its database to its own broker, so the
            # session's worker (another broker, collection and chunking) took over the
            # killed worker's job when its sweep came first, and wrote the chunks into
            # its own collection.
            database = stack.enter_context(postgres_database())
            upgrade_database(database)
            if request.param == "postgres-redis":
                broker = stack.enter_context(private_redis(tmp_path / "redis"))
            else:
                broker = stack.enter_context(rabbitmq_vhost())
        yield _profile_env(request.param, tmp_path, milvus_uri, database, broker)


def _embedded_env(tmp_path: Path, milvus_uri: str) -> dict[str, str]:
    """The embedded profile's environment: SQLite metadata (migrated) and broker files
    in ``tmp_path``."""
    database = f"sqlite:///{tmp_path / 'meta.sqlite'}"
    upgrade_database(database)
    broker = f"sqla+sqlite:///{tmp_path / 'broker.sqlite'}"
    return _profile_env("embedded", tmp_path, milvus_uri, database, broker)


def _profile_env(
    name: str, tmp_path: Path, milvus_uri: str, database: str, broker: str
) -> dict[str, str]:
    env = stack_env(
        database_url=database,
        broker_url=broker,
        milvus_uri=milvus_uri,
        collection=f"crash_{uuid.uuid4().hex[:8]}",
        encoder={"kind": "fake"},
        data_dir=tmp_path,
    )
    env.update(
        {
            "HSEARCH_INGEST__LEASE_S": str(LEASE_S),
            "HSEARCH_INGEST__SWEEP_INTERVAL_S": "1",
            "HSEARCH_INGEST__FLUSH_MIN_INTERVAL_S": "0",
            # Small groups, so the worker is killed between commits of one job.
            "HSEARCH_INGEST__BATCH_DOCUMENTS": "16",
        }
    )
    if name != "postgres-redis":  # stack_env makes the broker the Redis URL too
        env.pop("HSEARCH_REDIS__URL")
    return env


def kill_group(worker: Child) -> None:
    os.killpg(worker.proc.pid, signal.SIGKILL)
    worker.proc.wait(10)
    worker.stop()  # closes its log


async def test_a_killed_worker_job_finishes_after_a_restart(
    profile: dict[str, str], tmp_path: Path
) -> None:
    settings = settings_from_env(profile)
    tenant = f"t{uuid.uuid4().hex[:10]}"
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)

    def job_row(job_id: uuid.UUID) -> IngestionJob:
        with sessions() as session:
            job = session.get_one(IngestionJob, job_id)
            session.expunge(job)
            return job

    documents = [
        {"external_id": f"d{i}", "text": f"Document {i} on rivers and the sea. " * 20}
        for i in range(DOCUMENTS)
    ]
    first = start_test_worker(profile, tmp_path, name="first")
    try:
        async with api_client(settings, tenant=tenant) as client:
            resp = await client.post("/v1/documents", json={"documents": documents})
            assert resp.status_code == 202, resp.text
            job_id = uuid.UUID(resp.json()["job_id"])
            first.wait_until(
                lambda: job_row(job_id).indexed >= 16, timeout=120, what="first batch indexed"
            )
            kill_group(first)
            killed_at = job_row(job_id)
            assert killed_at.status is JobStatus.RUNNING
            assert 16 <= killed_at.indexed < DOCUMENTS, "the worker was killed mid-job"

            second = start_test_worker(profile, tmp_path, name="second")
            try:
                # Nobody re-sends anything by hand: the new worker's sweeper finds the
                # job once the dead worker's lease has expired.
                second.wait_until(
                    lambda: job_row(job_id).status is JobStatus.SUCCEEDED,
                    timeout=LEASE_S + 30,
                    what="the interrupted job finished by the new worker",
                )
                job = (await client.get(f"/v1/jobs/{job_id}")).json()
            finally:
                second.stop()
        assert (job["status"], job["indexed"], job["failed"]) == ("succeeded", DOCUMENTS, 0)
        # A turn the kill interrupted is run again, a second attempt; killed between two
        # turns (one ended, the next not started), nothing is run again.
        assert job["attempts"] == (1 if killed_at.between_turns else 2)
        with sessions() as session:
            recorded = session.scalar(
                select(func.sum(Document.chunk_count)).where(Document.tenant_id == tenant)
            )
            documents_indexed = session.scalar(
                select(func.count()).select_from(Document).where(Document.tenant_id == tenant)
            )
        store = MilvusVectorStore(settings.milvus.uri, collection=settings.milvus.collection)
        try:
            assert documents_indexed == DOCUMENTS
            assert store.count(tenant_id=tenant) == recorded
        finally:
            store.close()
    finally:
        first.stop()
        engine.dispose()


async def test_a_second_message_for_a_turn_is_dropped_by_the_worker(
    profile: dict[str, str], tmp_path: Path
) -> None:
    """The job's turn travels in a task header through each broker: a second message
    sent for a turn (as the sweeper sends for a job that waited long in the queue) is
    dropped by the worker instead of running a turn of its own."""
    settings = settings_from_env(profile)
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)
    documents = [{"external_id": f"d{i}", "text": f"Document {i}."} for i in range(48)]
    try:
        job_id = await _submitted(settings, documents)
        # Queued behind the first message, before any worker runs.
        CeleryJobQueue(create_celery(settings.broker_url)).enqueue_job(job_id, turn=0)
        worker = start_test_worker(profile, tmp_path, name="turns")
        try:
            _wait_succeeded(worker, sessions, job_id, what="the job finished")
            log = worker.log_text()
        finally:
            worker.stop()
        job = _job(sessions, job_id)
        # Three turns of 16 documents, each started once; the duplicate ran none.
        assert (job.indexed, job.turn, job.attempts) == (48, 3, 1)
        assert f"ingest.job.duplicate_message job_id={job_id} turn=0 current=1" in log
    finally:
        engine.dispose()


async def test_a_queued_job_whose_message_the_broker_lost_finishes(
    profile: dict[str, str], tmp_path: Path
) -> None:
    """A Redis restarted without persistence, or a connection that stopped answering
    once it had taken the message, loses a queued job's message: nothing else would
    send it again. A worker's sweeper sends it again a lease after it was sent."""
    settings = settings_from_env(profile)
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)
    documents = [{"external_id": f"d{i}", "text": f"Document {i}."} for i in range(20)]
    try:
        job_id = await _submitted(settings, documents)
        assert _job(sessions, job_id).sent_at is not None
        app = create_celery(settings.broker_url)
        try:
            assert app.control.purge() == 1, "the job's message, the one in the queue"
        finally:
            app.close()
        worker = start_test_worker(profile, tmp_path, name="lost")
        try:
            _wait_succeeded(
                worker,
                sessions,
                job_id,
                timeout=LEASE_S + 30,
                what="the job whose message was lost finished",
            )
            log = worker.log_text()
        finally:
            worker.stop()
        job = _job(sessions, job_id)
        assert (job.indexed, job.attempts) == (20, 1)
        assert f"ingest.job.not_started job_id={job_id}" in log
    finally:
        engine.dispose()


async def test_a_worker_whose_broker_connections_stop_answering_consumes_again(
    tmp_path: Path, milvus_uri: str
) -> None:
    """Redis broker connections that stop answering while they stay open (a frozen
    server, a failover behind an address, a NAT that forgot them): redis-py waits for
    an answer forever by default, and the worker stayed alive, blocked publishing its
    heartbeat or acknowledging a task, and consumed nothing more. Each wait now ends
    after ``broker.socket_timeout_s``; the worker connects again and takes the next
    job. A worker with heartbeats on, as ``hsearch run`` starts it."""
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres_database())
        upgrade_database(database)
        broker = stack.enter_context(private_redis(tmp_path / "redis"))
        host, port = broker.removeprefix("redis://").split("/")[0].split(":")
        proxy = TcpProxy(host, int(port))
        stack.callback(proxy.close)
        direct = _profile_env("postgres-redis", tmp_path, milvus_uri, database, broker)
        through_proxy = {
            **direct,
            "HSEARCH_BROKER__URL": f"redis://127.0.0.1:{proxy.port}/0",
            "HSEARCH_BROKER__SOCKET_TIMEOUT_S": "3",
            # A message its frozen poll took is lost: the sweeper sends the job again
            # (its own sends fail until the worker has connected anew).
            "HSEARCH_INGEST__UNSENT_AFTER_S": "5",
        }
        worker = start_worker(
            through_proxy, node=f"frozen-{uuid.uuid4().hex[:6]}@%h", log=tmp_path / "w.log"
        )
        stack.callback(worker.stop)
        settings = settings_from_env(direct)  # the API's sends bypass the proxy
        engine = create_db_engine(settings.database_url)
        stack.callback(engine.dispose)
        sessions = create_session_factory(engine)
        documents = [{"external_id": f"d{i}", "text": f"Document {i}."} for i in range(4)]
        async with api_client(settings, tenant=f"t{uuid.uuid4().hex[:10]}") as client:
            jobs = []
            for round_ in ("before", "after"):
                resp = await client.post("/v1/documents", json={"documents": documents})
                assert resp.status_code == 202, resp.text
                jobs.append(uuid.UUID(resp.json()["job_id"]))
                _wait_succeeded(
                    worker,
                    sessions,
                    jobs[-1],
                    what=f"the job sent {round_} the broker's connections froze",
                )
                if round_ == "before":
                    # Frozen once the worker's ack of the first job has landed: a freeze
                    # in between leaves that ack unanswered and the worker holding it
                    # (docs/adr/0027-redis-connection-timeouts.md).
                    _wait_acked(broker)
                    proxy.set_mode(ProxyMode.FREEZE)  # every connection the worker holds
        assert worker.alive()
        assert [_job(sessions, j).attempts for j in jobs] == [1, 1]


async def test_a_message_whose_job_id_is_no_uuid_leaves_the_worker_consuming(
    tmp_path: Path, milvus_uri: str
) -> None:
    """The task fails on such a message and its failure handler used to raise too,
    which stopped the worker's consumer: the process exited, and with a broker that
    gives the message back, again at every restart."""
    env = _embedded_env(tmp_path, milvus_uri)
    settings = settings_from_env(env)
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)
    app = create_celery(settings.broker_url)
    try:
        app.send_task(INGEST_JOB_TASK, kwargs={"job_id": "not-a-uuid"}, queue=INGEST_QUEUE)
        worker = start_test_worker(env, tmp_path, name="poison")
        try:
            job_id = await _submitted(settings, [{"external_id": "d", "text": "Rivers."}])
            _wait_succeeded(worker, sessions, job_id, what="the job sent after the bad message")
            assert worker.alive()
            assert "ingest.task.bad_job_id" in worker.log_text()
        finally:
            worker.stop()
    finally:
        app.close()
        engine.dispose()


async def test_a_worker_started_while_milvus_is_down_waits_for_it_then_works(
    tmp_path: Path, milvus_uri: str
) -> None:
    """Its services are built again until the store connects; before, the failure was
    logged and ignored by Celery, and the worker took tasks with no sweeper running."""
    host, port = milvus_uri.removeprefix("http://").split(":")
    proxy = TcpProxy(host, int(port))
    proxy.set_mode(ProxyMode.REFUSE)  # Milvus unreachable as the worker starts
    env = _embedded_env(tmp_path, proxy.uri)
    env["HSEARCH_MILVUS__WRITE_TIMEOUT_S"] = "2"
    log = tmp_path / "waiting.log"
    worker = Child(
        "worker",
        argv=worker_command(f"waiting-{uuid.uuid4().hex[:6]}@%h", loglevel="INFO"),
        env=env,
        log=log,
    )
    settings = settings_from_env({**env, "HSEARCH_MILVUS__URI": milvus_uri})
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)
    try:
        worker.wait_until(
            lambda: "worker.start.waiting" in worker.log_text(),
            timeout=60,
            what="the worker waiting for Milvus",
        )
        assert " ready." not in worker.log_text(), "it takes no task before it can index"
        proxy.set_mode(ProxyMode.PASS)
        worker.wait_until(
            lambda: " ready." in worker.log_text(), timeout=60, what="the worker ready"
        )
        job_id = await _submitted(settings, [{"external_id": "d", "text": "Rivers."}])
        _wait_succeeded(worker, sessions, job_id, what="the job indexed")
    finally:
        worker.stop()
        proxy.close()
        engine.dispose()


@pytest.mark.parametrize("heartbeat_s", [0, 2])
async def test_a_turn_longer_than_the_broker_heartbeat(
    heartbeat_s: float, tmp_path: Path, milvus_uri: str
) -> None:
    """RabbitMQ: a worker sends no heartbeat while it runs a task, so a turn that outlasts
    the heartbeat had the broker close the worker's connection and re-deliver the
    message on every such turn. Heartbeats are off by default (0): the message stays
    with the worker. With them on (2 s here), the re-delivered message is dropped as a
    duplicate of the turn it started, and the job still runs each turn once. The turn
    is held up by a lock on the tenant's row (a stalled database), released once the
    broker has given the message back, or after three heartbeats' time.

    The queue's depth is the broker's doing alone: the lease outlasts every wait of the
    test, so the worker's sweeper sends the job nothing more. With the profile's 4 s
    lease, a worker that took longer than that to start (a loaded machine) found the job
    queued a lease ago and not started, and sent it again before taking its first
    message: that second message waited in the queue behind the running turn."""
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres_database())
        upgrade_database(database)
        broker = stack.enter_context(rabbitmq_vhost())
        env = _profile_env("postgres-rabbitmq", tmp_path, milvus_uri, database, broker)
        env["HSEARCH_BROKER__HEARTBEAT_S"] = str(heartbeat_s)
        # Twice the first turn's 60 s bound below: the job is never queued a lease
        # unstarted, and the running turn's lease (renewed every 40 s) never expires.
        env["HSEARCH_INGEST__LEASE_S"] = "120"
        settings = settings_from_env(env)
        engine = create_db_engine(database)
        stack.callback(engine.dispose)
        sessions = create_session_factory(engine)
        queue = CeleryJobQueue(create_celery(broker))
        tenant = f"t{uuid.uuid4().hex[:10]}"
        documents = [{"external_id": f"d{i}", "text": f"Document {i}."} for i in range(32)]
        job_id = await _submitted(settings, documents, tenant=tenant)

        with engine.connect() as holder:
            holder.execute(
                text("SELECT id FROM tenants WHERE id = :t FOR NO KEY UPDATE"), {"t": tenant}
            )
            worker = start_test_worker(env, tmp_path, name=f"hb{heartbeat_s:g}")
            stack.callback(worker.stop)
            worker.wait_until(
                lambda: _job(sessions, job_id).turn == 1,
                timeout=60,
                what="the first turn started",
            )
            assert queue.depths(timeout_s=5)["ingest"] == 0, "the worker holds the message"
            if heartbeat_s:
                worker.wait_until(
                    lambda: queue.depths(timeout_s=5)["ingest"] == 1,
                    timeout=30,
                    what="the broker gave the message back (missed heartbeats)",
                )
            else:
                deadline = time.monotonic() + 6  # three heartbeats of the other case
                while time.monotonic() < deadline:
                    assert queue.depths(timeout_s=5)["ingest"] == 0, "given back"
                    await asyncio.sleep(0.5)
            holder.rollback()  # the turn goes on

        worker.wait_until(
            lambda: _job(sessions, job_id).status is JobStatus.SUCCEEDED,
            timeout=60,
            what="the job finished",
        )
        job = _job(sessions, job_id)
        assert (job.indexed, job.turn, job.attempts) == (32, 2, 1)
        log = worker.log_text()
        duplicate = f"ingest.job.duplicate_message job_id={job_id} turn=0 current=1"
        assert (duplicate in log) is bool(heartbeat_s)
        assert ("Connection to broker lost" in log) is bool(heartbeat_s)
        resent = ("ingest.job.not_started", "ingest.job.lease_expired")
        assert not [event for event in resent if event in log], "the sweeper sent the job"


def _job(sessions: sessionmaker[Session], job_id: uuid.UUID) -> IngestionJob:
    with sessions() as session:
        job = session.get_one(IngestionJob, job_id)
        session.expunge(job)
        return job


async def _submitted(
    settings: Settings, documents: list[dict[str, str]], *, tenant: str | None = None
) -> uuid.UUID:
    """``documents`` submitted through the API (a new tenant's unless ``tenant``)."""
    async with api_client(settings, tenant=tenant or f"t{uuid.uuid4().hex[:10]}") as client:
        resp = await client.post("/v1/documents", json={"documents": documents})
        assert resp.status_code == 202, resp.text
    return uuid.UUID(resp.json()["job_id"])


def _wait_acked(broker: str, *, timeout_s: float = 10.0) -> None:
    """Wait until a Redis broker holds no message unacknowledged (kombu keeps them in
    its ``unacked`` hash until the worker's ack)."""
    client = redis.Redis.from_url(broker)
    try:
        deadline = time.monotonic() + timeout_s
        while client.hlen("unacked"):
            assert time.monotonic() < deadline, "the worker never acknowledged its message"
            time.sleep(0.05)
    finally:
        client.close()


def _wait_succeeded(
    worker: Child,
    sessions: sessionmaker[Session],
    job_id: uuid.UUID,
    *,
    what: str,
    timeout: float = 60,
) -> None:
    worker.wait_until(
        lambda: _job(sessions, job_id).status is JobStatus.SUCCEEDED, timeout=timeout, what=what
    )


def task_process(worker: Child) -> int | None:
    """The pid of the process that runs the worker's tasks: the one that loaded the
    encoder (``worker.resources.ready``, logged when the pool starts), once logged."""
    for line in worker.log_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and record.get("event") == "worker.resources.ready":
                return int(record["process"])
    return None


async def test_killing_the_process_running_a_task_leaves_no_worker_stuck(
    tmp_path: Path, milvus_uri: str
) -> None:
    """kill -9 of the process that runs the tasks, 0.1 s after the worker received one.

    With the prefork pool that process was a child, and its parent did not always
    notice the loss: it kept the task as running and consumed nothing more, yet lived
    on, so nothing restarted it and every job waited. The worker is one process now:
    the task's process is the worker, its kill is the worker's exit (the supervisor's
    cue), and the worker started in its place finishes the interrupted job and the
    next one within the lease plus 30 s. The embedded profile, where it was reported.
    """
    env = _embedded_env(tmp_path, milvus_uri)
    settings = settings_from_env(env)
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)

    def status(job_id: uuid.UUID) -> JobStatus:
        with sessions() as session:
            return session.get_one(IngestionJob, job_id).status

    documents = [
        {"external_id": f"d{i}", "text": f"Document {i} on rivers and the sea. " * 20}
        for i in range(DOCUMENTS)
    ]
    first = start_test_worker(env, tmp_path, name="first")
    try:
        worker = psutil.Process(first.proc.pid)
        first.wait_until(
            lambda: task_process(first) is not None, timeout=60, what="the pool started"
        )
        runs_tasks = task_process(first)
        assert (runs_tasks, worker.children(recursive=True)) == (first.proc.pid, []), (
            "the worker is one process: none of its own can die while it lives on"
        )
        async with api_client(settings, tenant=f"t{uuid.uuid4().hex[:10]}") as client:
            resp = await client.post("/v1/documents", json={"documents": documents})
            assert resp.status_code == 202, resp.text
            interrupted = uuid.UUID(resp.json()["job_id"])
            first.wait_until(
                lambda: "] received" in first.log_text(), timeout=60, what="a task received"
            )
            await asyncio.sleep(0.1)
            assert runs_tasks is not None  # it is first.proc.pid, asserted above
            os.kill(runs_tasks, signal.SIGKILL)
            assert first.proc.wait(10) == -signal.SIGKILL, "the worker is gone"
            first.stop()  # closes its log

            second = start_test_worker(env, tmp_path, name="second")
            try:
                resp = await client.post(
                    "/v1/documents", json={"documents": [{"external_id": "x", "text": "one"}]}
                )
                assert resp.status_code == 202, resp.text
                following = uuid.UUID(resp.json()["job_id"])
                second.wait_until(
                    lambda: {status(interrupted), status(following)} == {JobStatus.SUCCEEDED},
                    timeout=LEASE_S + 30,
                    what="the interrupted job and the next one finished",
                )
            finally:
                second.stop()
    finally:
        first.stop()
        engine.dispose()


async def test_a_worker_holds_only_the_message_it_runs(tmp_path: Path, milvus_uri: str) -> None:
    """RabbitMQ: while a worker runs a turn (held up by a lock on its tenant's row), the
    jobs queued behind it stay in the queue for any other worker. Celery reserves
    prefetch multiplier x concurrency messages, and the concurrency was the machine's
    core count even for the solo pool: a worker held a second job behind its running
    one (32 on a 32-core node) while other workers idled."""
    with contextlib.ExitStack() as stack:
        database = stack.enter_context(postgres_database())
        upgrade_database(database)
        broker = stack.enter_context(rabbitmq_vhost())
        env = _profile_env("postgres-rabbitmq", tmp_path, milvus_uri, database, broker)
        # A lease longer than the test: the worker's sweeper would otherwise send the
        # jobs queued behind the first again (queued a lease ago and not started), and
        # the queue would hold their second messages besides.
        env["HSEARCH_INGEST__LEASE_S"] = "60"
        settings = settings_from_env(env)
        engine = create_db_engine(database)
        stack.callback(engine.dispose)
        sessions = create_session_factory(engine)
        queue = CeleryJobQueue(create_celery(broker))
        jobs: list[uuid.UUID] = []
        tenants = [f"t{uuid.uuid4().hex[:10]}" for _ in range(3)]

        async def submit(tenant: str) -> None:
            async with api_client(settings, tenant=tenant) as client:
                documents = [{"external_id": "d", "text": "A document."}]
                resp = await client.post("/v1/documents", json={"documents": documents})
                assert resp.status_code == 202, resp.text
                jobs.append(uuid.UUID(resp.json()["job_id"]))

        await submit(tenants[0])
        with engine.connect() as holder:
            holder.execute(
                text("SELECT id FROM tenants WHERE id = :t FOR NO KEY UPDATE"), {"t": tenants[0]}
            )
            for tenant in tenants[1:]:  # queued behind the first
                await submit(tenant)
            worker = start_test_worker(env, tmp_path, name="prefetch")
            stack.callback(worker.stop)
            worker.wait_until(
                lambda: _job(sessions, jobs[0]).turn == 1, timeout=60, what="the first turn"
            )
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                assert queue.depths(timeout_s=5)["ingest"] == 2, "both jobs left in the queue"
                await asyncio.sleep(0.5)
            holder.rollback()

        worker.wait_until(
            lambda: all(_job(sessions, j).status is JobStatus.SUCCEEDED for j in jobs),
            timeout=60,
            what="every job finished",
        )
