"""Session-wide real stack for the integration suite.

One Postgres database (migrated with Alembic), a redis-server of its own (the Celery
broker),
one Milvus Lite gRPC server, the tiny generated BGE-M3 checkpoint as the encoder
(the real FlagEmbedding code path) and one real Celery worker process.
"""

from __future__ import annotations

import base64
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.local.processes import Child, start_milvus_lite
from hsearch_api.deps import get_tenant
from hsearch_api.main import create_app
from tests.fixtures.tiny_bge_m3 import build_tiny_bge_m3
from tests.integration.services import postgres_database, private_redis, start_test_worker


@dataclass
class Stack:
    env: dict[str, str]
    settings: Settings
    milvus_uri: str
    database_url: str
    root: Path
    worker: Child | None = None


WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"integration-webhook-key-32bytes!").decode()


def stack_env(
    *,
    database_url: str,
    broker_url: str,
    milvus_uri: str,
    collection: str,
    encoder: dict[str, str],
    data_dir: Path,
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    env.update(
        {
            "HSEARCH_DATABASE__URL": database_url,
            "HSEARCH_REDIS__URL": broker_url,
            "HSEARCH_BROKER__URL": broker_url,
            "HSEARCH_MILVUS__URI": milvus_uri,
            "HSEARCH_MILVUS__COLLECTION": collection,
            # The search caches' keys, apart from other sessions on the same Redis.
            "HSEARCH_CACHE__NAMESPACE": f"it-{collection}",
            "HSEARCH_DATA_DIR": str(data_dir),
            "HSEARCH_LOG_LEVEL": "INFO",
            # Tests submit jobs seconds apart: batched flushes, without 10 s waits.
            "HSEARCH_INGEST__FLUSH_MIN_INTERVAL_S": "1",
            # Job webhooks on, to a receiver the tests run on loopback.
            "HSEARCH_WEBHOOKS__SECRET": WEBHOOK_SECRET,
            "HSEARCH_WEBHOOKS__ALLOW_PRIVATE_NETWORKS": "true",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
    )
    env.update({f"HSEARCH_ENCODER__{k.upper()}": v for k, v in encoder.items()})
    return env


def settings_from_env(env: dict[str, str]) -> Settings:
    saved = dict(os.environ)
    try:
        os.environ.clear()
        os.environ.update(env)
        return Settings(_env_file=None)
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="session")
def tiny_bge_m3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bge_m3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    with postgres_database() as url:
        upgrade_database(url)
        yield url


@pytest.fixture(scope="session")
def milvus_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("milvus")
    proc, uri = start_milvus_lite(root / "data", log=root / "milvus.log")
    yield uri
    proc.stop()


@pytest.fixture(scope="session")
def broker_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The session's broker (and cache): a redis-server of its own, so that another test
    session beside it on the machine never takes its jobs."""
    with private_redis(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    pg_url: str,
    milvus_uri: str,
    tiny_bge_m3: Path,
    broker_url: str,
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp("stack")
    broker = broker_url
    env = stack_env(
        database_url=pg_url,
        broker_url=broker,
        milvus_uri=milvus_uri,
        collection=f"it_{uuid.uuid4().hex[:8]}",
        encoder={
            "kind": "bge-m3",
            "bge_m3_path": str(tiny_bge_m3),
            "batch_size": "8",
            "max_length": "128",
        },
        data_dir=root,
    )
    st = Stack(
        env=env,
        settings=settings_from_env(env),
        milvus_uri=milvus_uri,
        database_url=pg_url,
        root=root,
    )
    yield st
    if st.worker is not None:
        st.worker.stop()


@pytest.fixture(scope="session")
def worker(stack: Stack) -> Child:
    if stack.worker is None or stack.worker.proc.poll() is not None:
        stack.worker = start_test_worker(stack.env, stack.root)
    return stack.worker


@pytest.fixture
def tenant() -> str:
    """A fresh tenant per test: tests never see each other's data."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def sessions(stack: Stack) -> Iterator[sessionmaker[Session]]:
    engine = create_db_engine(stack.database_url)
    yield create_session_factory(engine)
    engine.dispose()


@contextlib.asynccontextmanager
async def api_client(settings: Settings, *, tenant: str) -> AsyncIterator[httpx.AsyncClient]:
    """The API built from ``settings``, in-process (ASGI, lifespan run), as ``tenant``."""
    app = create_app(settings)
    app.dependency_overrides[get_tenant] = lambda: tenant
    async with LifespanManager(app, startup_timeout=120) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            yield c


@pytest.fixture
async def client(stack: Stack, tenant: str) -> AsyncIterator[httpx.AsyncClient]:
    """The API in-process (ASGI) against the real services, as ``tenant``."""
    async with api_client(stack.settings, tenant=tenant) as c:
        yield c
