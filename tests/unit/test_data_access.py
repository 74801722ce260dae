"""SQL only in repositories; transactions committed only by their owner (docs/architecture.md,
Data access).

The contract ``sql-in-repositories`` (``make lint``) keeps SQLAlchemy's imports in
``hsearch.db`` and ``hsearch.migrations``. A session reaches services, though, and it
runs statements without an import: ``session.get(Job, id)``, ``session.delete(row)``,
``session.query(...)``. These read the source: outside ``hsearch.db`` a session is only
flushed (or handed to a repository), and only :func:`hsearch.db.engine.transaction`
commits or rolls back.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    ROOT / "shared" / "src" / "hsearch",
    ROOT / "services" / "api" / "src" / "hsearch_api",
    ROOT / "workers" / "ingest" / "src" / "hsearch_ingest",
)
DATABASE = (ROOT / "shared/src/hsearch/db", ROOT / "shared/src/hsearch/migrations")


def pending() -> frozenset[Path]:
    """The files the contract ``sql-in-repositories`` still exempts (its ``ignore_imports``
    in pyproject.toml: being restructured, their queries moved into repositories)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c["id"] == "sql-in-repositories"]
    modules = [expression.split(" -> ")[0] for expression in contract.get("ignore_imports", [])]
    return frozenset(ROOT / "shared/src" / f"{m.replace('.', '/')}.py" for m in modules)


PENDING = pending()

STATEMENTS = frozenset(
    {"execute", "scalar", "scalars", "query", "get", "add", "add_all", "delete", "merge"}
    | {"connection", "refresh", "bulk_save_objects", "bulk_insert_mappings"}
)
"""What a session runs statements with (``flush`` is the one call left to services)."""
TRANSACTION_ENDS = frozenset({"commit", "rollback"})


def sources() -> Iterator[Path]:
    for root in SOURCES:
        yield from sorted(root.rglob("*.py"))


def is_session(node: ast.expr) -> bool:
    """``session``, ``uow.session``, ``self._session``: what names a session here."""
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name.lstrip("_").endswith("session")


def calls(path: Path) -> Iterator[tuple[int, str, ast.expr]]:
    """``(line, method, receiver)`` of every method call in ``path``."""
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            yield node.lineno, node.func.attr, node.func.value


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(ROOT)}:{line}"


def test_sessions_run_statements_only_in_repositories() -> None:
    found = [
        f"{where(path, line)} session.{method}(...)"
        for path in sources()
        if not path.is_relative_to(DATABASE[0])
        and not path.is_relative_to(DATABASE[1])
        and path not in PENDING
        for line, method, receiver in calls(path)
        if method in STATEMENTS and is_session(receiver)
    ]
    assert found == [], "write the statement as a repository method and call that"


def test_only_the_transaction_commits_or_rolls_back() -> None:
    engine = ROOT / "shared/src/hsearch/db/engine.py"
    found = [
        f"{where(path, line)} .{method}()"
        for path in sources()
        if path != engine
        for line, method, receiver in calls(path)
        if method in TRANSACTION_ENDS and is_session(receiver)
    ]
    assert found == [], (
        "a unit of work is opened with hsearch.db.engine.transaction (or the request's "
        "unit_of_work), which commits or rolls back; repositories and the services "
        "working in a caller's session only flush"
    )


def test_the_checks_see_the_calls_they_look_for() -> None:
    tree = ast.parse("session.get(Job, 1)\nself._uow.session.execute(s)\nsession.commit()\n")
    seen = [
        (node.func.attr, is_session(node.func.value))
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    ]
    assert sorted(seen) == [("commit", True), ("execute", True), ("get", True)]
