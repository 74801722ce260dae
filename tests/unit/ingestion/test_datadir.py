"""One data directory, one metadata database: the data directory records whose vector
data it holds; a start with another database is refused in one line, the same one
starts, and ``hsearch reconcile --repair`` adopts the directory for the new one."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hsearch.cli import app
from hsearch.config import Settings, get_settings
from hsearch.db.migrate import upgrade_database
from hsearch.errors import ConfigurationError, DataDirectoryMismatchError
from hsearch.ingestion.operations.datadir import (
    MARKER,
    adopt_data_directory,
    check_data_directory,
    configured_owner,
    milvus_data_dir,
    recorded_owner,
)
from hsearch.local.processes import free_port
from hsearch.stack import run_stack


def on(data: Path, database: Path, *, milvus_uri: str = "") -> Settings:
    """Settings of ``data`` with the metadata database in ``database`` (migrated)."""
    settings = Settings(
        _env_file=None,
        data_dir=data,
        database={"url": f"sqlite:///{database}"},
        milvus={"uri": milvus_uri},
    )
    upgrade_database(settings.database_url)
    return settings


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_the_first_start_records_the_database_and_the_same_one_starts_again(
    tmp_path: Path, data: Path
) -> None:
    first = on(data, tmp_path / "a.sqlite")
    owner = check_data_directory(first)
    assert owner is not None
    assert recorded_owner(first) == owner
    assert (milvus_data_dir(first) / MARKER).exists()
    # The id lives in the database: another process (settings) of it agrees.
    assert check_data_directory(on(data, tmp_path / "a.sqlite")) == owner


def test_a_start_with_another_database_is_refused_in_one_line(tmp_path: Path, data: Path) -> None:
    first = on(data, tmp_path / "a.sqlite")
    check_data_directory(first)
    other = on(data, tmp_path / "b.sqlite")
    with pytest.raises(DataDirectoryMismatchError) as refused:
        check_data_directory(other)
    message = refused.value.message
    assert "\n" not in message
    assert str(tmp_path / "a.sqlite") in message
    assert str(tmp_path / "b.sqlite") in message
    assert "new data directory" in message
    assert "hsearch reconcile --repair" in message
    # Still the first database's: a refused start records nothing.
    assert recorded_owner(other) == configured_owner(first)


# kombu's SQL transport's models use a loader strategy SQLAlchemy 2.1 deprecates.
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
def test_the_stack_refuses_to_start_and_exits_non_zero(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str], restore_signals: None
) -> None:
    check_data_directory(on(data, tmp_path / "a.sqlite"))
    other = on(data, tmp_path / "b.sqlite")
    capsys.readouterr()
    assert run_stack(other, ingest_sample=False) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "hsearch reconcile --repair" in err
    assert str(tmp_path / "a.sqlite") in err
    assert str(tmp_path / "b.sqlite") in err
    # Refused before any child started: no Milvus Lite log, no API.
    assert not (data / "logs" / "milvus.log").exists()


def test_adopting_records_the_configured_database(tmp_path: Path, data: Path) -> None:
    check_data_directory(on(data, tmp_path / "a.sqlite"))
    other = on(data, tmp_path / "b.sqlite")
    adopted = adopt_data_directory(other)
    assert adopted == configured_owner(other)
    assert check_data_directory(other) == adopted
    with pytest.raises(DataDirectoryMismatchError):
        check_data_directory(on(data, tmp_path / "a.sqlite"))


def test_a_milvus_server_of_ones_own_is_not_checked(tmp_path: Path, data: Path) -> None:
    check_data_directory(on(data, tmp_path / "a.sqlite"))
    remote = on(data, tmp_path / "b.sqlite", milvus_uri="http://milvus.example:19530")
    assert check_data_directory(remote) is None


def test_an_unmigrated_database_is_named(tmp_path: Path, data: Path) -> None:
    settings = Settings(
        _env_file=None, data_dir=data, database={"url": f"sqlite:///{tmp_path / 'new.sqlite'}"}
    )
    with pytest.raises(ConfigurationError, match="hsearch db upgrade"):
        check_data_directory(settings)


@pytest.mark.process
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_reconcile_repair_adopts_the_data_directory(tmp_path: Path, data: Path) -> None:
    """``hsearch reconcile --repair`` on the refused directory: it reports (without a
    refusal), repairs, and records the configured database; the next start passes."""
    check_data_directory(on(data, tmp_path / "a.sqlite"))
    other = on(data, tmp_path / "b.sqlite")
    env = {
        "HSEARCH_DATA_DIR": str(data),
        "HSEARCH_DATABASE__URL": other.database_url,
        "HSEARCH_MILVUS__LITE_PORT": str(free_port()),
        "HSEARCH_ENCODER__KIND": "offline",
    }
    get_settings.cache_clear()
    try:
        refused = CliRunner().invoke(app, ["tenants", "delete", "nobody", "--yes"], env=env)
        assert refused.exit_code != 0
        assert "hsearch reconcile --repair" in refused.output
        result = CliRunner().invoke(app, ["reconcile", "--repair"], env=env)
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert "recorded as metadata database" in result.stderr
    assert all(json.loads(line)["orphan_chunks"] == 0 for line in result.stdout.splitlines())
    assert check_data_directory(other) == configured_owner(other)


@pytest.fixture
def restore_signals() -> Iterator[None]:
    """``run_stack`` installs its SIGINT/SIGTERM handlers; pytest's come back after."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)
