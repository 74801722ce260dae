"""SQLite's WAL checkpoints run in a thread of the process, not in the commit that takes
the WAL past 1,000 pages (:mod:`hsearch.db.checkpoint`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine, text

from hsearch.db.checkpoint import BACKSTOP_PAGES, WalCheckpointer
from hsearch.db.engine import create_db_engine

BLOB = 1 << 20  # 1 MiB: 256 pages, far below SQLite's own threshold of 1,000


def checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "hsearch-sqlite-checkpoint"]


def wait_until(condition: Callable[[], bool], *, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def write_blobs(engine: Engine, count: int) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, b BLOB)"))
    for _ in range(count):
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO blobs (b) VALUES (randomblob(:n))"), {"n": BLOB})


def test_a_commit_leaves_the_checkpoint_to_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "meta.sqlite"
    engine = create_db_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA wal_autocheckpoint")).scalar() == BACKSTOP_PAGES
        write_blobs(engine, 2)
        # The pool keeps its connection open, so closing it checkpoints nothing: the
        # pages reach the database file only by a checkpoint, which no commit ran.
        assert wait_until(lambda: path.stat().st_size >= 2 * BLOB), path.stat().st_size
    finally:
        engine.dispose()


def test_the_wal_starts_over_once_checkpointed(tmp_path: Path) -> None:
    """Commits spaced out as a worker's are: the thread keeps up, the WAL file stays
    about a commit long instead of growing with everything written."""
    path = tmp_path / "meta.sqlite"
    engine = create_db_engine(f"sqlite:///{path}")
    try:
        for written in range(1, 13):
            write_blobs(engine, 1)
            assert wait_until(lambda: path.stat().st_size >= written * BLOB)  # noqa: B023
        # The WAL starts over after a checkpoint that copied everything; a commit that
        # lands while the thread is still copying appends instead (more often on a
        # loaded machine: 4 of 12 were seen). Less than two thirds of what was written
        # shows it does not grow with everything written, whatever the machine's speed.
        wal = Path(f"{path}-wal").stat().st_size
        assert wal < 8 * BLOB, wal
    finally:
        engine.dispose()


def test_disposing_the_engine_stops_the_thread_after_a_last_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "meta.sqlite"
    before = set(checkpointers())
    engine = create_db_engine(f"sqlite:///{path}")
    write_blobs(engine, 1)
    ours = set(checkpointers()) - before
    assert len(ours) == 1
    engine.dispose()
    assert not any(t.is_alive() for t in ours)
    assert path.stat().st_size >= BLOB
    # An engine disposed of connects again, and checkpoints again.
    write_blobs(engine, 1)
    try:
        assert set(checkpointers()) - before
        assert wait_until(lambda: path.stat().st_size >= 2 * BLOB)
    finally:
        engine.dispose()


def test_a_checkpointer_outlives_no_engine(tmp_path: Path) -> None:
    class Owner:
        pass

    owner = Owner()
    checkpointer = WalCheckpointer(str(tmp_path / "x.sqlite"), owner=owner, interval_s=0.01)
    before = set(checkpointers())
    checkpointer.ensure_running()
    (thread,) = set(checkpointers()) - before
    del owner
    thread.join(timeout=5)
    assert not thread.is_alive()


def test_an_in_memory_database_has_no_checkpointer() -> None:
    before = set(checkpointers())
    engine = create_db_engine("sqlite://")
    try:
        with engine.begin() as conn:
            assert conn.execute(text("SELECT 1")).scalar() == 1
        assert set(checkpointers()) == before
    finally:
        engine.dispose()
