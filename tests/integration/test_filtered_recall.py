"""Each search leg returns what an exact search under the same filter ranks first, at
every filter selectivity, on sealed (indexed) and growing segments.

The chunks are synthetic (:mod:`bench.synthetic`: clustered unit vectors, random sparse
vectors, ``source`` values selecting 50 %, 5 %, 0.5 % and five chunks), written through
:meth:`MilvusVectorStore.upsert`; the exact answers are brute force in numpy over the
same vectors. A plain HNSW search (ef 128) under these filters, what the dense leg did
before, found 31 % of the exact top 100 at 5 %, 5 % at 0.5 % and 7 % of five chunks, and
missed most of the small tenant's chunks (docs/filtered-search.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from bench.synthetic import SOURCES, Corpus, recall
from pymilvus import MilvusClient

from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.vectorstore.filters import FilterNode, parse_filter
from hsearch.vectorstore.milvus import MilvusVectorStore, grpc_options

pytestmark = pytest.mark.integration

CHUNKS = 20_000
DIM = 64
LIMIT = 100  # the candidate depth of a default request
QUERIES = 30
SELECTIVITIES = [*SOURCES, None]  # None: no filter, the tenant alone
ENCODER = EncoderInfo(name="synthetic", dimension=DIM, version="1", sparse_kind=SparseKind.LEARNED)


def source_filter(source: str | None) -> FilterNode | None:
    return None if source is None else parse_filter({"source": {"eq": source}})


def write(uri: str, corpus: Corpus, *, batch: int = 2000) -> MilvusVectorStore:
    store = MilvusVectorStore(uri, collection=f"recall_{uuid.uuid4().hex[:8]}")
    store.ensure_collection(ENCODER)
    for start in range(0, len(corpus), batch):
        store.upsert(corpus.records(start, start + batch))
    return store


def seal_and_index(uri: str, store: MilvusVectorStore) -> None:
    """Flush, then reload: Milvus Lite builds a sealed segment's HNSW index in the
    background after a flush, and synchronously on load, so the searches below run on
    the graph, not on the brute-force stand-in of a segment still being indexed."""
    store.flush()
    client = MilvusClient(uri=uri, grpc_options=grpc_options())
    try:
        client.release_collection(store.collection)
        client.load_collection(store.collection)
    finally:
        client.close()


def dense_recalls(
    store: MilvusVectorStore, corpus: Corpus, *, tenant: str, source: str | None, queries: int
) -> list[float]:
    async def run() -> list[float]:
        out = []
        for query in corpus.dense_queries(queries):
            hits = await store.search_dense(
                query.tolist(),
                tenant_id=tenant,
                filter=source_filter(source),
                limit=LIMIT,
                timeout=30,
            )
            expected = corpus.exact_dense(query, source=source, limit=LIMIT)
            out.append(recall([h.chunk_id for h in hits], expected))
        await store.aclose()
        return out

    return asyncio.run(run())


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus.generate(CHUNKS, dim=DIM, tenant="big")


@pytest.fixture(scope="module")
def small(corpus: Corpus) -> Corpus:
    """50 chunks of a tenant in the large tenant's partition: Milvus Lite hashes a
    partition key value into one of 16 buckets with md5, and searches a bucket's
    segment with the tenant as a filter (keeping 50 of 20,050 chunks here)."""

    def bucket(tenant: str) -> int:
        return int(hashlib.md5(tenant.encode()).hexdigest(), 16) % 16

    tenant = next(t for t in (f"small{i}" for i in range(1000)) if bucket(t) == bucket("big"))
    return Corpus.generate(50, dim=DIM, tenant=tenant, seed=13)


@pytest.fixture(scope="module")
def sealed(milvus_uri: str, corpus: Corpus, small: Corpus) -> Iterator[MilvusVectorStore]:
    store = write(milvus_uri, corpus)
    store.upsert(small.records())
    seal_and_index(milvus_uri, store)
    yield store
    store.drop_collection()
    store.close()


@pytest.mark.parametrize("source", SELECTIVITIES)
def test_dense_leg_ranks_like_an_exact_search_on_sealed_segments(
    sealed: MilvusVectorStore, corpus: Corpus, source: str | None
) -> None:
    recalls = dense_recalls(sealed, corpus, tenant=corpus.tenant, source=source, queries=QUERIES)
    assert np.mean(recalls) >= 0.95, f"mean recall@{LIMIT} {np.mean(recalls):.3f}"
    assert min(recalls) >= 0.8, f"worst query's recall@{LIMIT} {min(recalls):.3f}"


@pytest.mark.parametrize("source", SELECTIVITIES)
def test_sparse_leg_is_exact(sealed: MilvusVectorStore, corpus: Corpus, source: str | None) -> None:
    async def run() -> list[tuple[list[str], list[str]]]:
        out = []
        for query in corpus.sparse_queries(QUERIES):
            hits = await sealed.search_sparse(
                query,
                tenant_id=corpus.tenant,
                filter=source_filter(source),
                limit=LIMIT,
                timeout=30,
            )
            out.append(
                ([h.chunk_id for h in hits], corpus.exact_sparse(query, source=source, limit=LIMIT))
            )
        await sealed.aclose()
        return out

    for found, expected in asyncio.run(run()):
        assert found == expected


def test_dense_leg_ranks_like_an_exact_search_on_growing_segments(milvus_uri: str) -> None:
    corpus = Corpus.generate(2000, dim=DIM, tenant="fresh", seed=11)
    store = write(milvus_uri, corpus)  # never flushed: every row is in a growing segment
    try:
        for source in SELECTIVITIES:
            recalls = dense_recalls(store, corpus, tenant=corpus.tenant, source=source, queries=5)
            assert min(recalls) == 1.0, (source, recalls)
    finally:
        store.drop_collection()
        store.close()


@pytest.mark.parametrize("source", [None, "p50"])
def test_a_small_tenant_sharing_a_partition_with_a_large_one_is_searched_exactly(
    sealed: MilvusVectorStore, small: Corpus, source: str | None
) -> None:
    recalls = dense_recalls(sealed, small, tenant=small.tenant, source=source, queries=10)
    assert min(recalls) == 1.0, recalls
