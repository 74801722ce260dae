"""What only the Milvus store has: sealing growing segments (``flush``, which the
relevance benchmark calls after ingesting). Milvus Lite reports no segment states, so
this checks that a flush keeps every row and every search result."""

from __future__ import annotations

import multiprocessing
import uuid
from typing import Any

import pytest

from hsearch.vectorstore.milvus import MilvusVectorStore
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
