"""Our RRF over the two parallel legs orders results exactly like Milvus' own
``hybrid_search`` with ``RRFRanker(k)`` on the same collection and inputs."""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Iterator
from itertools import groupby

import pytest
from pymilvus import AnnSearchRequest, MilvusClient, RRFRanker

from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.search.fusion import LegHit, reciprocal_rank_fusion
from hsearch.types import SparseVector
from hsearch.vectorstore.milvus import MilvusVectorStore, grpc_options
from hsearch.vectorstore.protocol import ChunkRecord
from hsearch.vectorstore.schema import DENSE_FIELD, SPARSE_FIELD

pytestmark = pytest.mark.integration

DIM = 16
TENANT = "fusion"


def unit_vector(rng: random.Random) -> tuple[float, ...]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    n = math.sqrt(sum(x * x for x in v))
    return tuple(x / n for x in v)


def sparse_vector(rng: random.Random) -> SparseVector:
    return SparseVector.from_mapping({rng.randrange(40): rng.uniform(0.1, 3) for _ in range(5)})


@pytest.fixture(scope="module")
def collection(milvus_uri: str) -> Iterator[tuple[MilvusVectorStore, str]]:
    rng = random.Random(7)
    name = f"fusion_{uuid.uuid4().hex[:8]}"
    store = MilvusVectorStore(milvus_uri, collection=name)
    store.ensure_collection(
        EncoderInfo(name="rand", dimension=DIM, version="1", sparse_kind=SparseKind.LEARNED)
    )
    store.upsert(
        [
            ChunkRecord(
                chunk_id=f"c{i:03d}",
                document_id=f"d{i}",
                tenant_id=TENANT,
                external_id=f"d{i}",
                title="",
                text=f"chunk {i}",
                ordinal=0,
                dense=unit_vector(rng),
                sparse=sparse_vector(rng),
            )
            for i in range(200)
        ]
    )
    yield store, name
    store.drop_collection()
    store.close()


@pytest.mark.parametrize("k", [1, 10, 60])
@pytest.mark.parametrize("seed", range(5))
async def test_our_rrf_equals_milvus_rrf_ranker(
    collection: tuple[MilvusVectorStore, str], milvus_uri: str, k: int, seed: int
) -> None:
    store, name = collection
    rng = random.Random(1000 + seed)
    dense, sparse, limit = unit_vector(rng), sparse_vector(rng), 30
    expr = f'tenant_id == "{TENANT}"'

    dense_hits = await store.search_dense(
        dense, tenant_id=TENANT, filter=None, limit=limit, timeout=10
    )
    sparse_hits = await store.search_sparse(
        sparse, tenant_id=TENANT, filter=None, limit=limit, timeout=10
    )
    ours = reciprocal_rank_fusion(
        {
            "dense": [LegHit(h.chunk_id, h.score) for h in dense_hits],
            "sparse": [LegHit(h.chunk_id, h.score) for h in sparse_hits],
        },
        weights={"dense": 1.0, "sparse": 1.0},
        k=k,
    )

    client = MilvusClient(milvus_uri, grpc_options=grpc_options())
    try:
        theirs = client.hybrid_search(
            name,
            [
                AnnSearchRequest(
                    [list(dense)],
                    DENSE_FIELD,
                    {"metric_type": "IP", "params": {"ef": 128}},
                    limit,
                    expr=expr,
                ),
                AnnSearchRequest(
                    [sparse.to_dict()],
                    SPARSE_FIELD,
                    {"metric_type": "IP", "params": {"drop_ratio_search": 0.0}},
                    limit,
                    expr=expr,
                ),
            ],
            RRFRanker(k),
            limit=len(ours),
            output_fields=["chunk_id"],
        )[0]
    finally:
        client.close()

    milvus = [(str(h["entity"]["chunk_id"]), float(h["distance"])) for h in theirs]
    mine = [(h.id, h.score * 2) for h in ours]  # our weights are normalised to sum 1
    assert len(mine) == len(milvus)
    for (a_id, a), (b_id, b) in zip(mine, milvus, strict=True):
        assert a == pytest.approx(b, rel=1e-5), (a_id, b_id)

    # Same order; within a tie (equal fused score) the order is arbitrary in Milvus.
    def groups(rows: list[tuple[str, float]]) -> list[set[str]]:
        return [{i for i, _ in g} for _, g in groupby(rows, key=lambda r: round(r[1], 6))]

    assert groups(mine) == groups(milvus)
