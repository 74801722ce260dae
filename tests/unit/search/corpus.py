"""A small indexed corpus and store doubles for the search tests (embedded parts:
SQLite statistics, the fake encoder, the in-memory store)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

from sqlalchemy.orm import Session, sessionmaker

from hsearch.cache.embeddings import QueryEncoder
from hsearch.config import IngestSettings, SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding, EncoderInfo
from hsearch.errors import EncoderError, VectorStoreError, VectorStoreTimeoutError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics, WeighedQuery
from hsearch.rerank.protocol import Reranker
from hsearch.search.caching import GenerationReader, PageSnapshots, ResultCache
from hsearch.search.service import SearchService
from hsearch.types import FusionDefault, Leg, SparseVector
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord, StoredHit
from tests.unit.budget import UNHURRIED

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


class DeclaringEmbedder(FakeEmbedder):
    """The fake encoder declaring a fusion default of its own."""

    def __init__(self, fusion: FusionDefault) -> None:
        super().__init__()
        self._fusion = fusion

    @property
    def info(self) -> EncoderInfo:
        return dataclasses.replace(super().info, fusion=self._fusion)


class ModelSparseEmbedder(FakeEmbedder):
    """The fake encoder, declared like BGE-M3: a query's sparse side comes out of the
    model, so none is made without it (no keyword fallback)."""

    @property
    def info(self) -> EncoderInfo:
        return dataclasses.replace(super().info, sparse_needs_model=True)

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        del text
        return None


HANG_S = 600.0
"""How long a hung model blocks its thread unless the test releases it first."""


class AilingEmbedder(FakeEmbedder):
    """The fake encoder whose model, once ``ailment`` is set, fails every query
    (``"fail"``: :class:`EncoderError`) or hangs on it (``"hang"``: until
    :meth:`release`, which the test calls when it ends); documents encode as usual, and
    the sparse side made without the model (:meth:`embed_query_without_model`) is
    unaffected, as the offline encoder's term counts are."""

    def __init__(self) -> None:
        super().__init__()
        self.ailment: str | None = None
        self.hung = threading.Event()
        """Set when a query has reached the hung model."""
        self._released = threading.Event()

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        if self.ailment == "fail":
            raise EncoderError("the model ran out of memory")
        if self.ailment == "hang":
            self.hung.set()
            self._released.wait(HANG_S)
        return super().embed_query(text, dense=dense, sparse=sparse)

    def release(self) -> None:
        """Let every hung query return (its caller has long given up)."""
        self._released.set()


class AilingModelSparseEmbedder(AilingEmbedder, ModelSparseEmbedder):
    """:class:`AilingEmbedder` declared like BGE-M3: nothing to fall back on."""


def index(
    sessions: sessionmaker[Session], embedder: FakeEmbedder, docs: list[DocumentInput] = DOCS
) -> InMemoryVectorStore:
    """``docs`` indexed for TENANT through the real indexing service."""
    store = InMemoryVectorStore()
    indexing = IndexingService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        chunker=Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0),
    )
    queue = InMemoryJobQueue()
    with unit_of_work(sessions, queue=queue) as uow:
        JobService(uow, settings=IngestSettings()).submit(tenant_id=TENANT, documents=docs)
    indexing.process_job(queue.sent[0])
    return store


class ServiceOptions(TypedDict, total=False):
    """SearchService's optional keyword arguments, passed through by ``build``."""

    reranker: Reranker | None
    rerank_depth: int
    results: ResultCache | None
    queries: QueryEncoder | None
    snapshots: PageSnapshots | None
    generations: GenerationReader | None
    settle_s: float


def build(
    sessions: sessionmaker[Session],
    embedder: FakeEmbedder | None = None,
    **kwargs: Unpack[ServiceOptions],
) -> tuple[SearchService, InMemoryVectorStore]:
    embedder = embedder or FakeEmbedder()
    store = index(sessions, embedder)
    service = SearchService(
        embedder=embedder,
        store=store,
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
        **kwargs,
    )
    return service, store


class ScriptedStore(InMemoryVectorStore):
    """The in-memory store whose legs behave as told, per leg:

    ``ok`` searches the rows; ``empty`` finds nothing; ``fail`` raises a store error;
    ``timeout`` raises the store's timeout error (its own deadline fired); ``stall``
    never answers; ``meet`` answers once every leg told to meet has started (legs run
    one after the other never meet: the first stalls); a number answers (from the
    rows) after that many seconds.
    ``calls`` records each leg searched with the timeout it was given. The keyword
    matches (``matches``) behave as told too, and are recorded in ``match_calls``.
    """

    def __init__(self, rows: Mapping[str, ChunkRecord], **behaviour: str | float) -> None:
        super().__init__()
        self.upsert(list(rows.values()))
        self.behaviour = behaviour
        self.calls: list[tuple[Leg, float]] = []
        self.match_calls = 0
        self._meeting = sum(1 for what in behaviour.values() if what == "meet")
        self._met = asyncio.Event()

    async def _act(self, leg: Leg | str, timeout: float) -> list[StoredHit] | None:
        what = self.behaviour.get(leg, "ok")
        if isinstance(leg, Leg):
            self.calls.append((leg, timeout))
        if what == "empty":
            return []
        if what == "fail":
            raise VectorStoreError(f"{leg} index offline")
        if what == "timeout":
            raise VectorStoreTimeoutError(f"{leg} search missed its {timeout:.3f}s deadline")
        if what == "stall":
            await asyncio.sleep(3600)
        if what == "meet":
            self._meeting -= 1
            if self._meeting <= 0:
                self._met.set()
            await self._met.wait()
        if isinstance(what, float | int):
            await asyncio.sleep(what)
        return None

    async def search_dense(self, vector: Any, **kwargs: Any) -> list[StoredHit]:
        scripted = await self._act(Leg.DENSE, kwargs["timeout"])
        return await super().search_dense(vector, **kwargs) if scripted is None else scripted

    async def search_sparse(self, vector: SparseVector, **kwargs: Any) -> list[StoredHit]:
        scripted = await self._act(Leg.SPARSE, kwargs["timeout"])
        return await super().search_sparse(vector, **kwargs) if scripted is None else scripted

    async def match_sparse(self, vector: SparseVector, **kwargs: Any) -> list[StoredHit]:
        self.match_calls += 1
        scripted = await self._act("matches", kwargs["timeout"])
        return await super().match_sparse(vector, **kwargs) if scripted is None else scripted


class CountingStatistics(LexicalStatistics):
    """The tenant statistics, counting the queries they weighed."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__(sessions)
        self.queries = 0

    def weigh_query_terms(self, tenant_id: str, term_frequencies: SparseVector) -> WeighedQuery:
        self.queries += 1
        return super().weigh_query_terms(tenant_id, term_frequencies)
