"""The ORM models are the single source: the migrations must produce exactly them."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

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
