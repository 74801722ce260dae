"""Milvus adapter: the only module that imports pymilvus.

One collection holds each chunk's dense and sparse vectors; the tenant id is the
partition key. The encoder a collection was built with is stored in its properties
and checked on every open.

The dense leg returns what an exact search would rank first under any filter, which
HNSW alone does not: see :meth:`MilvusVectorStore.search_dense` and
docs/filtered-search.md.

The configured name (``HSEARCH_MILVUS__COLLECTION``) is an alias; the collections
behind it have versioned names (``<name>_v1``, ``<name>_v2``…). Every search and write
goes through the alias, so ``hsearch reindex`` builds the next version beside the live
one and then moves the alias in one step (``alter_alias``): searches answer from the old
collection until the new one is complete. A deployment from before aliases has a
collection under the plain name: it is used as it is, and the first reindex migrates it
(renamed to ``<name>_v0``, then dropped unless kept, and the alias created in its place:
the only swap that is two calls, so searches may miss it for milliseconds).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
import numpy as np
from pymilvus import AsyncMilvusClient, DataType, MilvusClient, MilvusException

from hsearch.embedding.protocol import EncoderInfo
from hsearch.errors import (
    CollectionSchemaError,
    EncoderMismatchError,
    VectorStoreError,
    VectorStoreTimeoutError,
)
from hsearch.types import DenseVector, SparseVector
from hsearch.vectorstore.filters import And, FieldRef, FilterNode, Membership, matches
from hsearch.vectorstore.milvus_filters import compile_filter, quote_string, tenant_expression
from hsearch.vectorstore.protocol import ChunkRecord, StoredHit, VectorStore, answered, best_of
from hsearch.vectorstore.schema import (
    CANDIDATE_FIELDS,
    DENSE_FIELD,
    METADATA_FIELD,
    OFFSET_FIELDS,
    PRIMARY_FIELD,
    SPARSE_FIELD,
    TENANT_FIELD,
    TEXT_FIELD,
    TEXT_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    UPDATABLE_FIELDS,
    USER_FIELDS,
    USER_FIELDS_BY_NAME,
    FieldType,
)

logger = logging.getLogger(__name__)


class _LostCreateRace(logging.Filter):
    """Drops pymilvus's record of a create another process won.

    pymilvus logs every failed RPC at ERROR, with a traceback. When API replicas and
    workers start together on an empty Milvus, all but one of their creates of the
    collection (or its alias) fail with "already exists": an expected race that
    :meth:`MilvusVectorStore.ensure_collection` retries and logs itself
    (``vectorstore.setup.retry``). Only that record is dropped; every other RPC error
    is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        lost = "already exists" in message and (
            "[create_collection]" in message or "[create_alias]" in message
        )
        return not lost


logging.getLogger("pymilvus.decorators").addFilter(_LostCreateRace())

BEST_CHUNKS_MAX_ROWS = 16_384
"""The most chunks :meth:`MilvusVectorStore.best_chunks` reads in one call (Milvus's
own cap on a query's rows); documents past it are left out."""


class _ClientTimestampNotice(logging.Filter):
    """Drops pymilvus' warning that a query iterator falls back to the client's
    timestamp. Milvus Lite returns no session timestamp for the iterator's first query,
    so every :meth:`MilvusVectorStore.tenant_chunk_ids` against it (``hsearch
    reconcile``) printed it; the fallback reads every chunk written before the call,
    which is what the callers want, so the warning tells an operator nothing to do."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "failed to get mvccTs" not in record.getMessage()


logging.getLogger("pymilvus.client.iterator.query_iterator").addFilter(_ClientTimestampNotice())

_T = TypeVar("_T")

ENCODER_PROPERTY = "hsearch.encoder"
SCHEMA_VERSION_PROPERTY = "hsearch.schema_version"
SCHEMA_VERSION = "2"
"""1: the first schema; 2: chunks carry their character offsets (``char_start``,
``char_end``). A collection of an older schema is refused, naming ``hsearch reindex``."""
# Outside every encoder's index space (term hashes < 2**31, token ids < 2**20).
EMPTY_SPARSE_INDEX = 2**32 - 2
COLLECTION_NOT_LOADED = 101
"""Milvus' error code for a request on a released collection (``ErrCollectionNotLoaded``)."""
RELOAD_PAUSE_S = 0.05
"""First pause before a leg tries again on a collection still released after a load."""
MAX_NAME_LENGTH = 255
"""Milvus' limit on collection and alias names."""
REINDEX_HINT = "rebuild it with the configured encoder: `hsearch reindex`"
SCHEMA_HINT = "rebuild it with this version: `hsearch reindex`"

# Filtered dense search (docs/filtered-search.md). The sample is the tenant's nearest
# SAMPLE_FACTOR x limit chunks: for a filter keeping half the chunks it holds 1.5 x limit
# matches on average, the limit 5.8 standard deviations below (limit 100).
SAMPLE_FACTOR = 3
# HNSW under a filter finds matches only among the nodes its ef-wide frontier passes:
# ef = EF_PER_MATCH x limit / (share of matches in the sample). Measured on Milvus Lite
# at 5 % selectivity (20,000 chunks, limit 100): ef 2,048 recall 0.95, this rule 0.99.
EF_PER_MATCH = 2

_SCALAR_TYPES: Mapping[FieldType, DataType] = {
    FieldType.STRING: DataType.VARCHAR,
    FieldType.INT: DataType.INT64,
    FieldType.FLOAT: DataType.DOUBLE,
    FieldType.BOOL: DataType.BOOL,
    FieldType.JSON: DataType.JSON,
}


