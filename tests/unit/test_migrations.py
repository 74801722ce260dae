"""The ORM models are the single source: the migrations must produce exactly them."""

from __future__ import annotations

from pathlib import Path

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
