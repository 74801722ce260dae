"""The import contracts of pyproject.toml cover every package: a module the ``layers``
contract does not name is checked by none of its rules (``hsearch.processes`` sat
outside every layer until it became ``hsearch.local``), and one the contract
``sql-in-repositories`` does not name may import SQLAlchemy."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path
from typing import Any

import hsearch

ROOT = Path(__file__).resolve().parents[2]
DATABASE = {"hsearch.db", "hsearch.migrations"}


def contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    contracts: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    (found,) = [c for c in contracts if c["id"] == contract_id]
    return found


def top_level() -> set[str]:
    """``hsearch``'s modules and packages (``hsearch.samples`` is data, not code)."""
    return {f"hsearch.{m.name}" for m in pkgutil.iter_modules(hsearch.__path__)}


def named(expressions: list[str]) -> set[str]:
    """The modules a layer list names (``"a : b"``, ``"a | b"``), down to ``hsearch.x``."""
    names = {n.strip() for e in expressions for part in e.split("|") for n in part.split(":")}
    return {".".join(n.split(".")[:2]) for n in names if n.startswith("hsearch.")}


def test_every_package_of_hsearch_has_a_layer() -> None:
    assert top_level() - named(contract("layers")["layers"]) == set()


def test_sqlalchemy_is_forbidden_everywhere_but_the_database_packages() -> None:
    sources = set(contract("sql-in-repositories")["source_modules"])
    assert top_level() - DATABASE - sources == set()
    assert {"hsearch_api", "hsearch_ingest"} <= sources
    assert not sources & DATABASE
