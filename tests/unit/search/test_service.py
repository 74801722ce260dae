"""The search service on embedded parts (SQLite, fake encoder, in-memory store):
validation, fusion weights, the language check, grouping and reranking."""

from __future__ import annotations

import math
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings, SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import EncoderInfo
from hsearch.errors import InvalidFilterError, InvalidRequestError, SearchUnavailableError
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.indexer import IndexingService
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.rerank.fake import FakeReranker
from hsearch.search.fusion import LegHit
from hsearch.search.models import SearchQuery
from hsearch.search.service import SearchService, query_weights
from hsearch.types import SearchMode
from hsearch.vectorstore.filters import FilterNode, Not, parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import StoredHit

TENANT = "t"
DOCS = [
    DocumentInput(external_id="rivers", title="Rivers", text="Rivers flow into the sea."),
    DocumentInput(external_id="mountains", title="Mountains", text="Mountains rise high."),
    DocumentInput(external_id="tokyo", title="東京", text="東京は日本の首都です。"),
    DocumentInput(external_id="kyoto", title="京都", text="京都は古い都です。"),
]


class LatinOnlyEmbedder(FakeEmbedder):
    """The fake encoder, declared English-only on the dense side like MiniLM."""

    @property
    def info(self) -> EncoderInfo:
        base = super().info
        return EncoderInfo(
            base.name,
            base.dimension,
            base.version,
            base.sparse_kind,
            dense_scripts=frozenset({"LATIN"}),
        )


def build(
    sessions: sessionmaker[Session], embedder: FakeEmbedder | None = None, **kwargs: object
) -> tuple[SearchService, InMemoryVectorStore]:
    embedder = embedder or FakeEmbedder()
    store = InMemoryVectorStore()
    indexing = IndexingService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        chunk_max_chars=500,
        chunk_overlap_chars=0,
    )
    queue = InMemoryJobQueue()
    with unit_of_work(sessions, queue=queue) as uow:
        JobService(uow, settings=IngestSettings()).submit(tenant_id=TENANT, documents=DOCS)
    indexing.process_job(queue.sent[0])
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(),
        **kwargs,
    )  # type: ignore[arg-type]
    return service, store


async def test_default_is_adaptive_with_its_prior(sessions: sessionmaker[Session]) -> None:
    service, _ = build(sessions)
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert result.method == "adaptive"
    assert result.weights == {"dense": 0.95, "sparse": 0.05}
    assert result.hits[0].external_id == "rivers"
    rrf = await service.search(SearchQuery(tenant_id=TENANT, query="rivers sea", fusion="rrf"))
    assert rrf.weights == {"dense": 0.7, "sparse": 0.3}
    assert rrf.applied_weights == pytest.approx({"dense": 0.7, "sparse": 0.3})
    # Adaptive reports its per-query mixture weights: a share per leg, summing to 1.
    assert set(result.applied_weights) == {"dense", "sparse"}
    assert math.fsum(result.applied_weights.values()) == pytest.approx(1.0)
    semantic = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", mode=SearchMode.SEMANTIC)
    )
    assert semantic.applied_weights == {"dense": 1.0}


async def test_dense_leg_is_ignored_for_queries_its_encoder_cannot_read(
    sessions: sessionmaker[Session],
) -> None:
    service, _ = build(sessions, LatinOnlyEmbedder())
    ja = await service.search(SearchQuery(tenant_id=TENANT, query="日本の首都"))
    assert ja.weights["dense"] == 0.0
    assert ja.hits[0].external_id == "tokyo"
    en = await service.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    assert en.weights["dense"] > 0.0
    # A multilingual encoder (no declared scripts) keeps its weights.
    multi, _ = build(sessions, FakeEmbedder())
    assert (await multi.search(SearchQuery(tenant_id=TENANT, query="日本の首都"))).weights[
        "dense"
    ] > 0.0


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"query": "  "}, "query"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 5, "candidates": 2}, "candidates"),
        ({"leg_timeout_s": 100.0}, "leg_timeout_ms"),
        ({"weights": {"dense": 2.0}}, "weights.dense"),
        ({"weights": {"dense": 0.0, "sparse": 1.0}, "mode": SearchMode.SEMANTIC}, "weights"),
        ({"rerank": True}, "rerank"),
    ],
)
async def test_invalid_queries_name_the_field(
    sessions: sessionmaker[Session], kwargs: dict[str, object], field: str
) -> None:
    service, _ = build(sessions)
    query = SearchQuery(**{"tenant_id": TENANT, "query": "rivers", **kwargs})  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=field):
        await service.search(query)


