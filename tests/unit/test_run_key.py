"""``hsearch run``'s key: the default tenant gets a key on first start, later starts
print the same one while it works, and a new one once it does not."""

from __future__ import annotations

import stat
from pathlib import Path

from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.stack import RUN_KEY_FILE, run_key
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
