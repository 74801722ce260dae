"""Test-only services for the integration suite: a fresh Postgres database per test
session, a flushed Redis database and the suite's worker naming. The processes
themselves (Milvus Lite server, Celery workers, the API) come from
:mod:`hsearch.processes`, as for ``hsearch run`` and the benchmarks.

Outside CI a missing Postgres/Redis skips the integration tests; with ``CI=true`` it
fails them, so CI can never pass without having run them.
"""

from __future__ import annotations

import contextlib
import os
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
