"""The retrieval call (below the page): fused passages with texts, offsets and
explanations for a request under a budget; the search service's pages are cut from the
same fused list."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.budget import Budget
from hsearch.config import SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import InvalidRequestError, SearchUnavailableError
from hsearch.ingestion.ids import document_id
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.models import SearchQuery
from hsearch.search.passages import RetrievalRequest
from hsearch.search.service import SearchService
from hsearch.search.sources import Level, Need, SourceQuery
from hsearch.types import SearchMode
from hsearch.vectorstore.protocol import StoredHit
from tests.unit.budget import UNHURRIED
from tests.unit.search.corpus import DOCS, TENANT, index


def service(sessions: sessionmaker[Session]) -> SearchService:
    embedder = FakeEmbedder()
    return SearchService(
        embedder=embedder,
        store=index(sessions, embedder),
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )


async def test_passages_come_fused_with_texts_offsets_and_explanations(
    sessions: sessionmaker[Session],
) -> None:
    search = service(sessions)
    request = RetrievalRequest(tenant_id=TENANT, query="rivers flow", limit=3)
    passages = await search.retrieval.retrieve(request)
    assert [p.rank for p in passages.passages] == [1, 2, 3]
    first = passages.passages[0]
    assert first.external_id == "rivers"
    text = {d.external_id: d.text for d in DOCS}["rivers"]
    assert first.char_start is not None
    assert first.char_end is not None
    assert text[first.char_start : first.char_end] in first.text
    assert set(first.explanation.legs) == {"dense", "sparse"}
    assert first.explanation.rank_of("sparse") == 1
    assert passages.degraded == ()
    assert [leg.leg for leg in passages.legs] == ["dense", "sparse"]
    assert passages.timings.total_ms > 0
    # The same fused order as the search with the same fields.
    page = await search.search(SearchQuery(tenant_id=TENANT, query="rivers flow", top_k=3))
    assert [h.chunk_id for h in page.hits] == [p.chunk_id for p in passages.passages]
    assert [h.score for h in page.hits] == [p.score for p in passages.passages]
    assert [h.explanation for h in page.hits] == [p.explanation for p in passages.passages]


async def test_passages_follow_mode_weights_and_grouping(sessions: sessionmaker[Session]) -> None:
    search = service(sessions)
    keyword = await search.retrieval.retrieve(
        RetrievalRequest(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD)
    )
    assert [leg.leg for leg in keyword.legs] == ["sparse"]
    assert all(set(p.explanation.legs) == {"sparse"} for p in keyword.passages)
    dense_only = await search.retrieval.retrieve(
        RetrievalRequest(tenant_id=TENANT, query="rivers", weights={"dense": 1.0})
    )
    assert [(leg.leg, leg.status.value) for leg in dense_only.legs] == [
        ("dense", "ok"),
        ("sparse", "skipped"),
    ]
    grouped = await search.retrieval.retrieve(
        RetrievalRequest(tenant_id=TENANT, query="the", limit=10, group_by_document=True)
    )
    documents = [p.document_id for p in grouped.passages]
    assert len(documents) == len(set(documents))


async def test_a_request_is_validated_as_a_search_is(sessions: sessionmaker[Session]) -> None:
    search = service(sessions)
    with pytest.raises(InvalidRequestError, match="weights: unknown leg 'graph'"):
        await search.retrieval.retrieve(
            RetrievalRequest(tenant_id=TENANT, query="rivers", weights={"graph": 1.0})
        )
    with pytest.raises(InvalidRequestError, match="query: must not be empty"):
        await search.retrieval.retrieve(RetrievalRequest(tenant_id=TENANT, query=" "))


async def test_a_spent_budget_runs_no_leg(sessions: sessionmaker[Session]) -> None:
    """The budget is a value handed down: one already spent reaches no store."""
    search = service(sessions)
    spent = Budget(time.perf_counter() - 1)
    with pytest.raises(SearchUnavailableError, match="no time left of the request's budget"):
        await search.retrieval.retrieve(
            RetrievalRequest(tenant_id=TENANT, query="rivers"), budget=spent
        )


def test_a_budget_counts_down() -> None:
    budget = Budget.of(10.0, started=100.0)
    assert budget.deadline == 110.0
    assert budget.remaining_s(now=104.0) == 6.0
    assert not budget.spent(now=109.9)
    assert budget.spent(now=110.0)


class OneDocument:
    """A document-level source answering one fixed document."""

    name = "toy"
    needs: frozenset[Need] = frozenset()
    level = Level.DOCUMENT
    modes = frozenset({SearchMode.HYBRID})
    default_weight = 0.5

    def __init__(self, external_id: str) -> None:
        self.external_id = external_id

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        return [StoredHit(str(document_id(query.tenant_id, self.external_id)), 3.0, {})]


async def test_a_document_another_leg_found_comes_back_as_that_legs_chunk(
    sessions: sessionmaker[Session],
) -> None:
    embedder = FakeEmbedder()
    search = SearchService(
        embedder=embedder,
        store=index(sessions, embedder),
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
        extra_sources=[OneDocument("rivers")],
    )
    passages = await search.retrieval.retrieve(RetrievalRequest(tenant_id=TENANT, query="rivers"))
    first = passages.passages[0]
    assert first.external_id == "rivers"
    assert first.explanation.rank_of("sparse") == 1
    assert first.explanation.legs["toy"].rank == 1
    assert first.explanation.legs["toy"].score == 3.0
    assert sum(p.external_id == "rivers" for p in passages.passages) == 1
