from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from hsearch.db import models  # noqa: F401 - registers the tables on Base.metadata
from hsearch.db.base import Base
from hsearch.db.engine import create_db_engine

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    sqlite = connection.dialect.name == "sqlite"
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=sqlite,  # SQLite cannot ALTER much: it rebuilds the table
        compare_type=True,
    )
    if not sqlite:
        with context.begin_transaction():
            context.run_migrations()
        return
    # A rebuild drops the old table; with foreign keys on (as every connection of the
    # product opens them), dropping ingestion_jobs would delete every job item through
    # their ON DELETE CASCADE. Off for the migration (the pragma is ignored inside a
    # transaction, so set before it begins), checked after, then on again.
    connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
    try:
        with context.begin_transaction():
            context.run_migrations()
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                msg = f"the migration left rows whose foreign keys point nowhere: {broken[:5]}"
                raise RuntimeError(msg)
    finally:
        connection.exec_driver_sql("PRAGMA foreign_keys=ON")


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        msg = "sqlalchemy.url is not set on the Alembic config"
        raise RuntimeError(msg)
    engine = create_db_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
