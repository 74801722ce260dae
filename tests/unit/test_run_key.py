"""``hsearch run``'s key: the default tenant gets a key on first start, later starts
print the same one while it works, and a new one once it does not."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.queue import INGEST_QUEUE
from hsearch.stack import RUN_KEY_FILE, _prepare, run_key
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import Scope, TenantStatus


def embedded(tmp_path: Path) -> Settings:
    settings = Settings(_env_file=None, data_dir=tmp_path)
    upgrade_database(settings.database_url)
    return settings


def test_the_first_start_creates_the_default_tenant_and_a_private_key(tmp_path: Path) -> None:
    settings = embedded(tmp_path)
    key = run_key(settings)
    path = tmp_path / RUN_KEY_FILE
    assert path.read_text().strip() == key
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    with open_tenancy(settings) as tenancy:
        [tenant] = tenancy.list_tenants()
        assert (tenant.id, tenant.status) == ("default", TenantStatus.ACTIVE)
        principal = tenancy.authenticate(key)
    assert principal.tenant_id == "default"
    assert principal.scopes == set(Scope)


def test_later_starts_print_the_same_key_while_it_works(tmp_path: Path) -> None:
    settings = embedded(tmp_path)
    first = run_key(settings)
    assert run_key(settings) == first
    with open_tenancy(settings) as tenancy:
        [row] = tenancy.list_keys("default")
        tenancy.revoke_key(row.id, actor="test")
    second = run_key(settings)
    assert second != first
    assert (tmp_path / RUN_KEY_FILE).read_text().strip() == second
    with open_tenancy(settings) as tenancy:
        assert tenancy.authenticate(second).tenant_id == "default"


# kombu's SQL transport's models use a loader strategy SQLAlchemy 2.1 deprecates.
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
def test_the_embedded_broker_is_made_before_any_process_starts(tmp_path: Path) -> None:
    """kombu's SQL transport makes its tables and the queue's row on first use, unguarded:
    the API and a worker starting together raced on them and the worker stopped. The
    stack makes them before it starts either."""
    settings = Settings(_env_file=None, data_dir=tmp_path)
    assert settings.broker_url.startswith("sqla+sqlite:///")
    _prepare(settings)
    broker = sqlite3.connect(tmp_path / "broker.sqlite")
    try:
        names = [row[0] for row in broker.execute("SELECT name FROM kombu_queue")]
    finally:
        broker.close()
    assert names == [INGEST_QUEUE]
