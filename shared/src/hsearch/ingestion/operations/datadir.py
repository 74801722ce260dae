"""One data directory, one metadata database.

The embedded profile keeps Milvus Lite's data in ``<data_dir>/milvus/``; the chunks
there belong to the metadata database that indexed them. Started again with another
database on the same directory (``HSEARCH_DATABASE__URL`` set on a directory first run
with SQLite), the store still held the first database's chunks: searches returned them
(ghost hits whose documents the API does not know), and nothing warned.

So the directory records the id of its database (``database_identity``, one row made
by migration 0012) in :data:`MARKER`, next to Milvus Lite's files: written on the first
start (also of a directory an earlier release made), compared on every start after it.
A start with another database is refused (:class:`DataDirectoryMismatchError`) in one
line naming both and the ways out: another data directory, or ``hsearch reconcile
--repair``, which deletes the chunks the database does not know and then records it as
the directory's (:func:`adopt_data_directory`).

A Milvus server of one's own (``HSEARCH_MILVUS__URI``) keeps its data elsewhere: no
marker is written or read for it (:func:`vector_data_in_data_dir`).
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from hsearch.config import Settings
from hsearch.db.engine import create_db_engine, create_session_factory, has_table, transaction
from hsearch.db.models import DatabaseIdentity
from hsearch.db.repositories.identity import IdentityRepository
from hsearch.errors import ConfigurationError, DataDirectoryMismatchError

__all__ = [
    "MARKER",
    "DataDirectoryOwner",
    "adopt_data_directory",
    "check_data_directory",
    "configured_owner",
    "milvus_data_dir",
    "recorded_owner",
    "redact_url",
    "vector_data_in_data_dir",
]

logger = logging.getLogger(__name__)

MARKER = "metadata-database.json"
"""In ``<data_dir>/milvus/``: whose vector data this is (deleted with that data)."""


@dataclass(frozen=True, slots=True)
class DataDirectoryOwner:
    """A metadata database as a data directory records it."""

    database_id: uuid.UUID
    database: str
    """Its URL, password hidden: what the refusal names."""


def milvus_data_dir(settings: Settings) -> Path:
    """Where the embedded profile's Milvus Lite server keeps its data."""
    return settings.data_dir.resolve() / "milvus"


def vector_data_in_data_dir(settings: Settings) -> bool:
    """Whether the vector data lives in the data directory (Milvus Lite, started by
    ``hsearch run`` or an operator command), not in a Milvus server of one's own."""
    return not settings.milvus.uri


def recorded_owner(settings: Settings) -> DataDirectoryOwner | None:
    """The database the data directory's vector data belongs to, if recorded."""
    path = milvus_data_dir(settings) / MARKER
    try:
        raw = json.loads(path.read_text("utf-8"))
        return DataDirectoryOwner(uuid.UUID(raw["database_id"]), str(raw.get("database", "")))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        msg = f"{path} is not a data directory marker ({exc}); delete it to record anew"
        raise DataDirectoryMismatchError(msg) from exc


def configured_owner(settings: Settings) -> DataDirectoryOwner:
    """The configured metadata database (migrated already), as a marker records it."""
    engine = create_db_engine(settings.database_url)
    try:
        if not has_table(engine, DatabaseIdentity.__tablename__):
            msg = (
                f"metadata database {redact_url(settings.database_url)} is not migrated: "
                "run `hsearch db upgrade` (or `hsearch run`) first"
            )
            raise ConfigurationError(msg)
        with transaction(create_session_factory(engine)) as session:
            database_id = IdentityRepository(session).database_id()
    finally:
        engine.dispose()
    return DataDirectoryOwner(database_id, redact_url(settings.database_url))


def check_data_directory(settings: Settings) -> DataDirectoryOwner | None:
    """Refuse to start on a data directory whose vector data another metadata database
    wrote; record the configured one if none is recorded yet. Returns the database (
    ``None`` when the vector data is not in the data directory).

    Raises:
        DataDirectoryMismatchError: The directory records another database.
    """
    if not vector_data_in_data_dir(settings):
        return None
    current = configured_owner(settings)
    recorded = recorded_owner(settings)
    if recorded is None:
        _write(settings, current)
        logger.info(
            "datadir.recorded database_id=%s database=%s", current.database_id, current.database
        )
        return current
    if recorded.database_id != current.database_id:
        data = settings.data_dir.resolve()
        msg = (
            f"data directory {data} holds the vector data of metadata database "
            f"{recorded.database or '?'} (id {recorded.database_id}), not of the configured "
            f"{current.database} (id {current.database_id}): set HSEARCH_DATA_DIR to a new "
            "data directory, or run `hsearch reconcile --repair` to adopt this one for the "
            "configured database (chunks it does not know are deleted)"
        )
        raise DataDirectoryMismatchError(msg)
    return current


def adopt_data_directory(settings: Settings) -> DataDirectoryOwner | None:
    """Record the configured database as the data directory's (``hsearch reconcile
    --repair``, once the chunks it does not know are gone); ``None`` when the vector
    data is not in the data directory."""
    if not vector_data_in_data_dir(settings):
        return None
    current = configured_owner(settings)
    recorded = recorded_owner(settings)
    _write(settings, current)
    if recorded is not None and recorded.database_id != current.database_id:
        logger.warning(
            "datadir.adopted database_id=%s database=%s previous_id=%s previous=%s",
            current.database_id,
            current.database,
            recorded.database_id,
            recorded.database,
        )
    return current


def redact_url(url: str) -> str:
    """``url`` with its credentials hidden."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return url


def _write(settings: Settings, owner: DataDirectoryOwner) -> None:
    directory = milvus_data_dir(settings)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / MARKER
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    body = {"database_id": str(owner.database_id), "database": owner.database}
    tmp.write_text(json.dumps(body) + "\n", "utf-8")
    tmp.replace(path)
