"""Backup and restore of the local profile, as docs/operations.md describes it: Postgres
with ``pg_dump``/``pg_restore``, Milvus Lite by copying its data directory while its
server is stopped. Back up, destroy both, restore, and ``hsearch reconcile`` finds no
drift.

The test has a Postgres database and a Milvus Lite server of its own (it stops and
restarts that server; the session's is never touched) and the fake encoder.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.models import DocumentInput
from hsearch.local.processes import Child, start_milvus_lite
from hsearch.runtime import Services, build_services
from hsearch.search.models import SearchQuery
from hsearch.types import SearchMode
from tests.integration.conftest import settings_from_env, stack_env
from tests.integration.jobs import index_documents
from tests.integration.services import PG_ADMIN_URL, postgres_database, unavailable

pytestmark = pytest.mark.integration

TENANTS = ("alpha", "beta")
DOCUMENTS = [
    DocumentInput(external_id="v", title="Volcanoes", text="Volcanoes erupt where plates meet."),
    DocumentInput(external_id="c", title="Coffee", text="The café serves coffee and cakes."),
    DocumentInput(external_id="r", title="Rivers", text="Rivers and lakes hold fresh water."),
]


def libpq_url(url: str) -> str:
    """The database URL as pg_dump and pg_restore take it (no SQLAlchemy driver)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def pg_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name} is not installed (Debian package postgresql-client)")
    assert path is not None
    return path


def run(argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, env=env)


class Milvus:
    """A Milvus Lite server on a data directory, restartable on the same directory."""

    def __init__(self, data: Path, logs: Path) -> None:
        self.data = data
        self.logs = logs
        self.child: Child | None = None
        self.uri = ""

    def start(self) -> str:
        log = self.logs / f"milvus-{uuid.uuid4().hex[:6]}.log"
        self.child, self.uri = start_milvus_lite(self.data, log=log)
        return self.uri

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()
            self.child = None


@pytest.fixture
def milvus(tmp_path: Path) -> Iterator[Milvus]:
    server = Milvus(tmp_path / "milvus", tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def database() -> Iterator[str]:
    with postgres_database() as url:
        upgrade_database(url)
        yield url


def search(services: Services, query: str) -> list[str]:
    async def go() -> list[str]:
        try:
            result = await services.search.search(
                SearchQuery(tenant_id="alpha", query=query, mode=SearchMode.HYBRID, top_k=3)
            )
        finally:
            await services.store.aclose()
        return [hit.external_id for hit in result.hits]

    return asyncio.run(go())


def recreate_database(url: str) -> None:
    """Drop the database ``url`` names (the disaster) and create it empty again."""
    name = make_url(url).database
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()


def reconcile(env: dict[str, str]) -> tuple[int, list[dict[str, object]]]:
    done = run([sys.executable, "-m", "hsearch.cli", "reconcile"], env=env)
    assert done.returncode in {0, 1}, done.stderr
    return done.returncode, [json.loads(line) for line in done.stdout.splitlines()]


def test_backup_destroy_restore_then_reconcile_finds_no_drift(
    tmp_path: Path, database: str, milvus: Milvus
) -> None:
    pg_dump, pg_restore = pg_tool("pg_dump"), pg_tool("pg_restore")

    def environment() -> dict[str, str]:
        return stack_env(
            database_url=database,
            broker_url="memory://",
            milvus_uri=milvus.uri,
            collection=collection,
            encoder={"kind": "fake"},
            data_dir=tmp_path / "data",
        )

    collection = f"bk_{uuid.uuid4().hex[:8]}"
    services = build_services(settings_from_env(environment()))
    try:
        index_documents(services, TENANTS, DOCUMENTS)
        counts = {t: services.store.count(tenant_id=t) for t in TENANTS}
        assert search(services, "coffee")[0] == "c"
    finally:
        services.close()
    assert all(counts.values())

    # Back up: the metadata database while it serves, Milvus Lite with its server stopped.
    backup = tmp_path / "backup"
    backup.mkdir()
    dumped = run(
        [pg_dump, "--format=custom", f"--file={backup / 'hsearch.dump'}", libpq_url(database)]
    )
    assert dumped.returncode == 0, dumped.stderr
    milvus.stop()
    shutil.copytree(milvus.data, backup / "milvus")

    # Destroy both.
    shutil.rmtree(milvus.data)
    recreate_database(database)

    # Restore the database alone first: the reconciler finds every chunk missing from
    # the (empty) Milvus, which shows it would catch a restore that lost the vectors.
    restored = run(
        [
            pg_restore,
            "--no-owner",
            "--exit-on-error",
            f"--dbname={libpq_url(database)}",
            str(backup / "hsearch.dump"),
        ]
    )
    assert restored.returncode == 0, restored.stderr
    milvus.start()
    services = build_services(settings_from_env(environment()))
    try:
        reconciler = services.reconciler()
        drifts = [reconciler.check(tenant) for tenant in reconciler.tenants()]
    finally:
        services.close()
    assert sorted(d.tenant_id for d in drifts) == sorted(TENANTS)
    assert all(sum(d.missing.values()) == d.recorded_chunks > 0 for d in drifts), drifts

    # Then Milvus, from the copied directory, on a server started on it.
    milvus.stop()
    shutil.rmtree(milvus.data)
    shutil.copytree(backup / "milvus", milvus.data)
    milvus.start()
    code, drift = reconcile(environment())
    assert code == 0, drift
    assert sorted(str(line["tenant"]) for line in drift) == sorted(TENANTS)
    for line in drift:
        assert line["orphan_chunks"] == 0, line
        assert line["documents_missing_chunks"] == {}, line
        assert line["stored_chunks"] == line["recorded_chunks"] == counts[str(line["tenant"])]

    services = build_services(settings_from_env(environment()))
    try:
        assert search(services, "coffee")[0] == "c"
    finally:
        services.close()
