"""What only the Milvus store has: sealing growing segments (``flush``, which the
relevance benchmark calls after ingesting). Milvus Lite reports no segment states, so
this checks that a flush keeps every row and every search result."""

from __future__ import annotations

import uuid

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