def grpc_options(keepalive_s: float = 300.0) -> dict[str, int]:
    """The gRPC channel options of every connection to Milvus (docs/operations.md,
    "gRPC keepalive").

    A gRPC server keeps count of the pings it thinks too frequent and, after a few such
    strikes, closes the connection with GOAWAY ``too_many_pings``, failing any call in
    flight on it with UNAVAILABLE. Milvus Lite is a grpcio server with gRPC's default
    policy: at most one ping every 5 min while a call is open, and, on a connection
    with no call open, none for 2 h. pymilvus pings every 10 s, calls or not
    (``keepalive_permit_without_calls``): an idle connection was closed about every
    2 min, and a call in flight when that happened (or a call held open for minutes)
    failed "Too many pings". A longer period alone only postpones the close: on a
    connection without calls every ping is a strike. So:

    - ``keepalive_permit_without_calls`` 0: no pings on a connection without calls (an
      idle connection is never struck; a dead one is found by the next call, within
      its deadline, and reconnected);
    - ``keepalive_time_ms`` ``keepalive_s`` (``MilvusSettings.grpc_keepalive_s``),
      300 s by default: no more often than Milvus Lite accepts during a call.

    Both are valid against a Milvus cluster or standalone server too: its proxy
    accepts pings every 5 s with or without calls, and itself pings a connection idle
    for 60 s (which keeps it open through NATs and load balancers). pymilvus shares one
    connection per address and token, opened with the options of whoever connected
    first, so a process's other clients pass these too.

    Reconnecting after an outage waits at most 5 s between attempts (gRPC's default
    grows to 120 s), so a Milvus back after minutes is seen within seconds."""
    return {
        "grpc.keepalive_time_ms": int(keepalive_s * 1000),
        "grpc.keepalive_permit_without_calls": 0,
        "grpc.max_reconnect_backoff_ms": 5000,
    }