async def test_invalid_filter_is_rejected_before_any_leg_runs(
    sessions: sessionmaker[Session],
) -> None:
    service, _ = build(sessions)
    with pytest.raises(InvalidFilterError, match=r"filter\.or"):
        await service.search(SearchQuery(tenant_id=TENANT, query="x", filter={"or": 1}))


class RecordingStore(InMemoryVectorStore):
    """Remembers the filter each leg was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.filters: list[FilterNode | None] = []

    async def search_dense(self, *args: Any, **kwargs: Any) -> list[StoredHit]:  # type: ignore[override]
        self.filters.append(kwargs["filter"])
        return await super().search_dense(*args, **kwargs)

    async def search_sparse(self, *args: Any, **kwargs: Any) -> list[StoredHit]:  # type: ignore[override]
        self.filters.append(kwargs["filter"])
        return await super().search_sparse(*args, **kwargs)


async def test_the_filter_is_parsed_once_and_both_legs_get_the_tree(
    sessions: sessionmaker[Session],
) -> None:
    _, store = build(sessions)
    recording = RecordingStore()
    recording.upsert(list(store._rows.values()))
    service = SearchService(
        embedder=FakeEmbedder(),
        store=recording,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(),
    )
    raw = {"not": {"source": {"eq": "nowhere"}}}
    result = await service.search(SearchQuery(tenant_id=TENANT, query="rivers", filter=raw))
    assert result.hits
    dense, sparse = recording.filters
    assert isinstance(dense, Not)
    assert dense == parse_filter(raw)
    assert sparse is dense, "one parse per request: the legs share the tree"


class BrokenStore(InMemoryVectorStore):
    async def search_sparse(self, *args: object, **kwargs: object) -> list:  # type: ignore[override]
        from hsearch.errors import VectorStoreError

        raise VectorStoreError("sparse index offline")


async def test_a_failed_leg_degrades_and_a_failed_mode_is_unavailable(
    sessions: sessionmaker[Session],
) -> None:
    _, store = build(sessions)
    broken = BrokenStore()
    broken.upsert([store._rows[c] for c in store._rows])
    degraded = SearchService(
        embedder=FakeEmbedder(),
        store=broken,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(),
    )
    result = await degraded.search(SearchQuery(tenant_id=TENANT, query="rivers"))
    assert [leg.value for leg in result.degraded] == ["sparse"]
    assert result.hits
    with pytest.raises(SearchUnavailableError, match="sparse index offline"):
        await degraded.search(
            SearchQuery(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD)
        )


async def test_rerank_reorders_and_reports(sessions: sessionmaker[Session]) -> None:
    reranker = FakeReranker()
    service, _ = build(sessions, reranker=reranker, rerank_depth=10)
    plain = await service.search(SearchQuery(tenant_id=TENANT, query="mountains rise"))
    assert reranker.calls == 0
    assert plain.rerank_ms is None
    result = await service.search(
        SearchQuery(tenant_id=TENANT, query="mountains rise", rerank=True)
    )
    assert reranker.calls == 1
    assert result.rerank_ms is not None
    assert result.hits[0].external_id == "mountains"
    scores = [h.explanation.rerank_score for h in result.hits]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert result.hits[0].score == scores[0]


def test_query_weights_apply_coverage_and_fall_back() -> None:
    legs = {"dense": [LegHit("a", 0.9)], "sparse": [LegHit("b", 3.0)]}
    prior = {"dense": 0.95, "sparse": 0.05}
    latin = frozenset({"LATIN"})

    def weights(query: str, legs: dict[str, list[LegHit]], **kw: object) -> dict[str, float]:
        options: dict[str, object] = {
            "configured": prior,
            "dense_scripts": latin,
            "min_dense_script_coverage": 0.5,
        }
        options.update(kw)
        return query_weights(query, legs, **options)  # type: ignore[arg-type]

    assert weights("rivers of Europe", legs) == prior
    # Mostly Japanese words: the English-only dense leg is dropped.
    assert weights("RIAIは何の略？", legs) == {"dense": 0.0, "sparse": 0.05}
    # ...unless the sparse leg found nothing, or the encoder reads every script.
    assert weights("RIAIは何の略？", {**legs, "sparse": []}) == prior
    assert weights("RIAIは何の略？", legs, dense_scripts=None) == prior
    # A degraded leg drops out; if it was the only weighted one, the rest share equally.
    assert weights("rivers", {"dense": legs["dense"]}) == {"dense": 0.95}
    sparse_only = {"dense": 0.0, "sparse": 1.0}
    assert weights("rivers", {"dense": legs["dense"]}, configured=sparse_only) == {"dense": 1.0}
