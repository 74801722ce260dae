"""What only the Milvus store has: sealing growing segments (``flush``, which the
relevance benchmark calls after ingesting; Milvus Lite reports no segment states, so
this checks that a flush keeps every row and every search result), start-up races, and
writes sent as columns."""

from __future__ import annotations

import multiprocessing
import uuid
from typing import Any

import pytest

from hsearch.errors import VectorStoreError
from hsearch.vectorstore.milvus import MilvusVectorStore, _to_row
from tests.integration.test_vectorstore_contract import ENCODER, ROWS, unit

pytestmark = pytest.mark.integration


async def test_flush_seals_the_rows_without_changing_what_a_search_finds(
    milvus_uri: str,
) -> None:
    store = MilvusVectorStore(milvus_uri, collection=f"flush_{uuid.uuid4().hex[:8]}")
    try:
        store.ensure_collection(ENCODER)
        store.upsert(ROWS)
        before = await store.search_dense(
            unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=5
        )
        store.flush()
        after = await store.search_dense(
            unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=5
        )
        assert [h.chunk_id for h in after] == [h.chunk_id for h in before] == ["c1", "c2", "c3"]
        assert store.count(tenant_id="a") == 3
        store.flush()  # nothing left to seal: a no-op, not an error
    finally:
        store.drop_collection()
        await store.aclose()
        store.close()


def _start_up(uri: str, collection: str, barrier: Any, results: Any) -> None:
    """One process' start-up: what an API replica or a worker does on an empty Milvus."""
    store = MilvusVectorStore(uri, collection=collection)
    barrier.wait()
    try:
        store.ensure_collection(ENCODER)
        results.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(f"{type(exc).__name__}: {exc}")
    finally:
        store.close()


async def test_processes_starting_together_on_an_empty_milvus_all_start(
    milvus_uri: str,
) -> None:
    """API replicas and workers start at once: they race to create the first version
    of the collection and its alias, and every one of them must come up on it."""
    collection = f"race_{uuid.uuid4().hex[:8]}"
    context = multiprocessing.get_context("spawn")
    processes = 4
    barrier = context.Barrier(processes)
    results = context.Queue()
    children = [
        context.Process(target=_start_up, args=(milvus_uri, collection, barrier, results))
        for _ in range(processes)
    ]
    for child in children:
        child.start()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=30)
    assert outcomes == ["ok"] * processes
    store = MilvusVectorStore(milvus_uri, collection=collection)
    try:
        assert store.live_collection() == f"{collection}_v1"
        store.upsert(ROWS)
        hits = await store.search_dense(
            unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=5
        )
        assert [h.chunk_id for h in hits] == ["c1", "c2", "c3"]
    finally:
        store.drop_collection()
        await store.aclose()
        store.close()


def test_records_are_stored_as_the_row_api_stores_them(milvus_uri: str) -> None:
    """The store writes columns (``_upsert_columns``); pymilvus' own row API given the
    same records (``_to_row``) stores the very same values, field by field."""
    columns = MilvusVectorStore(milvus_uri, collection=f"cols_{uuid.uuid4().hex[:8]}")
    rows = MilvusVectorStore(milvus_uri, collection=f"rows_{uuid.uuid4().hex[:8]}")
    try:
        for store in (columns, rows):
            store.ensure_collection(ENCODER)
        columns.upsert(ROWS)
        rows._client.upsert(rows.collection, [_to_row(r) for r in ROWS])
        stored = [
            sorted(
                s._client.query(s.collection, filter='chunk_id != ""', output_fields=["*"]),
                key=lambda row: str(row["chunk_id"]),
            )
            for s in (columns, rows)
        ]
        assert len(stored[0]) == len(ROWS)
        assert stored[0] == stored[1]
        # And they are the records' values (the dense vector as float32 stores it).
        first = stored[0][0]
        assert (first["chunk_id"], first["tags"], first["metadata"]) == ("c1", ["x"], {"n": 2})
        assert first["sparse"] == pytest.approx({1: 1.0, 2: 0.5})
        assert first["dense"] == pytest.approx(list(ROWS[0].dense))
    finally:
        for store in (columns, rows):
            store.drop_collection()
            store.close()


def test_a_failed_write_reads_the_collections_fields_again(milvus_uri: str) -> None:
    """The fields the store writes are read once; a write that fails (here, fields
    read from another collection than the one now behind the name) drops them, so
    the next write reads them again and succeeds."""
    store = MilvusVectorStore(milvus_uri, collection=f"fields_{uuid.uuid4().hex[:8]}")
    try:
        store.ensure_collection(ENCODER)
        store.upsert(ROWS[:1])
        assert store._write_schema is not None
        stale = dict(store._write_schema)
        stale["fields"] = [f for f in stale["fields"] if f["name"] != "title"]
        store._write_schema = stale
        with pytest.raises(VectorStoreError, match="upsert failed"):
            store.upsert(ROWS[1:2])
        store.upsert(ROWS[1:2])
        assert store.count(tenant_id="a") == 2
    finally:
        store.drop_collection()
        store.close()