class MilvusVectorStore:
    """A :class:`~hsearch.vectorstore.protocol.VectorStore` on Milvus (Lite, standalone
    or cluster: only the URI differs)."""

    def __init__(
        self,
        uri: str,
        *,
        collection: str,
        token: str | None = None,
        hnsw_m: int = 16,
        hnsw_ef_construction: int = 256,
        hnsw_ef: int = 128,
        hnsw_max_ef: int = 16384,
        exact_search_max_rows: int = 1000,
        write_timeout: float = 30.0,
        leg_uris: Mapping[str, str] | None = None,
        pinned: bool = False,
        keepalive_s: float = 300.0,
    ) -> None:
        """``collection`` is the alias searches and writes go through; with ``pinned``,
        the name of one collection itself, never an alias (a collection being built by
        a reindex); ``keepalive_s``: how often gRPC pings an idle connection
        (``MilvusSettings.grpc_keepalive_s``)."""
        self._uri = uri
        self._token = token or ""
        self._collection = collection
        self._pinned = pinned
        self._hnsw_m = hnsw_m
        self._hnsw_ef_construction = hnsw_ef_construction
        self._hnsw_ef = hnsw_ef
        self._hnsw_max_ef = max(hnsw_max_ef, hnsw_ef)
        self._exact_max_rows = exact_search_max_rows
        self._write_timeout = write_timeout
        self._grpc_options = grpc_options(keepalive_s)
        self._write_schema: dict[str, Any] | None = None  # :meth:`_upsert_columns`
        try:
            self._client = MilvusClient(uri=uri, token=self._token, grpc_options=self._grpc_options)
        except MilvusException as exc:
            raise VectorStoreError(f"cannot connect to Milvus at {uri}: {exc}") from exc
        # Each search leg gets its own dedicated connection (optionally its own
        # endpoint), so a stuck leg cannot hold up the other on a shared channel.
        self._leg_uris = dict(leg_uris or {})
        self._async_clients: dict[str, AsyncMilvusClient] = {}
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._reload_lock: asyncio.Lock | None = None

    @property
    def collection(self) -> str:
        return self._collection

    # -- collection lifecycle -------------------------------------------------

    def ensure_collection(self, encoder: EncoderInfo) -> None:
        """Verify the collection behind the name (an alias, or a collection from before
        aliases) was built with ``encoder`` and load it; create the first version and
        the alias when there is nothing under the name yet.

        API replicas and workers start together on an empty Milvus: several processes
        may create the same collection at once. The loser sees an error from Milvus
        (the collection exists, or has no index yet, or is mid-load); it tries again,
        spaced out, until the write timeout, and then finds the winner's collection."""
        deadline = time.monotonic() + self._write_timeout
        delay = 0.05
        while True:
            try:
                self._ensure_once(encoder)
                return
            except MilvusException as exc:
                if time.monotonic() + delay > deadline:
                    raise VectorStoreError(f"Milvus collection set-up failed: {exc}") from exc
                logger.info("vectorstore.setup.retry collection=%s error=%s", self._collection, exc)
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _ensure_once(self, encoder: EncoderInfo) -> None:
        self._write_schema = None
        if not self._client.has_collection(self._collection):
            if self._pinned:
                self._create(self._collection, encoder)
            else:
                self._create_first_version(encoder)
        self._verify_encoder(encoder)
        self._verify_schema()
        state = self._client.get_load_state(self._collection)
        if "Loaded" not in str(state.get("state")):
            # A collection reopened from disk starts released; one another process
            # has just created may not be loaded yet.
            self._client.load_collection(self._collection)

    def _create_first_version(self, encoder: EncoderInfo) -> None:
        physical = self._version_name(1)
        if not self._client.has_collection(physical):
            self._create(physical, encoder)
        if self.live_collection() == physical:
            return  # another process (API and worker start together) made the alias
        try:
            self._client.create_alias(physical, self._collection)
        except MilvusException:
            # Another process (API and worker start together) created it first.
            if self.live_collection() != physical:
                raise
        logger.info("vectorstore.alias.created alias=%s collection=%s", self._collection, physical)

    def collection_encoder(self) -> str | None:
        """The encoder fingerprint recorded on the collection, if it exists."""
        if not self._client.has_collection(self._collection):
            return None
        props = self._client.describe_collection(self._collection).get("properties", {})
        value = props.get(ENCODER_PROPERTY)
        return str(value) if value is not None else None

    def live_collection(self) -> str | None:
        """The collection behind the name: the alias' target, the collection itself
        (pinned, or from before aliases), or ``None`` when nothing has that name."""
        if not self._client.has_collection(self._collection):
            return None
        return str(self._client.describe_collection(self._collection)["collection_name"])

    def _verify_encoder(self, encoder: EncoderInfo) -> None:
        recorded = self.collection_encoder()
        if recorded != encoder.fingerprint:
            msg = (
                f"collection {self._collection!r} was built with encoder {recorded!r}, "
                f"but the configured encoder is {encoder.fingerprint!r}; {REINDEX_HINT} "
                "(or point HSEARCH_MILVUS__COLLECTION at another collection)"
            )
            raise EncoderMismatchError(msg)

    def _verify_schema(self) -> None:
        """Refuse a collection whose fields are not the ones this version writes and
        reads: Milvus would reject every write and every search naming a missing field."""
        props = self._client.describe_collection(self._collection).get("properties", {})
        recorded = props.get(SCHEMA_VERSION_PROPERTY)
        if recorded is None or str(recorded) != SCHEMA_VERSION:
            msg = (
                f"collection {self._collection!r} has schema version {recorded!r}, but this "
                f"version of hsearch reads schema {SCHEMA_VERSION!r} (chunks carry their "
                f"character offsets); {SCHEMA_HINT}"
            )
            raise CollectionSchemaError(msg)

    def new_collection(self, encoder: EncoderInfo) -> MilvusVectorStore:
        """The next version (``<name>_v<n>``, one above every existing version), created
        empty for ``encoder`` and loaded; the alias is left where it is."""
        if self._pinned:
            msg = f"{self._collection!r} is a pinned collection, not an alias: nothing to rebuild"
            raise VectorStoreError(msg)
        try:
            pattern = re.compile(rf"{re.escape(self._collection)}_v(\d+)")
            versions = [
                int(m.group(1))
                for name in self._client.list_collections()
                if (m := pattern.fullmatch(str(name)))
            ]
            physical = self._version_name(max(versions, default=0) + 1)
            self._create(physical, encoder)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus collection set-up failed: {exc}") from exc
        return MilvusVectorStore(
            self._uri,
            collection=physical,
            token=self._token or None,
            hnsw_m=self._hnsw_m,
            hnsw_ef_construction=self._hnsw_ef_construction,
            hnsw_ef=self._hnsw_ef,
            write_timeout=self._write_timeout,
            pinned=True,
            keepalive_s=self._grpc_options["grpc.keepalive_time_ms"] / 1000,
        )

    def swap_in(self, built: VectorStore) -> str | None:
        """Point the alias at ``built``'s collection (``alter_alias``: one step); the
        previous collection stays (:meth:`drop_previous`). A collection from before
        aliases, under the plain name, is renamed ``<name>_v0`` first and the alias
        created in its place."""
        if not isinstance(built, MilvusVectorStore) or not built._pinned:
            msg = "swap_in takes a store made by new_collection()"
            raise VectorStoreError(msg)
        target = built.collection
        self._write_schema = None
        try:
            previous = self.live_collection()
            if previous is None:
                self._client.create_alias(target, self._collection)
            elif previous != self._collection:
                self._client.alter_alias(target, self._collection)
            else:
                previous = self._version_name(0)
                self._client.rename_collection(self._collection, previous)
                self._client.create_alias(target, self._collection)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus alias swap failed: {exc}") from exc
        logger.info(
            "vectorstore.alias.swapped alias=%s collection=%s previous=%s",
            self._collection,
            target,
            previous,
        )
        return previous

    def drop_previous(self, name: str) -> None:
        """Drop ``name``, a collection this store's alias no longer points at."""
        try:
            if self.live_collection() == name:
                msg = f"{name!r} is the live collection of {self._collection!r}"
                raise VectorStoreError(msg)
            if self._client.has_collection(name):
                self._client.drop_collection(name)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus drop failed: {exc}") from exc
        logger.info("vectorstore.collection.dropped collection=%s", name)

    def _version_name(self, version: int) -> str:
        name = f"{self._collection}_v{version}"
        if len(name) > MAX_NAME_LENGTH:
            msg = (
                f"collection name {self._collection!r} is too long to version: "
                f"{name!r} exceeds Milvus' {MAX_NAME_LENGTH} characters"
            )
            raise VectorStoreError(msg)
        return name

    def _create(self, name: str, encoder: EncoderInfo) -> None:
        schema = self._client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field(PRIMARY_FIELD, DataType.VARCHAR, is_primary=True, max_length=64)
        schema.add_field(TENANT_FIELD, DataType.VARCHAR, max_length=64, is_partition_key=True)
        schema.add_field("title", DataType.VARCHAR, max_length=TITLE_MAX_LENGTH * 4)
        schema.add_field(TEXT_FIELD, DataType.VARCHAR, max_length=TEXT_MAX_LENGTH)
        for offset in OFFSET_FIELDS:
            schema.add_field(offset, DataType.INT64)
        for spec in USER_FIELDS:
            if spec.type is FieldType.STRING_ARRAY:
                schema.add_field(
                    spec.name,
                    DataType.ARRAY,
                    element_type=DataType.VARCHAR,
                    max_capacity=spec.max_capacity,
                    max_length=spec.max_length,
                )
            elif spec.type is FieldType.STRING:
                schema.add_field(spec.name, DataType.VARCHAR, max_length=spec.max_length)
            else:
                schema.add_field(spec.name, _SCALAR_TYPES[spec.type])
        schema.add_field(DENSE_FIELD, DataType.FLOAT_VECTOR, dim=encoder.dimension)
        schema.add_field(SPARSE_FIELD, DataType.SPARSE_FLOAT_VECTOR)

        index_params = self._client.prepare_index_params()
        index_params.add_index(
            DENSE_FIELD,
            index_type="HNSW",
            metric_type="IP",
            params={"M": self._hnsw_m, "efConstruction": self._hnsw_ef_construction},
        )
        index_params.add_index(SPARSE_FIELD, index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        self._client.create_collection(
            name,
            schema=schema,
            index_params=index_params,
            properties={
                ENCODER_PROPERTY: encoder.fingerprint,
                SCHEMA_VERSION_PROPERTY: SCHEMA_VERSION,
            },
        )
        logger.info(
            "vectorstore.collection.created collection=%s encoder=%s", name, encoder.fingerprint
        )

    def drop_collection(self) -> None:
        """Drop the collection behind the name, and the alias with it."""
        self._write_schema = None
        physical = self.live_collection()
        if physical is None:
            return
        if physical != self._collection:
            self._client.drop_alias(self._collection)
        self._client.drop_collection(physical)

    # -- writes ----------------------------------------------------------------

    def upsert(self, records: Sequence[ChunkRecord]) -> None:
        if records:
            self._upsert_columns(records, wait=True)

    def send_upsert(self, records: Sequence[ChunkRecord]) -> Callable[[], None]:
        """:meth:`upsert` sent with pymilvus' asynchronous mutation (``_async``): the
        request is converted and sent before this returns, and the returned function
        waits for its answer. The indexer's next group is converted (Python, under the
        interpreter lock) while the server writes this one, instead of after it."""
        if not records:
            return answered
        future = self._upsert_columns(records, wait=False)

        def answer() -> None:
            try:
                future.result()
            except MilvusException as exc:
                self._write_schema = None
                raise VectorStoreError(f"Milvus upsert failed: {exc}") from exc

        return answer

    def _upsert_columns(self, records: Sequence[ChunkRecord], *, wait: bool) -> Any:
        """Upsert ``records`` as one column per field (:func:`_to_columns`); with
        ``wait``, return once the upsert is answered, else once it is sent, with
        pymilvus' future of its answer. A record of no tenant is refused.

        ``MilvusClient.upsert`` takes rows only and converts them to the request field
        by field, row by row; pymilvus' connection converts a whole column at once (the
        path of its ``Collection.upsert`` for column data): the same request, for a
        third of the client's CPU time per row (docs/history/ingest-throughput.md,
        `177196d`, "Upserts sent as columns"). That client work runs in the indexer's
        process beside its own, so it bounds the write path. ``_get_connection`` is the
        client's own handler (pymilvus is pinned; the contract suite runs this path
        against a Milvus Lite server). The collection's fields are read once, and again
        after a failed write (the alias may point at a rebuilt collection since)."""
        for tenant_id in {record.tenant_id for record in records}:
            tenant_expression(tenant_id)
        try:
            schema = self._write_schema
            if schema is None:
                schema = self._write_schema = self._client.describe_collection(self._collection)
            return self._client._get_connection().upsert(
                self._collection,
                _entities(schema, _to_columns(records)),
                timeout=self._write_timeout,
                schema=schema,
                context=self._client._generate_call_context(),
                _async=not wait,
            )
        except MilvusException as exc:
            self._write_schema = None
            raise VectorStoreError(f"Milvus upsert failed: {exc}") from exc

    def update_fields(
        self, *, tenant_id: str, chunk_ids: Sequence[str], fields: Mapping[str, Any]
    ) -> None:
        tenant_expression(tenant_id)  # refuses a call naming no tenant
        unknown = set(fields) - UPDATABLE_FIELDS
        if unknown:
            raise ValueError(f"not updatable in place: {sorted(unknown)}")
        values = {k: (list(v) if k == "tags" else v) for k, v in fields.items()}
        rows = [{PRIMARY_FIELD: cid, TENANT_FIELD: tenant_id, **values} for cid in chunk_ids]
        try:
            for start in range(0, len(rows), 1000):
                # A partial upsert: the fields not given (text, vectors) stay as stored.
                self._loaded_sync(
                    functools.partial(
                        self._client.upsert,
                        self._collection,
                        rows[start : start + 1000],
                        timeout=self._write_timeout,
                        partial_update=True,
                    )
                )
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus partial update failed: {exc}") from exc

    def delete_chunks(self, chunk_ids: Sequence[str], *, tenant_id: str) -> None:
        tenant_expression(tenant_id)  # refuses a call naming no tenant
        if not chunk_ids:
            return
        try:
            self._client.delete(self._collection, ids=list(chunk_ids), timeout=self._write_timeout)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus delete failed: {exc}") from exc

    def delete_document_chunks(
        self, *, tenant_id: str, document_id: str, keep: Sequence[str] = ()
    ) -> None:
        expr = f"{tenant_expression(tenant_id)} and document_id == {quote_string(document_id)}"
        if keep:
            expr += f" and {PRIMARY_FIELD} not in [{', '.join(quote_string(k) for k in keep)}]"
        try:
            self._loaded_sync(
                lambda: self._client.delete(
                    self._collection, filter=expr, timeout=self._write_timeout
                )
            )
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus delete failed: {exc}") from exc

    def delete_tenant(self, *, tenant_id: str) -> None:
        expr = f"{tenant_expression(tenant_id)}"
        try:
            self._loaded_sync(
                lambda: self._client.delete(
                    self._collection, filter=expr, timeout=self._write_timeout
                )
            )
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus delete failed: {exc}") from exc

    def flush(self) -> None:
        """Seal the collection's growing segments so that searches use the indexes.

        Milvus seals segments on its own by size or age; searching right after a bulk
        load otherwise scans unindexed growing segments: on Milvus Lite a sparse search
        over 1.1k chunks (ja-jsquad-valid) took 230 ms before the flush and 45 ms after
        it. Rankings barely change (growing segments are searched exhaustively). No
        timeout: sealing a large collection takes as long as it takes.
        """
        try:
            self._client.flush(self._collection)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus flush failed: {exc}") from exc

    # -- reads -----------------------------------------------------------------

    def count(self, *, tenant_id: str) -> int:
        try:
            res = self._loaded_sync(
                lambda: self._client.query(
                    self._collection,
                    filter=f"{tenant_expression(tenant_id)}",
                    output_fields=["count(*)"],
                )
            )
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus count failed: {exc}") from exc
        return int(res[0]["count(*)"]) if res else 0

    def chunk_ids(self, *, tenant_id: str, document_id: str) -> set[str]:
        expr = f"{tenant_expression(tenant_id)} and document_id == {quote_string(document_id)}"
        try:
            rows = self._loaded_sync(
                lambda: self._client.query(
                    self._collection, filter=expr, output_fields=[PRIMARY_FIELD]
                )
            )
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus query failed: {exc}") from exc
        return {str(r[PRIMARY_FIELD]) for r in rows}

    def tenant_chunk_ids(self, *, tenant_id: str) -> set[str]:
        out: set[str] = set()
        try:
            iterator = self._loaded_sync(
                lambda: self._client.query_iterator(
                    self._collection,
                    batch_size=1000,
                    filter=f"{tenant_expression(tenant_id)}",
                    output_fields=[PRIMARY_FIELD],
                )
            )
            try:
                while batch := iterator.next():
                    out.update(str(row[PRIMARY_FIELD]) for row in batch)
            finally:
                iterator.close()
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus query failed: {exc}") from exc
        return out

    def _loaded_sync(self, call: Callable[[], _T]) -> _T:
        """``call``, once more after loading a released collection: as :meth:`_loaded`,
        for the synchronous client (the worker's reads)."""
        try:
            return call()
        except MilvusException as exc:
            if exc.code != COLLECTION_NOT_LOADED:
                raise
            logger.warning("vectorstore.collection.reloading collection=%s", self._collection)
        self._client.load_collection(self._collection, timeout=self._write_timeout)
        return call()

    def ping(self) -> None:
        try:
            self._client.list_collections(timeout=2.0)
        except MilvusException as exc:
            raise VectorStoreError(f"Milvus is not reachable: {exc}") from exc

    async def search_dense(
        self,
        vector: Sequence[float],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]:
        """The ``limit`` chunks an exact search under the tenant and ``filter`` ranks
        first (docs/filtered-search.md).

        HNSW searched under a condition only finds the matching chunks its ef-wide
        frontier walks past: fine when most chunks match, a few percent of the
        matches when few do (Milvus Lite, ef 128: recall 0.27 at 5 % selectivity, 0.04
        at 0.5 %). So a filter costs one more request, a sample of the tenant's nearest
        chunks, which is either the answer (a broad filter) or tells how selective the
        filter is near the query: moderately, and HNSW runs with an ef that grows as
        the share of matches falls; very, and the matching chunks are scored exactly.
        Without a filter the search is HNSW alone, as fast as ever; only a result
        shorter than ``limit`` (a tenant smaller than the limit, which may share its
        partition with larger ones) is checked with an exact search.
        """
        query = np.asarray(vector, dtype=np.float32)
        deadline = time.monotonic() + timeout
        tenant = tenant_expression(tenant_id)
        if filter is None:
            hits = await self._dense_ann(query, expr=tenant, limit=limit, ef=0, deadline=deadline)
            if len(hits) >= limit:
                return hits
            exact = await self._dense_exact(query, expr=tenant, limit=limit, deadline=deadline)
            return hits if exact is None else exact

        size = SAMPLE_FACTOR * limit
        sample = await self._dense_ann(query, expr=tenant, limit=size, ef=0, deadline=deadline)
        kept = [hit for hit in sample if matches(filter, hit.fields)]
        expr = compile_filter(filter, tenant_id=tenant_id)
        # A short sample comes from a small tenant, perhaps searched under its own
        # condition in a shared partition: it proves nothing, and an exact search is cheap.
        if len(sample) == size:
            if len(kept) >= limit:  # a broad filter: the sample holds the answer
                return kept[:limit]
            if kept:  # selective near the query: widen the graph search to match
                ef = math.ceil(EF_PER_MATCH * limit * size / len(kept))
                if ef <= self._hnsw_max_ef:
                    return await self._dense_ann(
                        query, expr=expr, limit=limit, ef=ef, deadline=deadline
                    )
        # Very selective near the query: few matches in all, scored exactly, or many
        # elsewhere, and the widest graph search allowed.
        exact = await self._dense_exact(query, expr=expr, limit=limit, deadline=deadline)
        if exact is not None:
            return exact
        return await self._dense_ann(
            query, expr=expr, limit=limit, ef=self._hnsw_max_ef, deadline=deadline
        )

    async def _dense_ann(
        self, query: np.ndarray[Any, Any], *, expr: str, limit: int, ef: int, deadline: float
    ) -> list[StoredHit]:
        """HNSW under ``expr``; ``ef`` at least the configured one and ``limit``."""
        return await self._search(
            [query.tolist()],
            anns_field=DENSE_FIELD,
            params={"metric_type": "IP", "params": {"ef": max(self._hnsw_ef, limit, ef)}},
            expr=expr,
            limit=limit,
            timeout=_remaining(deadline, DENSE_FIELD),
        )

    async def _dense_exact(
        self, query: np.ndarray[Any, Any], *, expr: str, limit: int, deadline: float
    ) -> list[StoredHit] | None:
        """The exact top ``limit`` under ``expr`` when it matches at most
        ``exact_search_max_rows`` chunks (``None`` when it matches more): their vectors
        are fetched and scored here."""
        client = self._get_async_client(DENSE_FIELD)
        try:
            rows = await self._loaded(
                client,
                lambda: client.query(
                    self._collection,
                    filter=expr,
                    output_fields=[*CANDIDATE_FIELDS, DENSE_FIELD],
                    limit=self._exact_max_rows + 1,
                    timeout=_remaining(deadline, DENSE_FIELD),
                ),
                leg=DENSE_FIELD,
                deadline=deadline,
            )
        except _TRANSPORT_ERRORS as exc:
            raise _read_error(f"Milvus query on {DENSE_FIELD}", exc) from exc
        if len(rows) > self._exact_max_rows:
            return None
        if not rows:
            return []
        vectors = np.asarray([row[DENSE_FIELD] for row in rows], dtype=np.float32)
        scores = vectors @ query
        ids = [str(row[PRIMARY_FIELD]) for row in rows]
        # Best score first; equal scores in chunk id order, for a stable answer.
        order = sorted(range(len(rows)), key=lambda i: (-scores[i], ids[i]))[:limit]
        return [
            StoredHit(
                chunk_id=ids[i],
                score=float(scores[i]),
                fields=_from_entity({k: rows[i].get(k) for k in CANDIDATE_FIELDS}),
            )
            for i in order
        ]

    async def search_sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
    ) -> list[StoredHit]:
        return await self._sparse(
            vector, tenant_id=tenant_id, filter=filter, limit=limit, timeout=timeout
        )

    async def texts(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, str]:
        """One query by primary key; rows of another tenant are dropped here.

        The primary key alone, not ANDed with the tenant's condition: Milvus answers a
        bare primary-key list from its key index (2 ms for ten chunks among 50,000 on
        Milvus Lite) and scans every row under any other condition (60-150 ms)."""
        tenant_expression(tenant_id)  # refuses a call naming no tenant
        if not chunk_ids:
            return {}
        ids = ", ".join(quote_string(c) for c in dict.fromkeys(chunk_ids))
        client = self._get_async_client(TEXT_FIELD)
        deadline = time.monotonic() + timeout
        try:
            rows = await self._loaded(
                client,
                lambda: client.query(
                    self._collection,
                    filter=f"{PRIMARY_FIELD} in [{ids}]",
                    output_fields=[PRIMARY_FIELD, TENANT_FIELD, TEXT_FIELD],
                    timeout=_remaining(deadline, TEXT_FIELD),
                ),
                leg=TEXT_FIELD,
                deadline=deadline,
            )
        except _TRANSPORT_ERRORS as exc:
            raise _read_error("Milvus query of texts", exc, timeout=timeout) from exc
        return {
            str(row[PRIMARY_FIELD]): str(row[TEXT_FIELD])
            for row in rows
            if row.get(TENANT_FIELD) == tenant_id
        }

    async def chunk_fields(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, Mapping[str, Any]]:
        """One query by primary key, as :meth:`texts`; rows of another tenant are
        dropped here."""
        rows = await self._tenant_rows(
            chunk_ids, tenant_id=tenant_id, fields=CANDIDATE_FIELDS, timeout=timeout, what="fields"
        )
        return {
            str(row[PRIMARY_FIELD]): _from_entity({k: row.get(k) for k in CANDIDATE_FIELDS})
            for row in rows
        }

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        """One query by primary key, as :meth:`texts`; rows of another tenant are
        dropped here."""
        rows = await self._tenant_rows(
            chunk_ids, tenant_id=tenant_id, fields=(SPARSE_FIELD,), timeout=timeout, what="terms"
        )
        return {str(row[PRIMARY_FIELD]): _stored_terms(row.get(SPARSE_FIELD)) for row in rows}

    async def _tenant_rows(
        self,
        chunk_ids: Sequence[str],
        *,
        tenant_id: str,
        fields: Sequence[str],
        timeout: float,
        what: str,
    ) -> list[dict[str, Any]]:
        """The rows of ``chunk_ids`` with ``fields`` (and the primary key), one query by
        primary key; rows of another tenant are dropped here, and a call naming no
        tenant is refused."""
        tenant_expression(tenant_id)
        if not chunk_ids:
            return []
        ids = ", ".join(quote_string(c) for c in dict.fromkeys(chunk_ids))
        rows = await self._query(
            f"{PRIMARY_FIELD} in [{ids}]",
            output_fields=list(dict.fromkeys([PRIMARY_FIELD, *fields, TENANT_FIELD])),
            limit=None,
            timeout=timeout,
            what=what,
        )
        return [row for row in rows if row.get(TENANT_FIELD) == tenant_id]

    async def best_chunks(
        self,
        document_ids: Sequence[str],
        *,
        tenant_id: str,
        filter: FilterNode | None,
        vector: DenseVector | SparseVector | None,
        timeout: float,
    ) -> dict[str, StoredHit]:
        """One query of the documents' chunks under the filter (their vector too, when
        there is one to score them with), scored here: exact, whatever the filter."""
        if not document_ids:
            tenant_expression(tenant_id)
            return {}
        documents = Membership(
            FieldRef(USER_FIELDS_BY_NAME["document_id"]), tuple(dict.fromkeys(document_ids))
        )
        node: FilterNode = documents if filter is None else And((filter, documents))
        vector_field = (
            None
            if vector is None
            else SPARSE_FIELD
            if isinstance(vector, SparseVector)
            else DENSE_FIELD
        )
        rows = await self._query(
            compile_filter(node, tenant_id=tenant_id),
            output_fields=[*CANDIDATE_FIELDS, *([vector_field] if vector_field else [])],
            limit=BEST_CHUNKS_MAX_ROWS,
            timeout=timeout,
            what="chunks of documents",
        )
        by_document: dict[str, list[StoredHit]] = {}
        for row in rows:
            fields = _from_entity({k: row.get(k) for k in CANDIDATE_FIELDS})
            score = 0.0 if vector is None else _score(row.get(vector_field or ""), vector)
            hit = StoredHit(str(row[PRIMARY_FIELD]), score, fields)
            by_document.setdefault(str(fields["document_id"]), []).append(hit)
        sparse = isinstance(vector, SparseVector)
        return {
            document: best_of(hits, scored=vector is not None, sparse=sparse)
            for document, hits in by_document.items()
        }

    async def _query(
        self,
        expr: str,
        *,
        output_fields: Sequence[str],
        limit: int | None,
        timeout: float,
        what: str,
    ) -> list[dict[str, Any]]:
        """The rows ``expr`` selects (at most ``limit``), under ``timeout``."""
        client = self._get_async_client(TEXT_FIELD)
        deadline = time.monotonic() + timeout
        extra: dict[str, Any] = {} if limit is None else {"limit": limit}
        try:
            rows = await self._loaded(
                client,
                lambda: client.query(
                    self._collection,
                    filter=expr,
                    output_fields=list(output_fields),
                    timeout=_remaining(deadline, TEXT_FIELD),
                    **extra,
                ),
                leg=TEXT_FIELD,
                deadline=deadline,
            )
        except _TRANSPORT_ERRORS as exc:
            raise _read_error(f"Milvus query of {what}", exc, timeout=timeout) from exc
        return list(rows)

    async def match_sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        fields: Sequence[str],
        timeout: float,
    ) -> list[StoredHit]:
        # The sparse leg's search, deeper and without the text.
        return await self._sparse(
            vector,
            tenant_id=tenant_id,
            filter=filter,
            limit=limit,
            timeout=timeout,
            output_fields=(PRIMARY_FIELD, *fields),
        )

    async def _sparse(
        self,
        vector: SparseVector,
        *,
        tenant_id: str,
        filter: FilterNode | None,
        limit: int,
        timeout: float,
        output_fields: Sequence[str] = CANDIDATE_FIELDS,
    ) -> list[StoredHit]:
        if len(vector) == 0:
            return []  # no known term: an empty leg, not an error
        # The inverted index scores every chunk sharing a term with the query (a score
        # above 0), under the filter: exact at any selectivity
        # (tests/integration/test_filtered_recall.py).
        return await self._search(
            [vector.to_dict()],
            anns_field=SPARSE_FIELD,
            # Milvus Lite rejects a non-zero drop ratio on search.
            params={"metric_type": "IP", "params": {"drop_ratio_search": 0.0}},
            expr=compile_filter(filter, tenant_id=tenant_id),
            limit=limit,
            timeout=timeout,
            output_fields=output_fields,
        )

    async def _search(
        self,
        data: list[Any],
        *,
        anns_field: str,
        params: dict[str, Any],
        expr: str,
        limit: int,
        timeout: float,
        output_fields: Sequence[str] = CANDIDATE_FIELDS,
    ) -> list[StoredHit]:
        client = self._get_async_client(anns_field)
        deadline = time.monotonic() + timeout
        try:
            result = await self._loaded(
                client,
                lambda: client.search(
                    self._collection,
                    data=data,
                    anns_field=anns_field,
                    filter=expr,
                    limit=limit,
                    output_fields=list(output_fields),
                    search_params=params,
                    timeout=_remaining(deadline, anns_field),
                ),
                leg=anns_field,
                deadline=deadline,
            )
        except _TRANSPORT_ERRORS as exc:
            raise _read_error(f"Milvus search on {anns_field}", exc, timeout=timeout) from exc
        hits = result[0] if result else []
        out: list[StoredHit] = []
        for h in hits:
            fields = _from_entity(h.get("entity", {}))
            out.append(
                StoredHit(
                    chunk_id=str(fields[PRIMARY_FIELD]),
                    score=float(h["distance"]),
                    fields=fields,
                )
            )
        return out

    async def _loaded(
        self,
        client: AsyncMilvusClient,
        call: Callable[[], Awaitable[_T]],
        *,
        leg: str,
        deadline: float,
    ) -> _T:
        """``call``, again after loading the collection if Milvus answers that it is
        released: a Milvus server restarted under a running process (its connections
        come back on their own) reopens every collection released, and nothing else
        would load it again until this process restarts.

        Both legs meet the released collection at once: one load runs at a time (the
        other leg waits for it rather than racing it), and a leg that still finds the
        collection released just after a load tries again, briefly spaced, until its
        deadline."""
        try:
            return await call()
        except MilvusException as exc:
            if exc.code != COLLECTION_NOT_LOADED:
                raise
            logger.warning(
                "vectorstore.collection.reloading collection=%s leg=%s", self._collection, leg
            )
        pause = RELOAD_PAUSE_S
        while True:
            async with self._reload_guard():
                await client.load_collection(self._collection, timeout=_remaining(deadline, leg))
            try:
                return await call()
            except MilvusException as exc:
                if exc.code != COLLECTION_NOT_LOADED:
                    raise
                await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
                pause *= 2
                _remaining(deadline, leg)

    def _reload_guard(self) -> asyncio.Lock:
        # Bound to the event loop of the clients (reset with them).
        if self._reload_lock is None:
            self._reload_lock = asyncio.Lock()
        return self._reload_lock

    def _get_async_client(self, leg: str) -> AsyncMilvusClient:
        # An AsyncMilvusClient is bound to the event loop it was created on.
        loop = asyncio.get_running_loop()
        if self._async_loop is not loop:
            self._async_clients = {}
            self._reload_lock = None
            self._async_loop = loop
        client = self._async_clients.get(leg)
        if client is None:
            client = AsyncMilvusClient(
                uri=self._leg_uris.get(leg, self._uri),
                token=self._token,
                dedicated=True,
                grpc_options=self._grpc_options,
            )
            self._async_clients[leg] = client
        return client

    async def aclose(self) -> None:
        clients, self._async_clients = self._async_clients, {}
        for client in clients.values():
            await client.close()

    def close(self) -> None:
        self._client.close()


