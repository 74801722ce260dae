"""Each chunk's character offsets travel from the chunker, through the indexer and the
rebuild, to the store and the search hits."""

from __future__ import annotations

from typing import cast

from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.operations.reindex import ReindexService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.models import SearchQuery
from hsearch.search.service import SearchService
from hsearch.types import SearchMode
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.budget import UNHURRIED
from tests.unit.search.corpus import TENANT, index

TEXT = "  " + " ".join(
    f"Paragraph {i} tells of rivers, of mountains and of the sea near town {i}." for i in range(40)
)
DOC = DocumentInput(external_id="long", title="A long story", text=TEXT)


async def search_all(service: SearchService) -> list[tuple[str, int | None, int | None]]:
    result = await service.search(
        SearchQuery(tenant_id=TENANT, query="rivers", mode=SearchMode.KEYWORD, top_k=100)
    )
    return [(h.text, h.char_start, h.char_end) for h in result.hits]


def searcher(
    embedder: FakeEmbedder, store: InMemoryVectorStore, sessions: sessionmaker[Session]
) -> SearchService:
    return SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )


async def test_hits_carry_where_their_chunk_lies_in_the_document(
    sessions: sessionmaker[Session],
) -> None:
    embedder = FakeEmbedder()
    store = index(sessions, embedder, [DOC])
    hits = await search_all(searcher(embedder, store, sessions))
    expected = Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0).chunk(
        TEXT, title=DOC.title
    )
    assert len(expected) > 3
    assert sorted(hits, key=lambda h: h[1] or 0) == [(c.text, c.start, c.end) for c in expected]
    assert all(TEXT[start:end] == text for text, start, end in hits)
    # Every offset is set: the hits equal the chunks' (int) offsets, asserted above.
    located = cast("list[tuple[str, int, int]]", hits)
    assert min(start for _, start, _ in located) == 2, "past the leading white space"
    assert max(end for _, _, end in located) == len(TEXT)


async def test_a_rebuild_writes_the_same_offsets(sessions: sessionmaker[Session]) -> None:
    embedder = FakeEmbedder()
    store = index(sessions, embedder, [DOC])
    before = sorted(await search_all(searcher(embedder, store, sessions)))
    ReindexService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        chunker=Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0),
    ).run()
    assert sorted(await search_all(searcher(embedder, store, sessions))) == before
