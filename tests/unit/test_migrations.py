"""The ORM models are the single source: the migrations must produce exactly them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

from hsearch.db.engine import create_db_engine
from hsearch.db.migrate import alembic_config, upgrade_database


def test_migrations_match_models_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    upgrade_database(url)
    command.check(alembic_config(url))  # raises if autogenerate finds a difference


def test_downgrade_to_base_and_up_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    upgrade_database(url)
    command.downgrade(alembic_config(url), "base")
    upgrade_database(url)
    command.check(alembic_config(url))


def test_0008_renames_duplicate_tenant_names_and_then_refuses_them(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    upgrade_database(url, "0007")
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tenants (id, name, status, data_generation, created_at) VALUES "
                "('b', 'Acme', 'active', 0, '2026-01-02'), "
                "('a', 'Acme', 'active', 0, '2026-01-03'), "
                "('c', 'Acme', 'active', 0, '2026-01-01'), "
                "('d', 'Globex', 'active', 0, '2026-01-01')"
            )
        )
    upgrade_database(url)
    with engine.begin() as conn:
        names = conn.execute(sa.text("SELECT id, name FROM tenants ORDER BY id")).all()
        audit = conn.execute(
            sa.text("SELECT actor, action, tenant_id FROM audit_log ORDER BY tenant_id")
        ).all()
    # The oldest keeps the name; the later ones get their id appended.
    assert names == [("a", "Acme (a)"), ("b", "Acme (b)"), ("c", "Acme"), ("d", "Globex")]
    assert audit == [
        ("migration:0008", "tenant.rename", "a"),
        ("migration:0008", "tenant.rename", "b"),
    ]
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO tenants (id, name, status, data_generation, created_at) "
                "VALUES ('e', 'Globex', 'active', 0, '2026-01-04')"
            )
        )
    engine.dispose()


def _insert_row(conn: sa.Connection, table: str, **values: object) -> None:
    """A row of ``table`` as the schema stands at the current revision: ``values`` (those
    of its columns), and a placeholder for every other column that needs one."""
    placeholders: dict[str, object] = {}
    existing = sa.inspect(conn).get_columns(table)
    values = {k: v for k, v in values.items() if k in {c["name"] for c in existing}}
    for column in existing:
        name, kind = column["name"], column["type"]
        if name in values or column["nullable"] or column.get("default") is not None:
            continue
        if column.get("autoincrement") is True or (name == "id" and "INT" in str(kind)):
            continue
        if isinstance(kind, sa.Integer | sa.Boolean):
            placeholders[name] = 0
        elif isinstance(kind, sa.DateTime):
            placeholders[name] = "2026-01-01 00:00:00"
        elif isinstance(kind, sa.JSON):
            placeholders[name] = "{}"
        else:
            placeholders[name] = "x"
    row = {**placeholders, **values}
    columns = ", ".join(row)
    params = ", ".join(f":{name}" for name in row)
    conn.execute(sa.text(f"INSERT INTO {table} ({columns}) VALUES ({params})"), row)


@pytest.mark.parametrize("start", ["0003", "0008"])
def test_migrations_keep_the_jobs_items_on_sqlite(tmp_path: Path, start: str) -> None:
    # SQLite rebuilds a table to alter it (batch mode): dropping the old ingestion_jobs
    # must not cascade to its job items (the database runs with foreign keys on).
    url = f"sqlite:///{tmp_path / 'm.sqlite'}"
    upgrade_database(url, start)
    engine = create_db_engine(url)
    job = uuid.uuid4().hex
    with engine.begin() as conn:
        _insert_row(conn, "tenants", id="t", name="T", status="active")
        _insert_row(conn, "ingestion_jobs", id=job, tenant_id="t", status="running")
        for ordinal in range(3):
            _insert_row(
                conn, "job_items", job_id=job, ordinal=ordinal, external_id=f"d{ordinal}",
                content="text", content_hash="h", status="pending",
            )  # fmt: skip

    def items() -> int:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM job_items")).scalar_one())

    upgrade_database(url)
    assert items() == 3
    command.downgrade(alembic_config(url), start)
    assert items() == 3
    upgrade_database(url)
    assert items() == 3
    with engine.connect() as conn:
        assert conn.execute(sa.text("PRAGMA foreign_keys")).scalar_one() == 1
    engine.dispose()
