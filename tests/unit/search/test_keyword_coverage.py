"""The keyword leg's coverage of the query, read by the service for ``adaptive`` fusion
(:attr:`hsearch.search.retrieval.Retrieval.keyword_coverage`, docs/fusion.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import VectorStoreError
from hsearch.lexical.bm25 import bm25_idf
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.models import SearchQuery
from hsearch.search.service import SearchService
from hsearch.types import FusionDefault, FusionMethod, SearchMode
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import StoredHit
from tests.unit.budget import UNHURRIED
from tests.unit.search.corpus import TENANT, DeclaringEmbedder, index

PRIOR = {"dense": 0.9, "sparse": 0.1}
READING = FusionDefault.of("adaptive", PRIOR, 60, keyword_coverage=True)
PLAIN = FusionDefault.of("adaptive", PRIOR, 60)


class TermCountingStore(InMemoryVectorStore):
    """Counts the reads of stored terms; ``fail`` makes them fail."""

    def __init__(self, source: InMemoryVectorStore, *, fail: bool = False) -> None:
        super().__init__()
        self.upsert(list(source._rows.values()))
        self.reads: list[list[str]] = []
        self.fail = fail

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        self.reads.append(list(chunk_ids))
        if self.fail:
            raise VectorStoreError("terms unreadable")
        return await super().sparse_terms(chunk_ids, tenant_id=tenant_id, timeout=timeout)


Indexed = tuple[sessionmaker[Session], InMemoryVectorStore]


@pytest.fixture
def indexed(sessions: sessionmaker[Session]) -> Indexed:
    """The corpus, indexed once per test (a second ingest of it would change nothing)."""
    return sessions, index(sessions, FakeEmbedder())


def service(
    indexed: Indexed,
    fusion: FusionDefault,
    *,
    fail: bool = False,
    store: TermCountingStore | None = None,
    **settings: object,
) -> tuple[SearchService, TermCountingStore]:
    """A service over the indexed corpus (or ``store``, holding it) whose encoder
    declares ``fusion``."""
    sessions, rows = indexed
    embedder = DeclaringEmbedder(fusion)
    store = store or TermCountingStore(rows, fail=fail)
    search = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**{**UNHURRIED, **settings}),
    )
    return search, store


async def test_a_first_keyword_hit_that_holds_every_word_covers_the_query(
    indexed: Indexed,
) -> None:
    search, store = service(indexed, READING)
    result = await search.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert result.keyword_coverage == pytest.approx(1.0)
    assert len(store.reads) == 1  # one read...
    assert len(store.reads[0]) == 1  # ...of one chunk


async def test_a_word_no_chunk_holds_lowers_the_coverage(
    indexed: Indexed,
) -> None:
    search, _ = service(indexed, READING)
    result = await search.search(SearchQuery(tenant_id=TENANT, query="rivers volcano"))
    assert result.keyword_coverage is not None
    assert 0.0 < result.keyword_coverage < 0.5  # "volcano" is rarer than any held word
    chunks = 4  # the corpus' documents are one chunk each
    unheld = bm25_idf(0, document_count=chunks)
    river = bm25_idf(1, document_count=chunks)
    assert result.keyword_coverage == pytest.approx(river / (river + unheld))


async def test_coverage_moves_the_weights_where_nothing_stands_out(
    indexed: Indexed,
) -> None:
    covered, _ = service(indexed, READING)
    plain, _ = service(indexed, PLAIN)
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    with_reading = await covered.search(query)
    without = await plain.search(query)
    assert without.keyword_coverage is None
    assert with_reading.applied_weights["sparse"] < without.applied_weights["sparse"]


async def test_the_keyword_mode_reports_its_coverage(indexed: Indexed) -> None:
    search, _ = service(indexed, READING)
    result = await search.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", mode=SearchMode.KEYWORD)
    )
    assert result.keyword_coverage == pytest.approx(1.0)


async def test_nothing_is_read_when_the_fusion_does_not_read_it(
    indexed: Indexed,
) -> None:
    for fusion, request, configured in (
        (PLAIN, None, None),
        (READING, FusionMethod.RRF, None),  # another method reads no coverage
        (READING, None, False),  # the operator turned it off
    ):
        search, store = service(indexed, fusion, keyword_coverage=configured)
        result = await search.search(
            SearchQuery(tenant_id=TENANT, query="rivers sea", fusion=request)
        )
        assert result.keyword_coverage is None
        assert store.reads == []
    search, store = service(indexed, PLAIN, keyword_coverage=True)  # the operator's
    result = await search.search(SearchQuery(tenant_id=TENANT, query="rivers sea"))
    assert result.keyword_coverage == pytest.approx(1.0)
    # The dense leg alone reads nothing.
    search, store = service(indexed, READING)
    result = await search.search(
        SearchQuery(tenant_id=TENANT, query="rivers sea", mode=SearchMode.SEMANTIC)
    )
    assert result.keyword_coverage is None
    assert store.reads == []


async def test_terms_that_cannot_be_read_cost_the_reading_not_the_search(
    indexed: Indexed, caplog: pytest.LogCaptureFixture
) -> None:
    failing, store = service(indexed, READING, fail=True)
    plain, _ = service(indexed, PLAIN)
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    result = await failing.search(query)
    assert len(store.reads) == 1  # it tried once, not again after the legs
    assert result.keyword_coverage is None
    assert not result.degraded
    expected = await plain.search(query)
    assert [h.chunk_id for h in result.hits] == [h.chunk_id for h in expected.hits]
    assert result.applied_weights == expected.applied_weights
    assert "search.coverage.unavailable" in caplog.text


async def test_another_tenants_chunk_is_never_read(indexed: Indexed) -> None:
    _, store = service(indexed, READING)
    chunk = next(iter(store._rows))
    assert await store.sparse_terms([chunk], tenant_id="someone-else", timeout=1.0) == {}
    assert await store.sparse_terms([chunk], tenant_id=TENANT, timeout=1.0)


class WaitingDenseStore(TermCountingStore):
    """The dense leg answers only once the keyword leg's first candidate's terms have
    been read: a search that read them after every leg answered would never end."""

    def __init__(self, source: InMemoryVectorStore) -> None:
        super().__init__(source)
        self.read = asyncio.Event()

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        terms = await super().sparse_terms(chunk_ids, tenant_id=tenant_id, timeout=timeout)
        self.read.set()
        return terms

    async def search_dense(self, *args: Any, **kwargs: Any) -> list[StoredHit]:
        await self.read.wait()
        return await super().search_dense(*args, **kwargs)


async def test_the_terms_are_read_while_the_other_legs_run(indexed: Indexed) -> None:
    store = WaitingDenseStore(indexed[1])
    search, _ = service(indexed, READING, store=store)
    query = SearchQuery(tenant_id=TENANT, query="rivers sea")
    result = await asyncio.wait_for(search.search(query), 30)
    assert result.keyword_coverage == pytest.approx(1.0)
    assert not result.degraded
    assert len(store.reads) == 1


async def test_under_the_syntax_the_first_candidate_left_is_read(indexed: Indexed) -> None:
    # The exclusion drops the keyword leg's first candidate (the rivers document): the
    # coverage is that of the first candidate left, read after the conditions.
    search, store = service(indexed, READING)
    plain = await search.search(SearchQuery(tenant_id=TENANT, query="rivers mountains"))
    first = next(h for h in plain.legs if h.leg == "sparse")
    assert first.candidates >= 2
    store.reads.clear()
    result = await search.search(
        SearchQuery(tenant_id=TENANT, query="rivers mountains -flow", mode=SearchMode.KEYWORD)
    )
    assert [h.external_id for h in result.hits] == ["mountains"]
    assert store.reads == [[result.hits[0].chunk_id]]
    assert 0.0 < (result.keyword_coverage or 0.0) < 1.0  # it holds "mountains" only


class HangingTermsStore(TermCountingStore):
    """A store whose terms never come (a read stuck on the network)."""

    async def sparse_terms(
        self, chunk_ids: Sequence[str], *, tenant_id: str, timeout: float
    ) -> dict[str, frozenset[int]]:
        self.reads.append(list(chunk_ids))
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_read_that_never_answers_is_cut_at_the_search_deadline(
    indexed: Indexed, caplog: pytest.LogCaptureFixture
) -> None:
    store = HangingTermsStore(indexed[1])
    search, _ = service(indexed, READING, store=store, leg_timeout_s=0.5)
    # Without the read's own deadline the search would never end: the wait_for below
    # (far above the 0.5 s budget) fails the test instead of hanging it.
    result = await asyncio.wait_for(
        search.search(SearchQuery(tenant_id=TENANT, query="rivers sea")), 60
    )
    assert result.keyword_coverage is None
    assert result.hits
    assert not result.degraded
    assert len(store.reads) == 1
    assert "search.coverage.unavailable" in caplog.text
