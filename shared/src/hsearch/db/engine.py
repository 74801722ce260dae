"""Engine and session factories, and what the layers above the database name of it.

Whoever opens a transaction owns it (:func:`transaction`, or the request's unit of
work, :mod:`hsearch.ingestion.dispatch`): it commits or rolls back. Repositories run
their statements in the session they are given and at most ``flush()``; they never
open a session, commit or roll back (docs/architecture.md, Data access).

SQLAlchemy is imported only under :mod:`hsearch.db` and :mod:`hsearch.migrations`
(contract ``sql-in-repositories``): services and the wiring type their sessions with
:data:`Session` and :data:`SessionFactory`, catch :data:`DATABASE_UNAVAILABLE`,
:data:`DATABASE_ERROR` and :data:`CONSTRAINT_VIOLATED`, and check a schema with
:func:`has_table`, all from here."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from sqlalchemy import Engine, create_engine, event, inspect, make_url, text
from sqlalchemy.exc import IntegrityError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.checkpoint import BACKSTOP_PAGES, WalCheckpointer, sqlite_file
from hsearch.errors import ConfigurationError, MetadataUnavailableError

__all__ = [
    "CONSTRAINT_VIOLATED",
    "DATABASE_ERROR",
    "DATABASE_UNAVAILABLE",
    "POSTGRES_CONNECTION",
    "Engine",
    "Session",
    "SessionFactory",
    "create_db_engine",
    "create_session_factory",
    "database_of",
    "duplicate_row",
    "has_table",
    "hold_write_lock",
    "json_dumps",
    "json_loads",
    "ping_database",
    "shown_url",
    "transaction",
    "unavailable",
]

SessionFactory: TypeAlias = sessionmaker[Session]
"""What a service holds to open its sessions (:func:`create_session_factory`'s)."""

DATABASE_UNAVAILABLE: tuple[type[Exception], ...] = (
    OperationalError,
    InterfaceError,
    PoolTimeoutError,
)
"""What SQLAlchemy raises when the database cannot be reached or dropped the connection
(refused, timed out, shut down, the pool exhausted): transient, unlike an integrity or
programming error. The pool pings a connection before handing it out
(``pool_pre_ping``), so once the database is back the next request works, without a
restart."""


DATABASE_ERROR: tuple[type[Exception], ...] = (SQLAlchemyError,)
"""Whatever the database layer raises: :data:`DATABASE_UNAVAILABLE` among the rest
(a programming error, a value the database refused)."""

CONSTRAINT_VIOLATED: tuple[type[Exception], ...] = (IntegrityError,)
"""What a write refused by a constraint raises (a unique key taken by a concurrent
writer, say): :func:`duplicate_row` tells which."""


def unavailable(exc: Exception) -> MetadataUnavailableError:
    """The domain's error for ``exc`` (one of :data:`DATABASE_UNAVAILABLE`): its type
    named, nothing of its text (which may hold a host or a query)."""
    return MetadataUnavailableError(
        f"the metadata database is unavailable ({type(exc).__name__}); retry later"
    )


def json_dumps(value: Any) -> str:
    """The text of a JSON column's value: orjson's; for keys that are not strings (a
    document's term ids), orjson's with them written as strings, as the standard library
    writes them; for what orjson refuses still (integers past 64 bits) the standard
    library's, as before.

    The indexer writes several JSON columns per document (tags, metadata, chunk ids,
    lexical terms) and reads as many back: with the standard library, encoding and
    decoding them was about a tenth of its time (docs/history/ingest-throughput.md,
    `177196d`). orjson writes a NaN or an infinity as ``null``, where the standard library
    writes ``NaN``, which is no JSON: the API refuses both in what it stores
    (:mod:`hsearch.ingestion.storable`)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        pass
    try:  # integer keys (a document's term ids), as strings, as the standard library does
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value)


_LONG_NUMBER = re.compile(r"[0-9]{20}")
_LONG_NUMBER_BYTES = re.compile(rb"[0-9]{20}")
"""Twenty digits in a row: possibly an integer past 64 bits, which orjson reads as a
float where the standard library keeps it exact."""


def json_loads(text: str | bytes) -> Any:
    """A JSON column's value: orjson's reading, or the standard library's for text orjson
    refuses (a ``NaN`` an earlier version wrote) or would read otherwise (an integer past
    64 bits an earlier version took)."""
    long = _LONG_NUMBER.search(text) if isinstance(text, str) else _LONG_NUMBER_BYTES.search(text)
    if long:
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def duplicate_row(exc: Exception, *, table: str, constraints: Collection[str]) -> bool:
    """Whether ``exc`` (one of :data:`CONSTRAINT_VIOLATED`) is a unique violation of
    ``table`` on one of ``constraints`` (their names, as Postgres reports them; SQLite
    names the table's columns instead)."""
    if not isinstance(exc, IntegrityError):
        return False
    orig = exc.orig
    name = getattr(getattr(orig, "diag", None), "constraint_name", None)
    if name is not None:
        return name in constraints
    return str(orig).startswith(f"UNIQUE constraint failed: {table}.")


def create_db_engine(url: str, *, pool_size: int = 5, echo: bool = False) -> Engine:
    """An engine for ``url``; SQLite gets WAL (synchronous NORMAL, checkpoints in a
    thread of their own: :mod:`hsearch.db.checkpoint`), foreign keys and a
    busy timeout so the API and worker processes can share the embedded file. JSON
    columns are written and read with :func:`json_dumps` and :func:`json_loads`."""
    codec: dict[str, Any] = {"json_serializer": json_dumps, "json_deserializer": json_loads}
    if url.startswith("sqlite"):
        engine = create_engine(url, echo=echo, connect_args={"timeout": 30}, **codec)
        path = sqlite_file(engine.url.database)
        checkpointer = WalCheckpointer(path, owner=engine) if path else None

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            # In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit
            # survives a killed process (kill -9 of an API or a worker), and only a
            # power loss or an OS crash can take back the last ones. Waiting for an
            # fsync at each commit was about 7 % of the indexing thread's time.
            cur.execute("PRAGMA synchronous=NORMAL")
            if checkpointer is not None:
                # Checkpoints run in a thread of their own, not in a commit; a commit
                # runs one only if that thread has fallen far behind.
                cur.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
                checkpointer.ensure_running()
            cur.close()

        if checkpointer is not None:
            event.listen(engine, "engine_disposed", lambda _engine: checkpointer.stop())
        return engine
    given = make_url(url).query
    connect_args = {k: v for k, v in POSTGRES_CONNECTION.items() if k not in given}
    return create_engine(
        url,
        echo=echo,
        pool_size=pool_size,
        pool_pre_ping=True,
        connect_args=connect_args,
        **codec,
    )


POSTGRES_CONNECTION: dict[str, int] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,
}
"""libpq's connection parameters for Postgres, unless the URL sets them: a server
that does not answer a connection attempt within 10 s is unreachable, and a server
whose host is lost (or cut off) is found within about a minute, by TCP keepalive on a
connection waiting for an answer (30 s, then 3 probes 10 s apart) and by the kernel's
timeout on data sent and never acknowledged (60 s). libpq sets none of them: a worker
waiting on such a server's answer waited until the kernel gave up (about 15 minutes
for data sent, over two hours for a connection waiting to read), alive and running
nothing else; now its transaction fails as the database's unavailability, and the
task is retried."""


def hold_write_lock(session: Session) -> None:
    """Make the rows this transaction reads next locked, as ``FOR UPDATE`` locks them on
    Postgres: on SQLite, which drops ``FOR UPDATE``, take the database's write lock now
    (``BEGIN IMMEDIATE``, waiting as long as the busy timeout for another writer).

    SQLite serialises writers, but from their first write on: the driver begins the
    transaction there, so two processes could both read a row (a job's turn, a
    document's version, a tenant's quota) before either wrote, and both act on what
    they read. Call it before a read whose rows the transaction goes on to change."""
    connection = session.connection()
    if connection.dialect.name != "sqlite":
        return
    if not connection.connection.dbapi_connection.in_transaction:  # type: ignore[union-attr]
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def ping_database(engine: Engine) -> None:
    """Return when the database answers; raise when it does not (readiness).

    A connection check, not a query on the data, so it lives with the engine rather
    than in a repository.
    """
    with engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def has_table(engine: Engine, name: str) -> bool:
    """Whether the database holds the table ``name`` (has it been migrated?): a look at
    the schema, not a query on the data."""
    return inspect(engine).has_table(name)


def shown_url(url: str) -> str:
    """A database URL as it may be shown: its password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def database_of(url: str) -> str | None:
    """A database URL's database part (an SQLite URL's file)."""
    return make_url(url).database


@contextmanager
def open_migrated_engine(url: str, *, pool_size: int = 5) -> Iterator[Engine]:
    """An engine on the metadata database at ``url``, disposed of on exit, for a command
    run on the server (``hsearch tenants``, ``hsearch links``).

    Raises ConfigurationError, creating nothing, when that database does not exist or
    was never migrated (a command run from another folder would otherwise make an empty
    ``./data`` there and fail deep inside).
    """
    shown = shown_url(url)
    hint = (
        "run `hsearch db upgrade` (or `hsearch run`) first, or point HSEARCH_DATA_DIR "
        "or HSEARCH_DATABASE__URL at the right one"
    )
    database = database_of(url)
    if url.startswith("sqlite") and database and not Path(database).exists():
        raise ConfigurationError(f"no hsearch database at {shown}: {hint}")
    engine = create_db_engine(url, pool_size=pool_size)
    try:
        if not has_table(engine, "alembic_version"):
            raise ConfigurationError(f"the database at {shown} has no hsearch schema: {hint}")
        yield engine
    finally:
        engine.dispose()


def create_session_factory(engine: Engine) -> SessionFactory:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(factory: SessionFactory) -> Iterator[Session]:
    """A session whose work is committed on success and rolled back on error: the
    unit of work of the service method (or task step) that opens it."""
    with factory() as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
