"""``hsearch mcp`` without a key stops at once, saying how to give one, rather than
serving tools that every call would refuse."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from hsearch.cli import app
from hsearch.config import get_settings


def test_without_a_key_it_exits_2_saying_which_variable(tmp_path: Path) -> None:
    get_settings.cache_clear()
    try:
        env = {"HSEARCH_API_KEY": "", "HSEARCH_DATA_DIR": str(tmp_path)}
        result = CliRunner().invoke(app, ["mcp", "--url", "http://127.0.0.1:9"], env=env)
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 2
    assert "HSEARCH_API_KEY" in result.output