_TRANSPORT_ERRORS = (MilvusException, grpc.RpcError, OSError)
"""How a failed request surfaces from pymilvus and gRPC."""


def _read_error(what: str, exc: BaseException, *, timeout: float | None = None) -> VectorStoreError:
    """One error for a failed read, whatever type the failure surfaced as: its timeout
    subclass when the call's own deadline fired."""
    if missed_deadline(exc):
        deadline = "its deadline" if timeout is None else f"its {timeout:.3f}s deadline"
        return VectorStoreTimeoutError(f"{what} missed {deadline}: {exc}")
    return VectorStoreError(f"{what} failed: {exc}")


def missed_deadline(exc: BaseException) -> bool:
    """Whether a pymilvus failure means the call's ``timeout`` fired (not a broken backend).

    pymilvus reports its own deadline as a plain ``MilvusException`` ("Retry timeout"),
    raised while handling the ``TimeoutError`` of its ``asyncio.wait_for``; it then
    re-raises that exception ``from`` itself, so the ``TimeoutError`` survives only as
    the context. gRPC's own deadline is a ``DEADLINE_EXCEEDED`` status, raised as it is
    or folded into a ``MilvusException``. The whole cause/context chain is searched
    (it may loop back on itself). A refused or reset connection that pymilvus retried
    until the deadline carries no timeout in its chain and stays an error.
    """
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, TimeoutError):
            return True
        if isinstance(current, grpc.Call | grpc.aio.AioRpcError) and (
            current.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        ):
            return True
        if isinstance(current, MilvusException) and (
            current.code == grpc.StatusCode.DEADLINE_EXCEEDED
            or "DEADLINE_EXCEEDED" in str(current.message)
        ):
            return True
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return False


