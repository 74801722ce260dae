"""Test-only services for the integration suite: a fresh Postgres database per test
session, a flushed Redis database, a RabbitMQ virtual host per test and the suite's
worker naming. The processes
themselves (Milvus Lite server, Celery workers, the API) come from
:mod:`hsearch.processes`, as for ``hsearch run`` and the benchmarks.

Outside CI a missing Postgres/Redis skips the integration tests; with ``CI=true`` it
fails them, so CI can never pass without having run them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hsearch.processes import Child, start_worker

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


def redis_database(db: int) -> str:
    url = f"{REDIS_URL}/{db}"
    try:
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()
    except redis.RedisError as exc:
        unavailable(f"Redis at {url}: {exc}")
    return url


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
