"""Test-only services for the integration suite: a fresh Postgres database per test
session, a Postgres server of a test's own (to stop), a private redis-server for the
broker, a RabbitMQ virtual host per test and the suite's worker naming. The processes
themselves (Milvus Lite server, Celery workers, the API) come from
:mod:`hsearch.local.processes`, as for ``hsearch run`` and the benchmarks.

Outside CI a missing Postgres/Redis skips the integration tests; with ``CI=true`` it
fails them, so CI can never pass without having run them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hsearch.local.processes import LOCALHOST, Child, free_port, port_open, start_worker

PG_ADMIN_URL = os.environ.get(
    "HSEARCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("HSEARCH_TEST_REDIS_URL", "redis://127.0.0.1:6379")
RABBITMQ_HOST = os.environ.get("HSEARCH_TEST_RABBITMQ_HOST", "127.0.0.1:5672")
RABBITMQ_USER = "guest"  # the broker's default user, allowed on loopback only
IN_CI = os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"required service unavailable in CI: {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty database for this test session; dropped afterwards."""
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"hsearch_test_{uuid.uuid4().hex[:10]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        admin.dispose()
        unavailable(f"Postgres at {PG_ADMIN_URL}: {exc}")
    url = make_url(PG_ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


PG_BIN = Path(os.environ.get("HSEARCH_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))


@dataclass
class PrivatePostgres:
    """A Postgres server of a test's own (``initdb`` in a temporary directory, on a free
    loopback port, trusting local connections): the test may stop and restart it, the
    machine's shared server is never touched."""

    root: Path
    port: int
    run_as: tuple[str, ...]
    """How its commands run: as the ``postgres`` user when the tests run as root
    (``initdb`` refuses root), else as the test's own user."""

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/hsearch"

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off"
        )
        self._run(
            PG_BIN / "pg_ctl", "-D", self.root / "data", "-l", self.root / "postgres.log",
            "-o", options, "-w", "-t", "30", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop it at once, as a crash would (``-m immediate``: no clean shutdown)."""
        self._run(PG_BIN / "pg_ctl", "-D", self.root / "data", "-m", "immediate", "-w", "stop")

    def running(self) -> bool:
        return (self.root / "data" / "postmaster.pid").exists()

    def _run(self, *argv: object) -> None:
        subprocess.run([*self.run_as, *map(str, argv)], check=True, capture_output=True, timeout=60)


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A running :class:`PrivatePostgres` with an empty database ``hsearch``; stopped and
    removed afterwards. Skipped (failed in CI) where the Postgres binaries are missing."""
    if not (PG_BIN / "initdb").exists():
        unavailable(f"no Postgres binaries in {PG_BIN} (HSEARCH_TEST_PG_BIN)")
    root = Path(tempfile.mkdtemp(prefix="hsearch-pg-"))
    run_as: tuple[str, ...] = ()
    if os.geteuid() == 0:
        shutil.chown(root, user="postgres")
        run_as = ("runuser", "-u", "postgres", "--")
    server = PrivatePostgres(root, free_port(), run_as)
    try:
        server._run(
            PG_BIN / "initdb", "-D", root / "data", "-U", "postgres", "-A", "trust",
            "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        server.start()
        admin = create_engine(
            f"postgresql+psycopg://postgres@127.0.0.1:{server.port}/postgres",
            isolation_level="AUTOCOMMIT",
        )
        with admin.connect() as conn:
            conn.execute(text('CREATE DATABASE "hsearch"'))
        admin.dispose()
        yield server
    finally:
        if server.running():
            with contextlib.suppress(subprocess.SubprocessError):
                server.stop()
        shutil.rmtree(root, ignore_errors=True)


def start_redis(port: int, root: Path) -> Child:
    """A redis-server on ``port`` keeping nothing on disk, once it answers."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed")
        raise AssertionError("unreachable")  # unavailable() skips or fails
    root.mkdir(parents=True, exist_ok=True)
    child = Child(
        f"redis-{port}",
        argv=[
            *(binary, "--port", str(port), "--bind", LOCALHOST),
            *("--save", "", "--appendonly", "no", "--dir", str(root)),
        ],
        env={},
        log=root / f"redis-{port}.log",
    )
    child.wait_until(lambda: port_open(port), timeout=20, what=f"redis-server on {port}")
    return child


@contextlib.contextmanager
def private_redis(root: Path) -> Iterator[str]:
    """A redis-server of this test session's own, on a free port: a Celery broker no
    other test session (one beside it on the machine) can take jobs from. Stopped after;
    the machine's shared Redis is never stopped."""
    port = free_port()
    server = start_redis(port, root)
    try:
        yield f"redis://{LOCALHOST}:{port}/0"
    finally:
        server.stop()


@contextlib.contextmanager
def rabbitmq_vhost() -> Iterator[str]:
    """A new RabbitMQ virtual host for one test (its queues and messages its own), as
    an ``amqp://`` broker URL; deleted afterwards. Made with ``rabbitmqctl``."""
    name = f"hsearch-test-{uuid.uuid4().hex[:8]}"
    ctl = shutil.which("rabbitmqctl") or "/usr/sbin/rabbitmqctl"

    def run(*args: str) -> None:
        subprocess.run([ctl, "-q", *args], check=True, capture_output=True, timeout=60)

    try:
        run("add_vhost", name)
        run("set_permissions", "-p", name, RABBITMQ_USER, ".*", ".*", ".*")
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable(f"RabbitMQ (rabbitmqctl): {exc}")
    try:
        yield f"amqp://{RABBITMQ_USER}:{RABBITMQ_USER}@{RABBITMQ_HOST}/{name}"
    finally:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            run("delete_vhost", name)


def start_test_worker(env: Mapping[str, str], log_dir: Path, *, name: str = "w") -> Child:
    """A standalone Celery worker (it starts faster) with a node name and a log of its
    own: a worker restarted by a test never shares either with the one it replaces."""
    tag = uuid.uuid4().hex[:6]
    return start_worker(
        env,
        node=f"{name}-{tag}@%h",
        log=log_dir / f"worker-{name}-{tag}.log",
        standalone=True,
    )
