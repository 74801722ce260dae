"""The tenancy service from the settings: for the API (:mod:`hsearch.runtime`), and on
its own, with the metadata database only, for ``hsearch tenants``, ``keys``,
``operator`` and ``hsearch run`` (no encoder, no vector store, nothing heavy to import)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hsearch.config import Settings
from hsearch.db.engine import (
    SessionFactory,
    create_db_engine,
    create_session_factory,
    database_of,
    has_table,
    shown_url,
)
from hsearch.errors import ConfigurationError
from hsearch.tenancy.keys import load_server_key
from hsearch.tenancy.service import TenancyService

__all__ = ["build_tenancy", "open_tenancy"]


def build_tenancy(settings: Settings, sessions: SessionFactory) -> TenancyService:
    """The tenancy service on ``sessions``, hashing keys under the configured server key
    (``auth.secret``, else the data directory's, generated on first use)."""
    return TenancyService(
        sessions,
        server_key=load_server_key(settings.auth, secret_file=settings.auth_secret_file),
        cache_ttl_s=settings.auth.cache_ttl_s,
        stale_ttl_s=settings.auth.stale_ttl_s,
        cache_size=settings.auth.cache_size,
        token_max_ttl_s=settings.auth.token_max_ttl_s,
        token_default_ttl_s=settings.auth.token_default_ttl_s,
    )


@contextmanager
def open_tenancy(settings: Settings) -> Iterator[TenancyService]:
    """The tenancy service on its own engine, disposed of on exit.

    Raises ConfigurationError, creating nothing, when the configured metadata database
    does not exist or was never migrated (a command run from another folder would
    otherwise make an empty ``./data`` there and fail deep inside).
    """
    url = settings.database_url
    shown = shown_url(url)
    hint = (
        "run `hsearch db upgrade` (or `hsearch run`) first, or point HSEARCH_DATA_DIR "
        "or HSEARCH_DATABASE__URL at the right one"
    )
    database = database_of(url)
    if url.startswith("sqlite") and database and not Path(database).exists():
        raise ConfigurationError(f"no hsearch database at {shown}: {hint}")
    engine = create_db_engine(url, pool_size=settings.database.pool_size)
    try:
        if not has_table(engine, "alembic_version"):
            raise ConfigurationError(f"the database at {shown} has no hsearch schema: {hint}")
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        yield build_tenancy(settings, create_session_factory(engine))
    finally:
        engine.dispose()
