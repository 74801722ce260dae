"""bench.ingest --database-url: the write-path comparison with its metadata on a
Postgres server, a database per run created from a migrated template and all dropped
at the end (the in-memory store: what is checked is the database handling)."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.ingest import Config, InMemoryTarget, run
from sqlalchemy import create_engine, text

from hsearch.ingestion.models import DocumentInput
from tests.integration.services import PG_ADMIN_URL, unavailable

pytestmark = pytest.mark.integration


def bench_databases() -> set[str]:
    engine = create_engine(PG_ADMIN_URL)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT datname FROM pg_database WHERE datname LIKE 'hsearch_bench_%'")
            )
            return {name for (name,) in rows}
    except Exception as exc:  # the shared server is down: not what this test is about
        unavailable(f"Postgres at {PG_ADMIN_URL}: {exc}")
        raise
    finally:
        engine.dispose()


def test_the_write_path_runs_on_postgres_and_leaves_no_database(tmp_path: Path) -> None:
    before = bench_databases()
    documents = [
        DocumentInput(external_id=f"d{i}", title=f"T{i}", text=f"Rivers and floods, part {i}.")
        for i in range(6)
    ]
    result = run(
        documents,
        Config(repeats=2, dimension=16, parts=("write",)),
        root=tmp_path,
        target=InMemoryTarget(),
        encoder=None,
        dataset="tiny",
        database_url=PG_ADMIN_URL,
    )
    assert result["settings"]["database"] == "postgresql"
    write = result["write"]
    assert write["chunks"] == 6
    assert len(write["pipeline"]["runs"]) == len(write["raw_insert"]["runs"]) == 2
    assert bench_databases() == before, "every database the benchmark made is dropped"