def _remaining(deadline: float, leg: str) -> float:
    """Seconds left for the next request of a leg that makes several."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise VectorStoreTimeoutError(f"Milvus search on {leg} ran out of time")
    return left


def _to_row(r: ChunkRecord) -> dict[str, Any]:
    """One record as a row (``MilvusClient``'s row API): its :func:`_to_columns`."""
    return {name: values[0] for name, values in _to_columns([r]).items()}


def _to_columns(records: Sequence[ChunkRecord]) -> dict[str, list[Any]]:
    """``records`` as the collection stores them, a list of values per field."""
    return {
        PRIMARY_FIELD: [r.chunk_id for r in records],
        TENANT_FIELD: [r.tenant_id for r in records],
        "document_id": [r.document_id for r in records],
        "external_id": [r.external_id for r in records],
        "title": [r.title for r in records],
        TEXT_FIELD: [r.text for r in records],
        "source": [r.source for r in records],
        "lang": [r.lang for r in records],
        "tags": [list(r.tags) for r in records],
        "created_at": [r.created_at for r in records],
        "ordinal": [r.ordinal for r in records],
        "char_start": [r.char_start for r in records],
        "char_end": [r.char_end for r in records],
        METADATA_FIELD: [dict(r.metadata) for r in records],
        DENSE_FIELD: [r.dense for r in records],
        # Milvus refuses an all-zero sparse vector; a chunk with no terms (punctuation
        # only) gets a placeholder dimension no query ever holds, so it never matches.
        SPARSE_FIELD: [r.sparse.to_dict() or {EMPTY_SPARSE_INDEX: 1.0} for r in records],
    }


def _entities(schema: Mapping[str, Any], columns: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """``columns`` (:func:`_to_columns`) as pymilvus' connection takes column data, one
    entry per field of ``schema`` (``describe_collection``'s)."""
    return [
        {"name": f["name"], "type": f["type"], "values": columns[f["name"]]}
        for f in schema["fields"]
    ]


def _score(stored: Any, vector: DenseVector | SparseVector) -> float:
    """The inner product of a stored vector (as a query returns it) with ``vector``."""
    if isinstance(vector, SparseVector):
        if not isinstance(stored, Mapping):
            return 0.0
        query = vector.to_dict()
        return float(sum(query.get(int(i), 0.0) * float(v) for i, v in stored.items()))
    return float(np.dot(np.asarray(stored, dtype=np.float32), np.asarray(vector, np.float32)))


def _stored_terms(stored: Any) -> frozenset[int]:
    """The terms of a stored sparse vector as a query returns it (index -> weight)."""
    if not isinstance(stored, Mapping):
        return frozenset()
    return frozenset(int(i) for i, v in stored.items() if float(v) > 0.0)


def _from_entity(entity: Mapping[str, Any]) -> dict[str, Any]:
    fields = dict(entity)
    meta = fields.get(METADATA_FIELD)
    if isinstance(meta, str | bytes):  # some pymilvus versions hand JSON back as text
        fields[METADATA_FIELD] = json.loads(meta)
    if "tags" in fields and fields["tags"] is not None:
        fields["tags"] = list(fields["tags"])
    return fields
