"""Real services for the integration suite: a fresh Postgres database, a Redis
database, a Milvus Lite gRPC server and real Celery worker processes.

Outside CI a missing Postgres/Redis skips the integration tests; with ``CI=true`` it
fails them, so CI can never pass without having run them.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hsearch.stack import Child, milvus_lite_command

PG_ADMIN_URL = os.environ.get(
    "HSEARCH_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
REDIS_URL = os.environ.get("HSEARCH_TEST_REDIS_URL", "redis://127.0.0.1:6379")
IN_CI = os.environ.get("CI") == "true"


def unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"required service unavailable in CI: {reason}")
    pytest.skip(reason)


def wait_for(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Poll an observable condition until it holds; fail with the process log if not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
            msg = f"{what}: process exited with {proc.returncode}\n{tail}"
            raise RuntimeError(msg)
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-4000:] if log and log.exists() else ""
    msg = f"{what}: not ready after {timeout}s\n{tail}"
    raise RuntimeError(msg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex((host, port)) == 0


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


class ManagedProcess(Child):
    """A service process of the suite, its output in ``log``."""

    def __init__(self, argv: list[str], *, env: Mapping[str, str], log: Path) -> None:
        super().__init__(log.stem, argv, env, log)
        self.log = log

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def start_milvus(data_dir: Path, log_dir: Path) -> tuple[ManagedProcess, str]:
    port = free_port()
    proc = ManagedProcess(
        milvus_lite_command(data_dir, host="127.0.0.1", port=port),
        env=os.environ,
        log=log_dir / f"milvus-{port}.log",
    )
    wait_for(
        lambda: port_open(port), timeout=60, what="Milvus Lite server", proc=proc.proc, log=proc.log
    )
    return proc, f"http://127.0.0.1:{port}"


def start_worker(env: Mapping[str, str], log_dir: Path, *, name: str = "w") -> ManagedProcess:
    tag = uuid.uuid4().hex[:6]
    proc = ManagedProcess(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "hsearch_ingest.celery_app:app",
            "worker",
            "-Q",
            "ingest",
            "--concurrency",
            "1",
            "--prefetch-multiplier",
            "1",
            "--loglevel",
            "INFO",
            "-n",
            f"{name}-{tag}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        env=env,
        log=log_dir / f"worker-{name}-{tag}.log",
    )
    wait_for(
        lambda: " ready." in proc.log_text(),
        timeout=120,
        what="Celery worker",
        proc=proc.proc,
        log=proc.log,
    )
    return proc


def start_api(env: Mapping[str, str], log_dir: Path) -> tuple[ManagedProcess, str]:
    import httpx

    port = free_port()
    proc = ManagedProcess(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "hsearch_api.main:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        env=env,
        log=log_dir / f"api-{port}.log",
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(ready, timeout=180, what="API (uvicorn)", proc=proc.proc, log=proc.log)
    return proc, base
