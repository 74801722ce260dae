"""``hsearch tenants``, ``keys`` and ``operator``: run on the server, against its
database and server key; they print JSON, audit every change, and the keys they print
work against an API on the same data directory."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from hsearch.cli import app
from hsearch.config import Settings, get_settings
from hsearch.errors import RevokedCredentialError
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import Scope
from tests.unit.api.conftest import api_settings, serve


class Cli:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.settings = Settings(_env_file=None, data_dir=data_dir)

    def __call__(self, *args: str) -> Result:
        get_settings.cache_clear()
        try:
            env = {"HSEARCH_DATA_DIR": str(self.data_dir)}
            return CliRunner().invoke(app, list(args), env=env)
        finally:
            get_settings.cache_clear()

    def json(self, *args: str) -> Any:
        result = self(*args)
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        return json.loads(lines[0]) if len(lines) == 1 else [json.loads(x) for x in lines]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    runner = Cli(tmp_path / "data")
    assert runner("db", "upgrade").exit_code == 0
    return runner


def test_tenants_create_prints_the_tenant_and_an_admin_key(cli: Cli) -> None:
    created = cli.json("tenants", "create", "Acme Corp", "--id", "acme")
    assert set(created) == {"tenant_id", "api_key"}
    assert created["tenant_id"] == "acme"
    with open_tenancy(cli.settings) as tenancy:
        principal = tenancy.authenticate(created["api_key"])
    assert principal.tenant_id == "acme"
    assert principal.scopes == set(Scope)

    generated = cli.json("tenants", "create", "Globex")
    assert generated["tenant_id"].startswith("t_")
    again = cli("tenants", "create", "Acme", "--id", "acme")
    assert (again.exit_code, again.stderr) == (1, "error (tenant_exists): tenant 'acme' exists\n")
    same_name = cli("tenants", "create", "Acme Corp", "--id", "acme2")
    assert (same_name.exit_code, same_name.stderr) == (
        1,
        "error (tenant_exists): name: tenant 'acme' is already named 'Acme Corp'\n",
    )
    listed = cli.json("tenants", "list")
    assert [(t["tenant_id"], t["name"], t["status"]) for t in listed] == [
        ("acme", "Acme Corp", "active"),
        (generated["tenant_id"], "Globex", "active"),
    ]


def test_tenants_suspend_and_resume(cli: Cli) -> None:
    cli.json("tenants", "create", "Acme", "--id", "acme")
    assert cli.json("tenants", "suspend", "acme")["status"] == "suspended"
    assert cli.json("tenants", "list")["status"] == "suspended"
    assert cli.json("tenants", "resume", "acme")["status"] == "active"
    missing = cli("tenants", "suspend", "nobody")
    assert (missing.exit_code, missing.stderr) == (
        1,
        "error (tenant_not_found): tenant 'nobody' not found\n",
    )


def test_keys_create_list_and_revoke(cli: Cli) -> None:
    first = cli.json("tenants", "create", "Acme", "--id", "acme")["api_key"]
    before = datetime.now(UTC)
    created = cli.json(
        "keys", "create", "--tenant", "acme", "--scope", "search", "--scope", "ingest",
        "--expires-in", "30d", "--name", "loader",
    )  # fmt: skip
    assert created["api_key"].startswith(created["prefix"] + "_")
    assert (created["tenant_id"], created["scopes"], created["name"]) == (
        "acme",
        ["search", "ingest"],
        "loader",
    )
    expires = datetime.fromisoformat(created["expires_at"])
    assert before + timedelta(days=30) <= expires <= datetime.now(UTC) + timedelta(days=30)

    listed = cli.json("keys", "list", "--tenant", "acme")
    assert [k["key_id"] for k in listed][1:] == [created["key_id"]]
    printed = cli("keys", "list", "--tenant", "acme").stdout
    for key in (first, created["api_key"]):
        assert key.split("_", 2)[2] not in printed

    revoked = cli.json("keys", "revoke", created["key_id"])
    assert revoked["revoked_at"] is not None
    with open_tenancy(cli.settings) as tenancy, pytest.raises(RevokedCredentialError):
        tenancy.authenticate(created["api_key"])


def test_keys_create_refuses_what_it_cannot_issue(cli: Cli) -> None:
    cli.json("tenants", "create", "Acme", "--id", "acme")
    bad_scope = cli("keys", "create", "--tenant", "acme", "--scope", "root")
    assert bad_scope.exit_code == 2
    assert "'root' is not one of" in bad_scope.stderr
    no_scope = cli("keys", "create", "--tenant", "acme")
    assert no_scope.exit_code == 2
    bad_expiry = cli(
        "keys", "create", "--tenant", "acme", "--scope", "search", "--expires-in", "3x"
    )
    assert bad_expiry.exit_code == 1
    assert bad_expiry.stderr.startswith("error (invalid_request): --expires-in: ")
    no_tenant = cli("keys", "create", "--tenant", "nobody", "--scope", "search")
    assert (no_tenant.exit_code, no_tenant.stderr.split(":")[0]) == (1, "error (tenant_not_found)")
    not_an_id = cli("keys", "revoke", "hsk_123")
    assert (not_an_id.exit_code, not_an_id.stderr.split(":")[0]) == (1, "error (invalid_request)")


def test_operator_create_and_the_audit_trail(cli: Cli) -> None:
    cli.json("tenants", "create", "Acme", "--id", "acme")
    operator = cli.json("operator", "create", "--name", "on call")
    assert operator["api_key"].startswith("hso_")
    assert (operator["role"], operator["tenant_id"], operator["scopes"]) == (
        "operator",
        None,
        ["operator"],
    )
    with open_tenancy(cli.settings) as tenancy:
        events = tenancy.audit_log()
    assert [e.action for e in reversed(events)] == [
        "tenant.create",
        "key.create",
        "operator.create",
    ]
    assert all(e.actor.startswith("cli") for e in events)


async def test_a_key_the_command_prints_works_against_the_api(tmp_path: Path) -> None:
    cli = Cli(tmp_path)  # the API's data directory: its database and server key
    async with serve(api_settings(tmp_path)) as api, api.anonymous() as client:
        created = cli.json("tenants", "create", "Acme", "--id", "acme")
        auth = {"Authorization": f"Bearer {created['api_key']}"}
        resp = await client.post("/v1/search", json={"query": "anything"}, headers=auth)
        assert resp.status_code == 200, resp.text
        search_only = cli.json("keys", "create", "--tenant", "acme", "--scope", "search")
        auth = {"Authorization": f"Bearer {search_only['api_key']}"}
        denied = await client.get("/v1/jobs", headers=auth)
        assert (denied.status_code, denied.json()["error"]) == (403, "insufficient_scope")


def test_a_missing_or_unmigrated_database_is_one_clear_line_and_creates_nothing(
    tmp_path: Path,
) -> None:
    elsewhere = Cli(tmp_path / "not-a-project" / "data")
    result = elsewhere("tenants", "create", "Acme")
    assert result.exit_code == 1
    assert result.stderr.startswith("error (configuration_error): no hsearch database at sqlite")
    assert "hsearch db upgrade" in result.stderr
    assert not (tmp_path / "not-a-project").exists(), "nothing was created"

    empty = tmp_path / "empty" / "data"
    empty.mkdir(parents=True)
    (empty / "hsearch.sqlite").touch()
    result = Cli(empty)("keys", "list", "--tenant", "acme")
    assert result.exit_code == 1
    assert "has no hsearch schema" in result.stderr
