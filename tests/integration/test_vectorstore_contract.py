"""One contract, two stores: the in-memory fake must behave like Milvus."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterator
from dataclasses import replace

import pytest

from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.errors import (
    CollectionSchemaError,
    EncoderMismatchError,
    HsearchError,
    InvalidFilterError,
)
from hsearch.types import SparseVector
from hsearch.vectorstore.filters import parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.milvus import SCHEMA_VERSION_PROPERTY, MilvusVectorStore
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore
from hsearch.vectorstore.schema import CANDIDATE_FIELDS

ENCODER = EncoderInfo(name="contract", dimension=4, version="1", sparse_kind=SparseKind.LEARNED)


def unit(*xs: float) -> tuple[float, ...]:
    n = math.sqrt(sum(x * x for x in xs))
    return tuple(x / n for x in xs)


def record(
    cid: str,
    *,
    tenant: str = "a",
    doc: str = "d1",
    dense: tuple[float, ...],
    sparse: dict[int, float],
    source: str = "wiki",
    tags: tuple[str, ...] = (),
) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=cid,
        document_id=doc,
        tenant_id=tenant,
        external_id=doc,
        title=cid,
        text=f"text of {cid}",
        ordinal=0,
        dense=dense,
        sparse=SparseVector.from_mapping(sparse),
        char_start=10 * len(cid),
        char_end=10 * len(cid) + len(f"text of {cid}"),
        source=source,
        tags=tags,
        metadata={"n": len(cid)},
    )


ROWS = [
    record("c1", dense=unit(1, 0, 0, 0), sparse={1: 1.0, 2: 0.5}, tags=("x",)),
    record("c2", dense=unit(1, 1, 0, 0), sparse={2: 2.0}, source="blog"),
    record("c3", doc="d2", dense=unit(0, 1, 0, 0), sparse={3: 1.0}),
    record("c4", tenant="b", doc="d1", dense=unit(1, 0, 0, 0), sparse={1: 5.0}),
]


@pytest.fixture(params=["in_memory", pytest.param("milvus", marks=pytest.mark.integration)])
def store(request: pytest.FixtureRequest) -> Iterator[VectorStore]:
    if request.param == "in_memory":
        s: VectorStore = InMemoryVectorStore()
    else:
        uri = request.getfixturevalue("milvus_uri")
        s = MilvusVectorStore(uri, collection=f"contract_{uuid.uuid4().hex[:8]}")
    s.ensure_collection(ENCODER)
    s.upsert(ROWS)
    yield s
    if isinstance(s, MilvusVectorStore):
        s.drop_collection()
    s.close()


def test_encoder_is_checked(store: VectorStore) -> None:
    store.ensure_collection(ENCODER)  # same encoder: fine
    other = EncoderInfo(name="other", dimension=4, version="1", sparse_kind=SparseKind.LEARNED)
    with pytest.raises(EncoderMismatchError, match="other"):
        store.ensure_collection(other)


@pytest.mark.integration
def test_a_collection_of_an_older_schema_is_refused(milvus_uri: str) -> None:
    store = MilvusVectorStore(milvus_uri, collection=f"schema_{uuid.uuid4().hex[:8]}")
    try:
        store.ensure_collection(ENCODER)
        live = store.live_collection()
        assert live is not None
        # As a collection made before chunks had offsets records itself.
        store._client.alter_collection_properties(live, {SCHEMA_VERSION_PROPERTY: "1"})
        with pytest.raises(CollectionSchemaError, match="hsearch reindex"):
            store.ensure_collection(ENCODER)
    finally:
        store.drop_collection()
        store.close()


async def test_hits_carry_the_chunks_offsets(store: VectorStore) -> None:
    offsets = {r.chunk_id: (r.char_start, r.char_end) for r in ROWS}
    dense = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=10
    )
    sparse = await store.search_sparse(
        SparseVector.from_mapping({2: 1.0}), tenant_id="a", filter=None, limit=10, timeout=10
    )
    assert dense
    assert sparse
    for hit in [*dense, *sparse]:
        assert (hit.fields["char_start"], hit.fields["char_end"]) == offsets[hit.chunk_id]


async def test_candidates_come_without_their_text_which_is_read_by_id(
    store: VectorStore,
) -> None:
    dense = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=10
    )
    sparse = await store.search_sparse(
        SparseVector.from_mapping({2: 1.0}), tenant_id="a", filter=None, limit=10, timeout=10
    )
    for hit in [*dense, *sparse]:
        assert set(hit.fields) == set(CANDIDATE_FIELDS), "every field but the text"
    texts = await store.texts(["c2", "c1", "c4", "gone"], tenant_id="a", timeout=10)
    # c4 is tenant b's, "gone" was never stored: both left out.
    assert texts == {"c1": "text of c1", "c2": "text of c2"}
    assert await store.texts([], tenant_id="a", timeout=10) == {}
    assert await store.texts(["c4"], tenant_id="b", timeout=10) == {"c4": "text of c4"}
    store.delete_chunks(["c1"], tenant_id="a")
    assert await store.texts(["c1", "c2"], tenant_id="a", timeout=10) == {"c2": "text of c2"}


async def test_fields_are_read_by_id_within_the_tenant(store: VectorStore) -> None:
    fields = await store.chunk_fields(["c2", "c1", "c4", "gone"], tenant_id="a", timeout=10)
    # c4 is tenant b's, "gone" was never stored: both left out.
    assert set(fields) == {"c1", "c2"}
    assert set(fields["c1"]) == set(CANDIDATE_FIELDS), "every field but the text"
    assert fields["c2"]["source"] == "blog"
    assert fields["c1"]["tags"] == ["x"]
    assert fields["c1"]["metadata"] == {"n": 2}
    assert await store.chunk_fields([], tenant_id="a", timeout=10) == {}
    assert set(await store.chunk_fields(["c4"], tenant_id="b", timeout=10)) == {"c4"}


async def test_terms_are_read_by_id_within_the_tenant(store: VectorStore) -> None:
    store.upsert([record("c9", dense=unit(1, 1, 0, 0), sparse={3: 0.5, 7: 0.0, 11: 2.0})])
    terms = await store.sparse_terms(["c9", "c4", "gone"], tenant_id="a", timeout=10)
    # c4 is tenant b's, "gone" was never stored: both left out; a weight of 0 holds nothing.
    assert terms == {"c9": frozenset({3, 11})}
    assert await store.sparse_terms([], tenant_id="a", timeout=10) == {}
    assert set(await store.sparse_terms(["c4"], tenant_id="b", timeout=10)) == {"c4"}
    with pytest.raises(HsearchError):
        await store.sparse_terms(["c9"], tenant_id="", timeout=10)


async def test_a_documents_best_chunk_scores_best_under_the_filter(store: VectorStore) -> None:
    store.upsert(
        [
            replace(record("c5", doc="d3", dense=unit(0, 0, 1, 0), sparse={4: 1.0}), ordinal=0),
            replace(
                record("c6", doc="d3", dense=unit(1, 0, 0, 0), sparse={1: 2.0}, source="blog"),
                ordinal=1,
            ),
        ]
    )

    async def best(
        documents: list[str],
        vector: tuple[float, ...] | SparseVector | None,
        *,
        tenant: str = "a",
        filter: object = None,
    ) -> dict[str, tuple[str, float]]:
        found = await store.best_chunks(
            documents, tenant_id=tenant, filter=parse_filter(filter), vector=vector, timeout=10
        )
        for hit in found.values():
            assert set(hit.fields) == set(CANDIDATE_FIELDS)
        return {d: (h.chunk_id, round(h.score, 4)) for d, h in found.items()}

    # Dense: the chunk nearest the vector; a document not stored is left out.
    assert await best(["d3", "d2", "d9"], unit(1, 0, 0, 0)) == {
        "d3": ("c6", 1.0),
        "d2": ("c3", 0.0),
    }
    # Sparse: the chunk sharing the most weight; none sharing a term: the first, score 0.
    assert await best(["d3"], SparseVector.from_mapping({4: 1.0})) == {"d3": ("c5", 1.0)}
    assert await best(["d3"], SparseVector.from_mapping({9: 1.0})) == {"d3": ("c5", 0.0)}
    # No vector: the first chunk.
    assert await best(["d3"], None) == {"d3": ("c5", 0.0)}
    # Under a filter: only chunks that pass it, and documents with none are left out.
    blog = {"source": {"eq": "blog"}}
    assert await best(["d3", "d2"], unit(0, 0, 1, 0), filter=blog) == {"d3": ("c6", 0.0)}
    # Per tenant: d1 of tenant b is c4 alone.
    assert await best(["d1"], unit(0, 1, 0, 0), tenant="b") == {"d1": ("c4", 0.0)}
    assert (await best(["d1"], unit(0, 1, 0, 0)))["d1"][0] == "c2"
    assert await best([], None) == {}
    with pytest.raises(HsearchError):  # fail closed: no call for every tenant
        await store.best_chunks(["d1"], tenant_id="", filter=None, vector=None, timeout=10)


def test_counts_are_per_tenant_and_upsert_is_idempotent(store: VectorStore) -> None:
    assert store.count(tenant_id="a") == 3
    assert store.count(tenant_id="b") == 1
    store.upsert(ROWS)
    assert store.count(tenant_id="a") == 3


def test_writes_sent_before_the_answers_are_all_applied(store: VectorStore) -> None:
    # The indexer sends a group's upsert and the next before it waits for the first
    # answer: both are applied once answered; a record of no tenant is refused.
    first = store.send_upsert([record("s1", doc="d3", dense=unit(0, 0, 1, 0), sparse={7: 1.0})])
    second = store.send_upsert([record("s2", doc="d4", dense=unit(0, 0, 0, 1), sparse={8: 1.0})])
    second()
    first()
    assert store.count(tenant_id="a") == 5
    assert {"s1", "s2"} <= store.tenant_chunk_ids(tenant_id="a")
    with pytest.raises(HsearchError, match="tenant"):
        store.send_upsert([record("bad", tenant="", dense=unit(1, 0, 0, 0), sparse={1: 1.0})])()
    store.send_upsert([])()
    assert store.count(tenant_id="a") == 5


def test_every_chunk_of_a_tenant_is_listed(
    store: VectorStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        listed = store.tenant_chunk_ids(tenant_id="a")
    assert listed == {r.chunk_id for r in ROWS if r.tenant_id == "a"}
    # Nothing for an operator to act on (pymilvus' notice of Milvus Lite's missing
    # iterator timestamp is dropped: hsearch reconcile printed it every time).
    assert [r.getMessage() for r in caplog.records] == []
    assert store.tenant_chunk_ids(tenant_id="b") == {r.chunk_id for r in ROWS if r.tenant_id == "b"}
    assert store.tenant_chunk_ids(tenant_id="nobody") == set()


async def test_fields_change_in_place_and_vectors_stay(store: VectorStore) -> None:
    fields = {"source": "gazette", "tags": ["new"], "metadata": {"k": "v"}}
    store.update_fields(tenant_id="a", chunk_ids=["c1", "c2"], fields=fields)
    tagged = parse_filter({"tags": {"contains": "new"}})
    hits = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=tagged, limit=10, timeout=10
    )
    assert [h.chunk_id for h in hits] == ["c1", "c2"]  # the same vectors rank them
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert {h.fields["source"] for h in hits} == {"gazette"}
    assert hits[0].fields["metadata"] == {"k": "v"}
    assert hits[0].fields["title"] == "c1", "what was not given stays"
    with pytest.raises(ValueError, match="title"):
        store.update_fields(tenant_id="a", chunk_ids=["c1"], fields={"title": "x"})


def test_delete_by_primary_key(store: VectorStore) -> None:
    store.delete_chunks(["c1", "c3", "missing"], tenant_id="a")
    assert store.chunk_ids(tenant_id="a", document_id="d1") == {"c2"}
    assert store.chunk_ids(tenant_id="a", document_id="d2") == set()
    store.delete_chunks([], tenant_id="a")
    assert store.count(tenant_id="a") == 1


def test_delete_a_tenant_leaves_the_others(store: VectorStore) -> None:
    store.upsert(ROWS)
    store.delete_tenant(tenant_id="a")
    assert store.count(tenant_id="a") == 0
    assert store.tenant_chunk_ids(tenant_id="a") == set()
    assert store.tenant_chunk_ids(tenant_id="b") == {"c4"}


def test_delete_keeps_the_named_chunks(store: VectorStore) -> None:
    store.delete_document_chunks(tenant_id="a", document_id="d1", keep=["c2"])
    assert store.chunk_ids(tenant_id="a", document_id="d1") == {"c2"}
    assert store.chunk_ids(tenant_id="b", document_id="d1") == {"c4"}, "other tenant untouched"
    store.delete_document_chunks(tenant_id="a", document_id="d1")
    assert store.chunk_ids(tenant_id="a", document_id="d1") == set()


async def test_dense_search_ranks_by_inner_product(store: VectorStore) -> None:
    hits = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=5
    )
    assert [h.chunk_id for h in hits] == ["c1", "c2", "c3"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-4)
    assert hits[0].fields["title"] == "c1"
    assert hits[0].fields["tags"] == ["x"]
    assert hits[0].fields["metadata"] == {"n": 2}
    assert "dense" not in hits[0].fields
    limited = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=1, timeout=5
    )
    assert [h.chunk_id for h in limited] == ["c1"]


async def test_sparse_search_finds_rows_sharing_terms(store: VectorStore) -> None:
    hits = await store.search_sparse(
        SparseVector.from_mapping({2: 1.0}), tenant_id="a", filter=None, limit=10, timeout=5
    )
    assert [(h.chunk_id, round(h.score, 4)) for h in hits] == [("c2", 2.0), ("c1", 0.5)]
    empty = await store.search_sparse(
        SparseVector((), ()), tenant_id="a", filter=None, limit=10, timeout=5
    )
    assert empty == []


async def test_filters_and_tenants_apply_to_both_legs(store: VectorStore) -> None:
    blog = parse_filter({"source": {"eq": "blog"}})
    hits = await store.search_dense(
        unit(1, 0, 0, 0), tenant_id="a", filter=blog, limit=10, timeout=5
    )
    assert [h.chunk_id for h in hits] == ["c2"]
    hits = await store.search_sparse(
        SparseVector.from_mapping({1: 1.0}), tenant_id="b", filter=None, limit=10, timeout=5
    )
    assert [h.chunk_id for h in hits] == ["c4"]
    hits = await store.search_sparse(
        SparseVector.from_mapping({1: 1.0}),
        tenant_id="a",
        filter=parse_filter({"tags": {"contains": "x"}}),
        limit=10,
        timeout=5,
    )
    assert [h.chunk_id for h in hits] == ["c1"]
    # A store takes a parsed tree: an invalid filter is refused before any store sees it.
    with pytest.raises(InvalidFilterError):
        parse_filter({"nope": {"eq": 1}})


async def test_rows_without_terms_are_stored(store: VectorStore) -> None:
    store.upsert([record("c9", doc="d9", dense=unit(0, 0, 0, 1), sparse={})])
    assert store.chunk_ids(tenant_id="a", document_id="d9") == {"c9"}
    hits = await store.search_dense(
        unit(0, 0, 0, 1), tenant_id="a", filter=None, limit=1, timeout=5
    )
    assert hits[0].chunk_id == "c9"


async def test_flush_keeps_every_row_searchable(store: VectorStore) -> None:
    store.flush()
    store.flush()  # nothing new to seal: still fine
    assert store.count(tenant_id="a") == 3
    store.upsert([record("c5", doc="d5", dense=unit(0, 0, 1, 0), sparse={5: 1.0})])
    store.flush()
    assert store.count(tenant_id="a") == 4
    dense = await store.search_dense(
        unit(0, 0, 1, 0), tenant_id="a", filter=None, limit=1, timeout=5
    )
    sparse = await store.search_sparse(
        SparseVector.from_mapping({5: 1.0}), tenant_id="a", filter=None, limit=10, timeout=5
    )
    assert [h.chunk_id for h in dense] == [h.chunk_id for h in sparse] == ["c5"]


def test_ping_answers(store: VectorStore) -> None:
    store.ping()


async def test_aclose_releases_the_legs_and_a_later_search_reopens_them(
    store: VectorStore,
) -> None:
    async def ids() -> list[str]:
        hits = await store.search_dense(
            unit(1, 0, 0, 0), tenant_id="a", filter=None, limit=10, timeout=5
        )
        return [h.chunk_id for h in hits]

    before = await ids()
    await store.aclose()
    await store.aclose()  # idempotent
    assert await ids() == before
    # The synchronous side is untouched by aclose.
    assert store.count(tenant_id="a") == 3
