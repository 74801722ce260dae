"""The tenancy service from the settings: for the API (:mod:`hsearch.runtime`), and on
its own, with the metadata database only, for ``hsearch tenants``, ``keys``,
``operator`` and ``hsearch run`` (no encoder, no vector store, nothing heavy to import)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from hsearch.config import Settings
from hsearch.db.engine import SessionFactory, create_session_factory, open_migrated_engine
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
    does not exist or was never migrated (:func:`~hsearch.db.engine.open_migrated_engine`).
    """
    url = settings.database_url
    with open_migrated_engine(url, pool_size=settings.database.pool_size) as engine:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        yield build_tenancy(settings, create_session_factory(engine))
