"""Every vector store call made on behalf of a caller carries the caller's tenant.

Generated requests (searches with any filter, facets, page and mode, with or without a
scoped token's restriction; document reads, lists, updates and deletes naming either
tenant's external ids) run through the real search and document services over a
recording store: a :class:`VectorStore` wrapper that records every call and raises on
a data call that names no tenant (fail closed). Every recorded call must name the
caller's tenant, every hit must be the caller's, and the other tenant's chunks must be
exactly as they were. The stores themselves refuse a call naming no tenant.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings, SearchSettings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import HsearchError
from hsearch.ingestion.api.documents import DocumentService
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.search.facets import FacetRequest
from hsearch.search.models import SearchQuery
from hsearch.search.service import SearchService
from hsearch.types import SearchMode
from hsearch.vectorstore.filters import And, FilterNode, matches, parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import ChunkRecord, VectorStore
from tests.unit.budget import UNHURRIED
from tests.unit.vectorstore.filter_strategies import filters

TENANTS = ("ta", "tb")
WORDS = ["river", "sea", "mountain", "fox", "brown", "city", "東京", "night"]

DATA_CALLS = frozenset(
    {
        "upsert",
        "update_fields",
        "delete_chunks",
        "delete_document_chunks",
        "delete_tenant",
        "count",
        "chunk_ids",
        "tenant_chunk_ids",
        "search_dense",
        "search_sparse",
        "match_sparse",
        "texts",
    }
)


class MissingTenantConditionError(AssertionError):
    """A store call on data that names no tenant."""


@dataclass
class Call:
    method: str
    tenants: frozenset[str]
    filter: FilterNode | None = None
    chunk_ids: tuple[str, ...] = ()
    """What a read by id (``texts``) asked for."""


@dataclass
class RecordingStore:
    """Wraps a store; records every data call with the tenants it names, and raises
    :class:`MissingTenantConditionError` before delegating a call that names none."""

    inner: VectorStore
    calls: list[Call] = field(default_factory=list)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in DATA_CALLS:
            return attr

        def record(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if name == "upsert":
                records: list[ChunkRecord] = list(args[0] if args else kwargs["records"])
                tenants = frozenset(r.tenant_id for r in records)
            else:
                # The store's tenant_id is a str; None (not passed) is taken out here.
                tenants = cast("frozenset[str]", frozenset({kwargs.get("tenant_id")} - {None, ""}))
            if not tenants or not all(tenants):
                raise MissingTenantConditionError(f"{name} without a tenant condition")
            ids = tuple(args[0] if args else kwargs.get("chunk_ids", ())) if name == "texts" else ()
            self.calls.append(Call(name, tenants, kwargs.get("filter"), ids))

        if inspect.iscoroutinefunction(attr):

            async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
                record(args, kwargs)
                return await attr(*args, **kwargs)

            return wrapped_async

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            record(args, kwargs)
            return attr(*args, **kwargs)

        return wrapped


def corpus(owner: str) -> list[DocumentInput]:
    docs = [
        DocumentInput(
            external_id=f"shared-{i}",
            title=f"{owner} {i}",
            text=" ".join(WORDS[i : i + 4]) + f". Owned by {owner}.",
            source=f"src-{i % 2}",
            tags=(f"team-{i % 3}",),
            metadata={"owner": owner, "n": i},
        )
        for i in range(5)
    ]
    docs.append(DocumentInput(external_id=f"only-{owner}", text="a brown fox at night"))
    return docs


@dataclass
class World:
    sessions: sessionmaker[Session]
    inner: InMemoryVectorStore
    store: RecordingStore
    search: SearchService
    documents: DocumentService

    def chunks_of(self, tenant: str) -> dict[str, ChunkRecord]:
        return {cid: r for cid, r in self.inner._rows.items() if r.tenant_id == tenant}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('cond')) / 'meta.sqlite'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    sessions = create_session_factory(engine)
    embedder = FakeEmbedder()
    inner = InMemoryVectorStore()
    statistics = LexicalStatistics(sessions)
    indexing = IndexingService(
        session_factory=sessions,
        embedder=embedder,
        store=inner,
        statistics=statistics,
        chunker=Chunker(embedder.tokenizer, max_tokens=96, overlap_tokens=0),
    )
    for tenant in TENANTS:
        queue = InMemoryJobQueue()
        with unit_of_work(sessions, queue=queue) as uow:
            JobService(uow, settings=IngestSettings()).submit(
                tenant_id=tenant, documents=corpus(tenant)
            )
        assert indexing.process_job(queue.sent[0]) == "succeeded"
    recording = RecordingStore(inner)
    store = cast("VectorStore", recording)
    yield World(
        sessions=sessions,
        inner=inner,
        store=recording,
        search=SearchService(
            embedder=embedder,
            store=store,
            statistics=statistics,
            settings=SearchSettings(totals_cache_ttl_s=0, **UNHURRIED),
        ),
        documents=DocumentService(sessions, store=store, statistics=statistics),
    )
    engine.dispose()


external_ids = st.sampled_from(
    [f"shared-{i}" for i in range(6)] + [f"only-{t}" for t in TENANTS] + ["missing"]
)
restrictions = st.none() | st.sampled_from(
    [{"tags": {"contains": "team-1"}}, {"source": {"eq": "src-0"}}, {"metadata.n": {"gte": 2}}]
)


@st.composite
def searches(draw: st.DrawFn, tenant: str) -> SearchQuery:
    restriction = draw(restrictions)
    return SearchQuery(
        tenant_id=tenant,
        query=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))),
        mode=draw(st.sampled_from(list(SearchMode))),
        top_k=draw(st.integers(1, 20)),
        offset=draw(st.integers(0, 30)),
        filter=draw(st.none() | filters),
        facets=tuple(
            FacetRequest(f) for f in draw(st.sets(st.sampled_from(["tags", "source", "lang"])))
        ),
        group_by_document=draw(st.booleans()),
        required_filter=parse_filter(restriction),
    )


Action = Callable[[World], Any]


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, str, Action, FilterNode | None]:
    tenant = draw(st.sampled_from(TENANTS))
    kind = draw(st.sampled_from(["search", "get", "list", "update", "delete"]))
    if kind == "search":
        query = draw(searches(tenant))

        def run_search(w: World) -> Any:
            return asyncio.run(w.search.search(query))

        return tenant, kind, run_search, query.required_filter
    ext = draw(external_ids)
    restriction = parse_filter(draw(restrictions))
    limit = draw(st.integers(1, 10))
    tag = draw(st.sampled_from(["x", "team-1"]))
    actions: dict[str, Action] = {
        "get": lambda w: w.documents.get(
            tenant_id=tenant, external_id=ext, restriction=restriction
        ),
        "list": lambda w: w.documents.list(tenant_id=tenant, limit=limit, restriction=restriction),
        "update": lambda w: w.documents.update(tenant_id=tenant, external_id=ext, tags=[tag]),
        "delete": lambda w: w.documents.delete(tenant_id=tenant, external_id=ext),
    }
    return tenant, kind, actions[kind], restriction if kind in ("get", "list") else None


def _contains(node: FilterNode | None, required: FilterNode) -> bool:
    return node == required or (isinstance(node, And) and node.children[0] == required)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_every_store_call_carries_the_callers_tenant(
    world: World, request: tuple[str, str, Action, FilterNode | None]
) -> None:
    tenant, kind, action, restriction = request
    other = next(t for t in TENANTS if t != tenant)
    others_before = world.chunks_of(other)
    world.store.calls.clear()
    refused: HsearchError | None = None
    result = None
    try:
        result = action(world)
    except HsearchError as exc:  # a request refused (404, 422) is fine; a bug is not
        refused = exc
    assert refused is None or refused.status_code < 500, refused
    rows = world.chunks_of(tenant)
    for call in world.store.calls:
        assert call.tenants == {tenant}, (kind, call)
        if kind != "search" or restriction is None:
            continue
        if call.method == "texts":
            # A read by id of what the restricted legs found: each chunk passes the
            # restriction (a chunk of another tenant the store leaves out anyway).
            assert all(
                matches(restriction, {**asdict(rows[c]), "tags": list(rows[c].tags)})
                for c in call.chunk_ids
                if c in rows
            ), call
        else:
            assert _contains(call.filter, restriction), call
    assert world.chunks_of(other) == others_before
    if kind == "search" and result is not None:
        mine = {r.document_id for r in world.chunks_of(tenant).values()}
        assert {h.document_id for h in result.hits} <= mine


def test_the_recording_store_fails_closed() -> None:
    recording = RecordingStore(InMemoryVectorStore())
    store = cast("VectorStore", recording)
    with pytest.raises(MissingTenantConditionError):
        store.count(tenant_id="")
    with pytest.raises(MissingTenantConditionError):
        store.delete_chunks(["c"], tenant_id="")
    assert store.count(tenant_id="t") == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.count(tenant_id=""),
        lambda s: s.tenant_chunk_ids(tenant_id=""),
        lambda s: s.chunk_ids(tenant_id="", document_id="d"),
        lambda s: s.delete_chunks(["c"], tenant_id=""),
        lambda s: s.delete_document_chunks(tenant_id="", document_id="d"),
        lambda s: s.delete_tenant(tenant_id=""),
        lambda s: s.update_fields(tenant_id="", chunk_ids=["c"], fields={"tags": []}),
        lambda s: asyncio.run(
            s.search_dense([1.0], tenant_id="", filter=None, limit=1, timeout=1.0)
        ),
    ],
)
def test_the_store_refuses_a_call_naming_no_tenant(call: Callable[[VectorStore], Any]) -> None:
    with pytest.raises(HsearchError, match="must name a tenant"):
        call(InMemoryVectorStore())
