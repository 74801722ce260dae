"""Connections to Postgres find a lost server within about a minute: libpq's
connection timeout and TCP keepalive parameters reach every connection of the
engine, and a URL that sets one keeps its own."""

from __future__ import annotations

import pytest
from sqlalchemy import make_url

from hsearch.db.engine import POSTGRES_CONNECTION, create_db_engine

pytestmark = pytest.mark.integration


def _parameters(url: str) -> dict[str, str]:
    engine = create_db_engine(url)
    try:
        with engine.connect() as conn:
            dbapi = conn.connection.dbapi_connection
            assert dbapi is not None
            parameters: dict[str, str] = dbapi.info.get_parameters()
            return parameters
    finally:
        engine.dispose()


def test_every_connection_has_the_timeouts_and_keepalives(pg_url: str) -> None:
    parameters = _parameters(pg_url)
    for name, value in POSTGRES_CONNECTION.items():
        assert parameters.get(name) == str(value), name


def test_a_url_that_sets_one_keeps_its_own(pg_url: str) -> None:
    url = make_url(pg_url).update_query_dict({"keepalives_idle": "5"})
    parameters = _parameters(url.render_as_string(hide_password=False))
    assert parameters["keepalives_idle"] == "5"
    assert parameters["tcp_user_timeout"] == str(POSTGRES_CONNECTION["tcp_user_timeout"])
