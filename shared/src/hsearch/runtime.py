"""Wiring: one function builds what a process needs from the settings.

The API lifespan, the worker's per-process resources and the relevance benchmark all
call :func:`build_services`, so the three run the same assembly of adapters and
services. Tests (and anything else) swap an implementation by passing it in: an
in-memory store, the fake encoder, an in-memory job queue.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property, partial
from typing import Any

import anyio
import anyio.to_thread

from hsearch import __version__
from hsearch.cache.embeddings import QueryEncoder
from hsearch.cache.factory import create_cache
from hsearch.cache.generations import GenerationReader
from hsearch.cache.guard import CacheCounters, GuardedCache
from hsearch.cache.protocol import CacheBackend
from hsearch.compositions.answers.caching import AnswerCache
from hsearch.compositions.answers.service import AnswerService, CitationSettings
from hsearch.compositions.lazy.memory import TurnMemory
from hsearch.compositions.lazy.service import LazyGatherer, StoreConcepts
from hsearch.concepts.index import IndexParams
from hsearch.concepts.store import ConceptStore
from hsearch.config import ConceptSettings, Settings
from hsearch.db.engine import (
    Engine,
    SessionFactory,
    create_db_engine,
    create_session_factory,
    open_migrated_engine,
    ping_database,
)
from hsearch.db.repositories.jobs import JobRepository
from hsearch.embedding.batching import QueryBatcher
from hsearch.embedding.factory import UnloadedEmbedder, create_embedder, describe_encoder
from hsearch.embedding.protocol import Embedder
from hsearch.graph.params import GraphParams, GraphScoring
from hsearch.graph.source import GRAPH_LEG, GraphSource
from hsearch.graph.store import GraphStore, LinkedPages
from hsearch.ingestion.api.documents import DocumentService
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.derived.protocol import DerivedKind
from hsearch.ingestion.derived.registry import DerivedKinds, standard_kinds
from hsearch.ingestion.operations.reconcile import Reconciler
from hsearch.ingestion.operations.reindex import ReindexService
from hsearch.ingestion.operations.relink import Relinker
from hsearch.ingestion.queue import CeleryJobQueue, JobQueue, create_celery
from hsearch.ingestion.webhooks import WebhookSender
from hsearch.ingestion.worker.indexer import IndexingService
from hsearch.ingestion.worker.leases import JobSweeper
from hsearch.lexical.expansion import QueryExpander
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.llm.factory import create_llm
from hsearch.llm.protocol import LLM
from hsearch.metrics import instruments
from hsearch.metrics.dashboard import DashboardFigures, dashboard_figures, past_readings
from hsearch.metrics.exposition import (
    ScrapeFigures,
    aggregated_families,
    multiprocess_dir,
    render,
)
from hsearch.metrics.history import SampleHistory
from hsearch.metrics.summary import search_samples
from hsearch.ratelimit.redis import redis_storage
from hsearch.ratelimit.tokens import TokenQuota
from hsearch.rerank.factory import create_reranker
from hsearch.rerank.protocol import Reranker
from hsearch.search.caching import PageSnapshots, ResultCache, purge_tenant
from hsearch.search.service import SearchService
from hsearch.search.sources import BUILTIN_SOURCES, Source
from hsearch.stats import StatsService
from hsearch.tenancy.factory import build_tenancy
from hsearch.tenancy.purge import PurgeHook, TenantPurge
from hsearch.tenancy.service import TenancyService
from hsearch.tenancy.sessions import OperatorSessions
from hsearch.types import JobStatus
from hsearch.vectorstore.factory import create_vector_store
from hsearch.vectorstore.protocol import VectorStore

__all__ = [
    "ComponentHealth",
    "Readiness",
    "Services",
    "build_chunker",
    "build_services",
    "keep_startup_heap",
    "reindexing",
]

logger = logging.getLogger(__name__)

HISTORY_EVERY_S = 15.0
"""How often the API offers the search history a snapshot (its own spacing)."""


@dataclass(frozen=True, slots=True)
class ComponentHealth:
    """One dependency as a readiness probe found it."""

    status: str
    """``ok``, ``error`` or ``timeout`` (no answer within ``api.readiness_timeout_s``)."""
    required: bool
    """Whether the process can serve without it (searches answer without the broker)."""
    latency_ms: float | None = None
    detail: str | None = None
    """The error, or what the component is (the encoder's fingerprint)."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, slots=True)
class Readiness:
    """What a readiness probe found: each dependency's answer and the encoder in use."""

    components: Mapping[str, ComponentHealth]
    """By dependency: ``database``, ``milvus`` (the vector store), ``encoder`` (loaded
    when the services were built; its fingerprint as detail), ``broker`` and, when the
    caches are on Redis, ``redis`` (optional: searches answer uncached without it)."""

    @property
    def ready(self) -> bool:
        """Every required component answers: the process can serve."""
        return all(c.ok for c in self.components.values() if c.required)

    @property
    def degraded(self) -> bool:
        """Ready, but an optional component does not answer (ingestion cannot queue)."""
        return self.ready and not all(c.ok for c in self.components.values())

    @property
    def status(self) -> str:
        if not self.ready:
            return "not_ready"
        return "degraded" if self.degraded else "ready"


@dataclass(frozen=True, kw_only=True)
class Services:
    """A process's resources and the services built on them.

    The adapters are typed by their protocols, so any implementation fits. Whoever
    built a ``Services`` closes it (:meth:`aclose` or :meth:`close`), which releases
    everything it holds, the injected parts included.
    """

    settings: Settings
    engine: Engine
    sessions: SessionFactory
    embedder: Embedder
    store: VectorStore
    reranker: Reranker | None
    statistics: LexicalStatistics
    search: SearchService
    queue_factory: Callable[[], JobQueue] = field(repr=False)
    derived: DerivedKinds = field(repr=False)
    """What is derived from a document (its chunks in the store, the tenant's lexical
    statistics and vocabulary, then ``extra_derived``): written by indexing, removed by
    deletes and tenant purges, rebuilt by ``hsearch reindex``, checked by ``hsearch
    reconcile`` (:mod:`hsearch.ingestion.derived`)."""
    llm: LLM | None = None
    """The model answers are written with (``llm.base_url``); ``None``: none configured."""
    answer_cache: AnswerCache | None = None
    """Where whole answers are kept (with the search caches; ``None`` when off)."""
    tenant_purge_hooks: list[PurgeHook] = field(default_factory=list, repr=False)
    """Called with a tenant's id once ``hsearch tenants delete`` has purged it from the
    database and the store: whatever caches the tenant's data elsewhere (Redis) appends
    a hook here that drops it (:mod:`hsearch.tenancy.purge`)."""
    cache: GuardedCache | None = None
    """The store of the result and query-embedding caches (Redis, or in-process when no
    Redis is configured); ``None`` when this process does not cache (workers)."""
    cache_counters: CacheCounters = field(default_factory=CacheCounters)
    """Hits, misses and errors of the caches, per cache (for metrics)."""
    generations: GenerationReader | None = None
    """The tenants' data versions (what caches and the in-memory graphs are kept on)."""
    graphs: GraphStore | None = None
    """The tenants' document graphs in memory (``None`` when the graph is off)."""
    concepts: ConceptStore | None = None
    """The tenants' concept indexes (the Level 1 index of lazy search), built in the
    background per data version (:mod:`hsearch.concepts.store`)."""
    query_batcher: QueryBatcher | None = None
    """Where searches' query encodings go (behind the query-embedding cache): concurrent
    queries share one model call (``encoder.query_batch_max``); ``None`` when off."""
    _indexers: list[IndexingService] = field(default_factory=list, repr=False, init=False)
    _closing: list[Callable[[], Awaitable[None]]] = field(
        default_factory=list, repr=False, init=False
    )

    @cached_property
    def queue(self) -> JobQueue:
        """Where ingest jobs are sent; made on first use, so a worker or a benchmark,
        which never enqueues, creates no second Celery app in its process."""
        return self.queue_factory()

    @cached_property
    def answers(self) -> AnswerService:
        """Answers with citations over this process's search and model."""
        per_day = self.settings.quotas.answer_tokens_per_day
        quota = None
        if per_day:
            url = self.settings.redis.url
            storage = None
            if url is not None:
                shared = redis_storage(
                    url.get_secret_value(), timeout_s=self.settings.ratelimit.redis_timeout_s
                )
                self._closing.append(shared.aclose)
                storage = shared.storage
            quota = TokenQuota(per_day=per_day, storage=storage)
        return AnswerService(
            retrieval=self.search.retrieval,
            llm=self.llm,
            settings=self.settings.llm,
            cache=self.answer_cache,
            quota=quota,
            lazy=self.lazy,
        )

    @cached_property
    def lazy(self) -> LazyGatherer | None:
        """Lazy graph search over this process's search, graph and model (``None``
        without the data versions it reads its graphs at)."""
        if self.generations is None:
            return None
        return LazyGatherer(
            retrieval=self.search.retrieval,
            store=self.store,
            generations=self.generations,
            settings=self.settings.lazy,
            graphs=self.graphs,
            concepts=None if self.concepts is None else StoreConcepts(self.concepts),
            llm=self.llm,
            llm_timeout_s=self.settings.llm.timeout_s,
            memory=TurnMemory(
                self.cache,
                generations=self.generations,
                namespace=self.settings.cache.namespace,
                ttl_s=self.settings.lazy.memory_ttl_s,
            )
            if self.cache is not None and self.settings.lazy.memory_ttl_s > 0
            else None,
        )

    @cached_property
    def tenancy(self) -> TenancyService:
        """Tenants and keys; one per process, since it holds the cache of verified keys."""
        return build_tenancy(self.settings, self.sessions)

    @cached_property
    def operator_sessions(self) -> OperatorSessions:
        """The built-in pages' operator sessions (signed cookies, checked per request)."""
        return OperatorSessions(self.tenancy, ttl_s=self.settings.ops.session_ttl_s)

    def indexing(self, *, on_finished: Callable[[], None] | None = None) -> IndexingService:
        """A new indexing service on these resources: what a worker runs per job;
        ``on_finished`` is called after it has committed the end of a job. Closing these
        resources closes it too (its waiting flush runs first)."""
        indexer = IndexingService(
            session_factory=self.sessions,
            embedder=self.embedder,
            store=self.store,
            derived=self.derived,
            chunker=build_chunker(self.settings, self.embedder),
            batch_documents=self.settings.ingest.batch_documents,
            batch_chunks=self.settings.ingest.batch_chunks,
            groups_per_commit=self.settings.ingest.groups_per_commit,
            flush_min_interval_s=self.settings.ingest.flush_min_interval_s,
            lease_s=self.settings.ingest.lease_s,
            batches_per_task=self.settings.ingest.batches_per_task,
            requeue=self.queue if self.settings.ingest.batches_per_task else None,
            on_finished=on_finished,
            collection_ready=True,  # build_services ensured it
        )
        self._indexers.append(indexer)
        return indexer

    def documents(self) -> DocumentService:
        """Read, list and delete a tenant's documents."""
        return DocumentService(
            self.sessions, store=self.store, statistics=self.statistics, derived=self.derived
        )

    def tenant_purge(self) -> TenantPurge:
        """Deletes a tenant with its rows, chunks, statistics and cached data (the
        search caches' entries when they are on Redis, from any process)."""
        hooks = list(self.tenant_purge_hooks)
        if self.settings.cache.enabled and self.settings.redis.url is not None:
            hooks.append(_CachedSearches(self.settings))
        return TenantPurge(
            self.sessions,
            store=self.store,
            derived=self.derived,
            tenancy=self.tenancy,
            hooks=hooks,
        )

    def reconciler(self) -> Reconciler:
        """Finds and repairs drift between the documents and what is derived from them
        (every registered kind: the chunks in the store among them)."""
        return Reconciler(
            self.sessions,
            store=self.store,
            queue=self.queue,
            settings=self.settings.ingest,
            derived=self.derived,
        )

    def relinker(self) -> Relinker:
        """Finds a tenant's text links again (``hsearch links relink``)."""
        return Relinker(self.sessions)

    def sweeper(self) -> JobSweeper:
        """What re-sends abandoned jobs (expired leases, jobs never sent) to the queue,
        purges old jobs and delivers webhooks (when a signing secret is set)."""
        ingest = self.settings.ingest
        webhooks = self.settings.webhooks
        return JobSweeper(
            self.sessions,
            self.queue,
            lease_s=ingest.lease_s,
            unsent_after_s=ingest.unsent_after_s,
            retention_s=ingest.job_retention_days * 86400,
            webhooks=(
                WebhookSender(self.sessions, settings=webhooks)
                if webhooks.secret is not None
                else None
            ),
        )

    async def check_readiness(self) -> Readiness:
        """Probe the metadata database, the vector store and the broker together, each
        in a worker thread (the calls block) under ``api.readiness_timeout_s``; a probe
        that fails or does not answer in time is reported, never raised, so readiness
        always answers on time (a thread left behind finishes on its own)."""
        timeout = self.settings.api.readiness_timeout_s
        probes: dict[str, tuple[Callable[[], None], bool]] = {
            "database": (partial(ping_database, self.engine), True),
            "milvus": (self.store.ping, True),
            "broker": (partial(self.queue.ping, timeout_s=timeout), False),
        }
        found: dict[str, ComponentHealth] = {
            "encoder": ComponentHealth(
                status="ok", required=True, detail=self.embedder.info.fingerprint
            )
        }

        async def probe(name: str, call: Callable[[], None], required: bool) -> None:
            started = time.perf_counter()
            status = "timeout"
            failure: str | None = f"no answer within {timeout} s"
            with anyio.move_on_after(timeout):
                try:
                    await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
                    status, failure = "ok", None
                except Exception as exc:  # readiness reports, it never raises
                    status, failure = "error", f"{type(exc).__name__}: {exc}"
            latency = round((time.perf_counter() - started) * 1000, 1)
            found[name] = ComponentHealth(
                status=status, required=required, latency_ms=latency, detail=failure
            )
            if failure is not None:
                logger.warning("readiness.failed component=%s %s", name, failure)

        async def probe_cache(cache: GuardedCache) -> None:
            # Searches answer without it (the caches are bypassed): never required.
            started = time.perf_counter()
            status = "timeout"
            failure: str | None = f"no answer within {timeout} s"
            with anyio.move_on_after(timeout):
                try:
                    await cache.backend.ping()
                    status, failure = "ok", None
                except Exception as exc:  # readiness reports, it never raises
                    status, failure = "error", f"{type(exc).__name__}: {exc}"
            latency = round((time.perf_counter() - started) * 1000, 1)
            found["redis"] = ComponentHealth(
                status=status, required=False, latency_ms=latency, detail=failure
            )

        async def probe_model(llm: LLM) -> None:
            # Answers degrade without it (passages, answer null): never required.
            started = time.perf_counter()
            status = "timeout"
            failure: str | None = f"no answer within {timeout} s"
            with anyio.move_on_after(timeout):
                try:
                    await llm.ping(timeout_s=timeout)
                    status, failure = "ok", llm.model
                except Exception as exc:  # readiness reports, it never raises
                    status, failure = "error", f"{type(exc).__name__}: {exc}"
            latency = round((time.perf_counter() - started) * 1000, 1)
            found["model"] = ComponentHealth(
                status=status, required=False, latency_ms=latency, detail=failure
            )

        async with anyio.create_task_group() as group:
            for name, (call, required) in probes.items():
                group.start_soon(probe, name, call, required)
            if self.cache is not None and self.cache.shared:
                group.start_soon(probe_cache, self.cache)
            if self.llm is not None:
                group.start_soon(probe_model, self.llm)
        order = ("database", "milvus", "encoder", "broker", "redis", "model")
        return Readiness(components={name: found[name] for name in order if name in found})

    @cached_property
    def search_history(self) -> SampleHistory:
        """Snapshots of the search samples, shared by the processes (the stats window)."""
        return SampleHistory(multiprocess_dir(), window_s=self.settings.metrics.stats_window_s)

    def stats(self) -> StatsService:
        """The stats API's figures (per tenant, and the searches' from the metrics)."""
        return StatsService(
            self.sessions,
            tenant_allow_list=self.settings.metrics.tenant_allow_list,
            history=self.search_history,
        )

    async def scrape_figures(self) -> ScrapeFigures:
        """What ``/metrics`` reads when scraped, each part under its timeout and all at
        once: dependency health (the readiness probe), jobs by status (the metadata
        database) and queue depth (the broker). A part that fails or does not answer in
        ``metrics.scrape_timeout_s`` is left out of that scrape (its metric is absent,
        never wrong), so a scrape always answers."""
        timeout = self.settings.metrics.scrape_timeout_s
        found: dict[str, Any] = {}

        async def readiness() -> None:
            found["readiness"] = await self.check_readiness()

        async def within(name: str, call: Callable[[], Any]) -> None:
            with anyio.move_on_after(timeout):
                try:
                    found[name] = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
                except Exception as exc:  # a scrape reports what it can, it never raises
                    logger.warning("metrics.scrape.failed part=%s %s", name, exc)
            if name not in found:
                logger.warning("metrics.scrape.timeout part=%s after %s s", name, timeout)

        async with anyio.create_task_group() as group:
            group.start_soon(readiness)
            group.start_soon(within, "jobs", self._job_totals)
            group.start_soon(within, "depths", partial(self.queue.depths, timeout_s=timeout))
        ready: Readiness = found["readiness"]
        jobs: dict[JobStatus, int] | None = found.get("jobs")
        return ScrapeFigures(
            version=__version__,
            encoder=self.embedder.info.fingerprint,
            dependencies={name: c.ok for name, c in ready.components.items()},
            jobs=None if jobs is None else {s.value: jobs.get(s, 0) for s in JobStatus},
            queue_depth=found.get("depths"),
        )

    async def exposition(self) -> bytes:
        """The ``/metrics`` body: every process's recorded samples (multiprocess mode)
        and the figures read now (:meth:`scrape_figures`)."""
        figures = await self.scrape_figures()
        return await anyio.to_thread.run_sync(self._render, figures)

    def record_search_history(self) -> None:
        """Offer a snapshot of the search samples to the history (kept when the newest
        is old enough): the API does it on a timer, so ``/ops`` opens on the recent past
        even when nothing scrapes ``/metrics`` (blocking: run it off the loop)."""
        self.search_history.record(search_samples(aggregated_families()))

    async def keep_search_history(
        self,
        *,
        every_s: float = HISTORY_EVERY_S,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        """:meth:`record_search_history` every ``every_s``, until cancelled; a failure
        is logged and the next round tries again."""
        while True:
            await sleep(every_s)
            try:
                await anyio.to_thread.run_sync(self.record_search_history)
            except Exception as exc:  # a snapshot missed is no reason to stop serving
                logger.warning("metrics.history.failed %s: %s", type(exc).__name__, exc)

    def _render(self, figures: ScrapeFigures) -> bytes:
        # Each scrape also offers a snapshot for the stats API's recent window.
        self.search_history.record(search_samples(aggregated_families()))
        return render(figures)

    async def dashboard(self) -> DashboardFigures:
        """What the ``/ops`` page charts: every process's recorded totals, the figures a
        scrape reads now (:meth:`scrape_figures`) and the snapshots of the search samples
        kept for the stats window (the page draws the last minutes on opening)."""
        scrape = await self.scrape_figures()
        families = await anyio.to_thread.run_sync(aggregated_families)
        at = time.time()
        history = await anyio.to_thread.run_sync(self.search_history.snapshots)
        # A poll offers a snapshot too, as a scrape does: while a page is open, the
        # history is kept even with no Prometheus scraping.
        samples = search_samples(families)
        await anyio.to_thread.run_sync(self.search_history.record, samples)
        return dashboard_figures(families, scrape, at=at, history=past_readings(history, before=at))

    def _job_totals(self) -> dict[JobStatus, int]:
        with self.sessions() as session:
            return JobRepository(session).status_totals_all_tenants()

    async def aclose(self) -> None:
        """Release the search legs' connections (on the event loop that ran them), then
        everything else (:meth:`close`)."""
        await self.store.aclose()
        if self.cache is not None:
            await self.cache.backend.aclose()
        if self.llm is not None:
            await self.llm.aclose()
        for close in self._closing:
            await close()
        self.close()

    def close(self) -> None:
        if self.query_batcher is not None:
            self.query_batcher.close()
        for indexer in self._indexers:
            indexer.close()
        self.store.close()
        self.engine.dispose()


def build_services(
    settings: Settings,
    *,
    store: VectorStore | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    queue: JobQueue | None = None,
    with_reranker: bool = False,
    cache: CacheBackend | None = None,
    with_cache: bool = False,
    load_encoder: bool = True,
    extra_sources: Sequence[Source] = (),
    extra_derived: Sequence[DerivedKind] = (),
    llm: LLM | None = None,
) -> Services:
    """Connect to the metadata database and the vector store, load the encoder, check
    that the collection exists and was built with that encoder, and build the services.

    Without ``load_encoder`` (operator commands that only read and delete chunks:
    ``hsearch reconcile``, ``hsearch tenants delete``) the encoder is described from its
    files instead of loaded (:func:`describe_encoder`: milliseconds, against seconds of
    loading torch and the weights); the collection is checked against it all the same,
    and anything that would encode raises :class:`ConfigurationError`.

    Each of ``store``, ``embedder``, ``reranker`` and ``queue`` replaces what the settings
    would build. Searches run the dense and sparse legs over the store, then
    ``extra_sources`` (:mod:`hsearch.search.sources`). What is derived from a document
    is the standard kinds and ``extra_derived`` after them
    (:mod:`hsearch.ingestion.derived`). Without ``reranker``, one is
    loaded only ``with_reranker`` (the API; the worker and the benchmark never rerank)
    and only when a model path is configured.
    The search caches (result and query embedding) are built ``with_cache`` (the API;
    a benchmark measures searches, not cache hits) unless ``cache.enabled`` is false, on
    ``cache`` if given, else on Redis (``redis.url``) or in this process.

    Raises:
        ConfigurationError: A model path in the settings is not usable.
        EncoderMismatchError: The collection was built with another encoder.
        BackendError: The vector store cannot be reached.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    instruments.configure(tenant_allow_list=settings.metrics.tenant_allow_list)
    engine = create_db_engine(
        settings.database_url, pool_size=settings.database.pool_size, echo=settings.database.echo
    )
    if embedder is None:
        embedder = (
            create_embedder(settings.encoder)
            if load_encoder
            else UnloadedEmbedder(describe_encoder(settings.encoder))
        )
    if store is None:
        store = create_vector_store(settings.milvus, uri=settings.milvus_uri)
    store.ensure_collection(embedder.info)
    if reranker is None and with_reranker:
        reranker = create_reranker(
            settings.rerank.model_path,
            device=settings.encoder.device,
            batch_size=settings.rerank.batch_size,
            max_length=settings.rerank.max_length,
        )
    sessions = create_session_factory(engine)
    statistics = LexicalStatistics(sessions, stale_s=settings.database.stale_s)
    counters = CacheCounters()
    # Every cache lookup in the metrics (hsearch_cache_requests_total).
    counters.subscribe(lambda cache, outcome: instruments.record_cache(cache.value, outcome.value))
    # The tenants' data versions, on which results and counts are reused.
    generations = GenerationReader(
        sessions, ttl_s=settings.cache.generation_ttl_s, stale_s=settings.database.stale_s
    )
    guarded: GuardedCache | None = None
    results: ResultCache | None = None
    answer_cache: AnswerCache | None = None
    snapshots: PageSnapshots | None = None
    # The encoder thread starts with the first search: a worker, which never searches,
    # starts none.
    batcher = (
        QueryBatcher(
            embedder,
            window_s=settings.encoder.query_batch_window_ms / 1000,
            max_batch=settings.encoder.query_batch_max,
        )
        if settings.encoder.query_batch_max > 1
        else None
    )
    queries = QueryEncoder(embedder, batcher=batcher)
    if (with_cache or cache is not None) and settings.cache.enabled:
        guarded = create_cache(settings.redis, settings.cache, backend=cache)
        queries = QueryEncoder(
            embedder,
            store=guarded,
            namespace=settings.cache.namespace,
            lru_size=settings.cache.embedding_lru_size,
            ttl_s=settings.cache.embedding_ttl_s,
            counters=counters,
            batcher=batcher,
        )
        if settings.cache.snapshot_ttl_s > 0:
            snapshots = PageSnapshots(
                guarded,
                namespace=settings.cache.namespace,
                ttl_s=settings.cache.snapshot_ttl_s,
                max_bytes=settings.cache.snapshot_max_bytes,
            )
        if settings.cache.result_ttl_s > 0:
            answer_cache = AnswerCache(
                guarded,
                generations=generations,
                namespace=settings.cache.namespace,
                ttl_s=settings.cache.result_ttl_s,
                settle_s=settings.cache.settle_s,
                identity={
                    **_server_identity(settings, embedder, reranker),
                    "llm": settings.llm.model_dump(mode="json", exclude={"api_key"}),
                    "citations": CitationSettings(),
                },
            )
            results = ResultCache(
                guarded,
                generations=generations,
                settings=settings.cache,
                identity=_server_identity(settings, embedder, reranker),
                counters=counters,
            )
    graphs: GraphStore | None = None
    sources = list(extra_sources)
    if settings.graph.enabled:
        graphs = GraphStore(
            sessions,
            max_links=settings.graph.max_links,
            cached_tenants=settings.graph.cached_tenants,
        )
        defaults = GraphParams(
            scoring=GraphScoring(settings.graph.scoring),
            depth=settings.graph.depth,
            seeds=settings.graph.seeds,
        )
        sources.insert(
            0,
            GraphSource(
                graphs, generations, defaults=defaults, default_weight=settings.graph.weight
            ),
        )
    search = SearchService(
        embedder=embedder,
        store=store,
        statistics=statistics,
        settings=settings.search,
        reranker=reranker,
        rerank_depth=settings.rerank.depth,
        results=results,
        queries=queries,
        snapshots=snapshots,
        generations=generations,
        settle_s=settings.cache.settle_s,
        extra_sources=sources,
        expander=QueryExpander(sessions),
        linked=LinkedPages(sessions),
    )
    services = Services(
        settings=settings,
        engine=engine,
        sessions=sessions,
        embedder=embedder,
        store=store,
        reranker=reranker,
        statistics=statistics,
        search=search,
        queue_factory=_queue_factory(settings, queue),
        derived=standard_kinds(
            store=store,
            statistics=statistics,
            encoder=embedder.info,
            concepts=settings.concepts,
            chunk_texts=chunk_texts(partial(build_chunker, settings, embedder)),
        ).including(extra_derived),
        concepts=ConceptStore(
            sessions,
            params=index_params(settings.concepts),
            cached_tenants=settings.concepts.cached_tenants,
            generations=generations,
        ),
        cache=guarded,
        cache_counters=counters,
        query_batcher=batcher,
        llm=llm if llm is not None else create_llm(settings.llm),
        answer_cache=answer_cache,
        generations=generations,
        graphs=graphs,
    )
    if graphs is not None:
        services.tenant_purge_hooks.append(graphs.forget)
    if services.concepts is not None:
        services.tenant_purge_hooks.append(services.concepts.forget)
    return services


def index_params(settings: ConceptSettings) -> IndexParams:
    """How tenants' concept graphs and communities are built, from the settings."""
    return IndexParams(
        min_chunks=settings.min_chunks,
        max_chunk_share=settings.max_chunk_share,
        edges_per_chunk=settings.edges_per_chunk,
        max_community_size=settings.max_community_size,
        levels=settings.levels,
        resolution=settings.resolution,
        seed=settings.seed,
        chunks_per_community=settings.chunks_per_community,
    )


def chunk_texts(chunker: Callable[[], Chunker]) -> Callable[[str, str, str], list[str]]:
    """A document's chunks' texts as the indexer cuts them, from ``(content, title,
    lang)`` (reconcile extracts missing concepts from them); ``chunker`` is made on
    first use (a process that never encodes never loads the encoder's tokenizer)."""
    made: list[Chunker] = []

    def texts(content: str, title: str, lang: str) -> list[str]:
        if not made:
            made.append(chunker())
        return [c.text for c in made[0].chunk(content, title=title, lang=lang)]

    return texts


def source_names(settings: Settings) -> tuple[str, ...]:
    """The legs :func:`build_services` registers on ``settings`` (before any extra
    source a caller adds), in order: the store's, then the graph leg when enabled."""
    return (*BUILTIN_SOURCES, *((GRAPH_LEG,) if settings.graph.enabled else ()))


def keep_startup_heap() -> None:
    """Take what a long-lived process holds once it is built (its libraries, the
    encoder's model, its services) out of the garbage collector's full collections.

    Python's full collection walks every object it tracks. A worker or an API process
    with the offline encoder loaded tracks about 600,000, and a full collection of them
    took 350 ms here: a pause of every thread of the process (a search, a job's write)
    each time indexing or serving has allocated enough to trigger one. What is built at
    start lives as long as the process, so it is collected once and frozen
    (:func:`gc.freeze`); full collections then walk only what was allocated since
    (docs/history/ingest-throughput.md, `4be7c00`, "Full collections"). Called by the
    worker once its pool process is built and by the API once its services are."""
    gc.collect()
    gc.freeze()


def _server_identity(
    settings: Settings, embedder: Embedder, reranker: Reranker | None
) -> dict[str, object]:
    """What, besides the plan, decides a search's result on this server: a cached
    result is shared only by processes that agree on all of it."""
    return {
        "encoder": embedder.info.fingerprint,
        "search": settings.search.model_dump(mode="json"),
        "graph": settings.graph.model_dump(mode="json"),
        "rerank": settings.rerank.model_dump(mode="json"),
        "reranker": None if reranker is None else type(reranker).__qualname__,
    }


@contextmanager
def reindexing(
    settings: Settings,
    *,
    store: VectorStore | None = None,
    embedder: Embedder | None = None,
    extra_derived: Sequence[DerivedKind] = (),
) -> Iterator[ReindexService]:
    """The rebuild service (``hsearch reindex``) on the configured database, vector store
    and encoder, rebuilding the standard derived kinds and ``extra_derived`` (as
    :func:`build_services` registers them); everything it opened is closed on exit, the
    injected parts included.

    Unlike :func:`build_services` it does not check the live collection's encoder: a
    collection built with another encoder is what it is for.
    """
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_db_engine(settings.database_url, pool_size=settings.database.pool_size)
    try:
        if embedder is None:
            embedder = create_embedder(settings.encoder)
        if store is None:
            store = create_vector_store(settings.milvus, uri=settings.milvus_uri)
        sessions = create_session_factory(engine)
        try:
            chunker = build_chunker(settings, embedder)
            yield ReindexService(
                session_factory=sessions,
                embedder=embedder,
                store=store,
                chunker=chunker,
                derived=standard_kinds(
                    store=store,
                    statistics=LexicalStatistics(sessions),
                    encoder=embedder.info,
                    concepts=settings.concepts,
                    chunk_texts=chunk_texts(lambda: chunker),
                ).including(extra_derived),
            )
        finally:
            store.close()
    finally:
        engine.dispose()


@contextmanager
def relinking(settings: Settings) -> Iterator[Relinker]:
    """The relink (``hsearch links relink``) on the configured metadata database alone
    (links need no encoder and no vector store); its engine is disposed of on exit.
    Raises ConfigurationError when that database does not exist or was never migrated."""
    url = settings.database_url
    with open_migrated_engine(url, pool_size=settings.database.pool_size) as engine:
        yield Relinker(create_session_factory(engine))


def build_chunker(settings: Settings, embedder: Embedder) -> Chunker:
    """How the indexer and the rebuild cut documents: in ``embedder``'s tokens, at the
    configured sizes (``ingest.chunk_max_tokens``, capped at the encoder's window)."""
    return Chunker(
        embedder.tokenizer,
        max_tokens=settings.ingest.chunk_max_tokens,
        overlap_tokens=settings.ingest.chunk_overlap_tokens,
    )


def _queue_factory(settings: Settings, queue: JobQueue | None) -> Callable[[], JobQueue]:
    if queue is not None:
        return lambda: queue
    visibility = 2 * settings.ingest.lease_s
    return lambda: CeleryJobQueue(
        create_celery(
            settings.broker_url,
            name="hsearch-api",
            visibility_timeout_s=visibility,
            heartbeat_s=settings.broker.heartbeat_s,
            socket_timeout_s=settings.broker.socket_timeout_s,
        )
    )


class _CachedSearches:
    """A purge hook: drops the tenant's cached search results and page snapshots from
    Redis, from whatever process deletes the tenant (a failure is reported by the
    purge). Runs in a thread of its own: the caller may be inside an event loop."""

    __qualname__ = "search caches (Redis)"

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def __call__(self, tenant_id: str) -> None:
        with ThreadPoolExecutor(max_workers=1) as thread:
            deleted = thread.submit(anyio.run, self._purge, tenant_id).result()
        logger.info("tenant.purge.cache tenant=%s entries=%d", tenant_id, deleted)

    async def _purge(self, tenant_id: str) -> int:
        backend = create_cache(self._settings.redis, self._settings.cache).backend
        try:
            return await purge_tenant(
                backend, namespace=self._settings.cache.namespace, tenant_id=tenant_id
            )
        finally:
            await backend.aclose()
