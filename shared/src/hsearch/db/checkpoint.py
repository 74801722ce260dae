"""SQLite's WAL checkpoints, in a thread of their own rather than in a commit.

In WAL mode SQLite appends each commit to the ``-wal`` file and copies those pages back
into the database file at a checkpoint. By default the commit that takes the WAL past
1,000 pages runs that checkpoint itself, with an fsync of the database file, before it
returns. A worker indexing a job commits once per group of chunks, and each commit
writes a few hundred pages (the BM25 term rows of a group's documents lie all over
their table): every fourth or fifth commit ran a checkpoint, and the mean commit took
about 8 ms instead of 3, on the write path's critical path (a group's commit waits for
its store write and delays the next group's). docs/history/ingest-throughput.md,
`7323d76`: checkpoints off the commit.

So a process moves the automatic checkpoint of its connections far out (to
:data:`BACKSTOP_PAGES`, a bound on the WAL should this thread fall behind) and runs them here:
a thread that looks at the WAL file every :data:`CHECKPOINT_INTERVAL_S` and, when it has
changed, runs a ``PASSIVE`` checkpoint on a connection of its own. A passive checkpoint
waits for no reader or writer: it copies what is committed and leaves the rest to the
next round, and once it has copied everything the next commit starts the WAL over, so
the file does not grow for as long as the thread keeps up. Every process that writes
(the API, each worker) runs one; SQLite also checkpoints when the last connection to the
database closes. Several processes' threads on one file take turns (a checkpoint already
running makes another return at once).

No library does this for SQLAlchemy; it is a loop around one pragma.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import weakref
from typing import Any

__all__ = ["BACKSTOP_PAGES", "CHECKPOINT_INTERVAL_S", "WalCheckpointer", "sqlite_file"]

logger = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 0.1
"""How often the thread looks at the WAL file."""
BACKSTOP_PAGES = 10_000
"""The WAL size (pages of 4 KiB) past which a commit checkpoints, as every commit past
1,000 pages does by default: only if the thread falls that far behind."""


class WalCheckpointer:
    """Checkpoints the SQLite database at ``path`` in a daemon thread, for as long as
    ``owner`` (the engine whose connections leave checkpoints to it) lives.

    :meth:`ensure_running` starts the thread, and starts it again after :meth:`stop` (an
    engine disposed of can connect again) and in a forked child (a fork keeps only the
    thread that forked): call it as each connection is made."""

    def __init__(
        self, path: str, *, owner: object, interval_s: float = CHECKPOINT_INTERVAL_S
    ) -> None:
        self._path = path
        self._wal = f"{path}-wal"
        self._owner = weakref.ref(owner)
        self._interval_s = interval_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def ensure_running(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run,
                args=(self._stop,),
                name="hsearch-sqlite-checkpoint",
                daemon=True,
            )
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (the engine's connections are closed); it checkpoints once
        more first."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self, stop: threading.Event) -> None:
        connection: sqlite3.Connection | None = None
        seen: tuple[int, int] | None = None
        try:
            while not stop.wait(self._interval_s) and self._owner() is not None:
                seen, connection = self._round(seen, connection)
            _, connection = self._round(None, connection)  # what the last commits wrote
        finally:
            if connection is not None:
                connection.close()

    def _round(
        self, seen: tuple[int, int] | None, connection: sqlite3.Connection | None
    ) -> tuple[tuple[int, int] | None, sqlite3.Connection | None]:
        """One look at the WAL file: a checkpoint if it changed since ``seen``. Returns
        what was seen and the connection (opened at the first checkpoint)."""
        try:
            stat = os.stat(self._wal)
        except OSError:  # no WAL (yet, or any more): nothing to copy
            return None, connection
        mark = (stat.st_size, stat.st_mtime_ns)
        if mark == seen:
            return seen, connection
        try:
            if connection is None:
                connection = sqlite3.connect(self._path, timeout=0, isolation_level=None)
            connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # busy, or the file gone: the next round tries again
            logger.debug("db.checkpoint.failed path=%s error=%s", self._path, exc)
            return None, connection
        return mark, connection


def sqlite_file(database: Any) -> str | None:
    """The file of an SQLite URL's ``database`` part; ``None`` for an in-memory
    database, which has no WAL."""
    if not database or database == ":memory:" or str(database).startswith("file:"):
        return None
    return str(database)
