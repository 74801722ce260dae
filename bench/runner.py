"""The relevance benchmark's runner: one dataset through the product's own code, in a
fresh, throw-away stack.

* a temporary data directory with an SQLite metadata database migrated by Alembic
  (:func:`hsearch.db.migrate.upgrade_database`) and a Milvus Lite gRPC server process on
  a free port (:func:`hsearch.local.processes.start_milvus_lite`; stopped at the end, also on
  Ctrl-C or SIGTERM);
* :func:`hsearch.runtime.build_services` on settings built here (unique collection,
  the chosen encoder); every other knob is the product default or ``HSEARCH_*`` from
  the environment, so a candidate setting can be measured without code changes;
* ingestion: :meth:`hsearch.ingestion.api.jobs.JobService.submit` in jobs of 500 documents,
  each in its own committed unit of work, then :meth:`IndexingService.process_job` per
  job: the code the Celery worker runs (the broker hop is left out: the jobs go to an
  in-process queue); then the collection is flushed
  (:meth:`MilvusVectorStore.flush`) unless asked not to. A set with ``edges.tsv`` has its
  links submitted with their source documents (``DocumentInput.links``);
* search: :meth:`hsearch.search.service.SearchService.search` per query and mode
  (semantic, keyword, hybrid) with ``top_k=100`` (for recall@100) at the candidate depth
  a default request gets (:func:`default_candidates`), so nDCG@10 measures what a
  default search returns; queries are issued one after the other. On a set with links,
  ``hybrid`` is the default hybrid request plus the graph leg (:func:`graph_request`)
  and ``hybrid_no_graph`` the default hybrid request (:func:`mode_requests`).
  Hits are chunks: they are mapped to documents by ``external_id`` and deduplicated
  (first occurrence wins) before scoring (:mod:`bench.metrics`).

:func:`prepared_stack` is the stack with the set ingested, for a caller that searches it
in its own ways (``bench.graph_sweep``); :func:`run_dataset` is the whole run.

Progress goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TextIO

import httpx
from pydantic import SecretStr

from bench.datasets import DEFAULT_SEED, Dataset, load_dataset, select_queries
from bench.interrupt import progress
from bench.metrics import evaluate_ranking
from bench.report import (
    DEFAULT_GRAPH_SCORING,
    DEFAULT_GRAPH_SEEDS,
    DEFAULT_GRAPH_WEIGHT,
    HYBRID_NO_GRAPH,
    MODES,
    SINGLE_LEG_MODES,
    TOP_K,
    DatasetRun,
    ModeRun,
)
from hsearch.config import DatabaseSettings, EncoderKind, Settings
from hsearch.db.migrate import upgrade_database
from hsearch.errors import HsearchError
from hsearch.graph.links import Link
from hsearch.graph.source import GRAPH_LEG
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.local.processes import Child, start_milvus_lite
from hsearch.runtime import Services, build_services
from hsearch.search.models import SearchQuery, SearchResult
from hsearch.types import FusionDefault, FusionMethod, Leg, SearchMode

DOCUMENTS_PER_JOB = 500
TENANT = "bench"
MAX_LOGGED_FAILURES = 3  # per mode; the total is in the result's failed_searches
ABORT_AFTER_FAILURES = 20  # every search of a mode failed so far: a broken stack, stop
MILVUS_STOP_SECONDS = 20.0


@dataclass(frozen=True)
class GraphOptions:
    """How ``hybrid`` asks for the graph leg on a set with links: its weight and its
    parameters (``leg_params["graph"]``; one left ``None`` is the server's default). The
    defaults are the benchmark's documented request (:data:`DEFAULT_GRAPH_WEIGHT`)."""

    weight: float = DEFAULT_GRAPH_WEIGHT
    scoring: str | None = DEFAULT_GRAPH_SCORING
    depth: int | None = None
    seeds: int | None = DEFAULT_GRAPH_SEEDS
    include_seeds: bool | None = None

    def leg_params(self) -> dict[str, Any]:
        """The parameters set here, as ``leg_params["graph"]`` takes them."""
        params = {
            "scoring": self.scoring,
            "depth": self.depth,
            "seeds": self.seeds,
            "include_seeds": self.include_seeds,
        }
        return {name: value for name, value in params.items() if value is not None}

    def describe(self) -> dict[str, Any]:
        """For the result JSON (``settings.graph``) and tables."""
        return {"weight": self.weight, **self.leg_params()}


def resolved_graph(graph: GraphOptions, settings: Settings) -> GraphOptions:
    """``graph`` with each parameter it leaves unset at the server's default
    (``settings.graph``): what the graph leg ran with, for the result."""
    return replace(
        graph,
        scoring=graph.scoring or settings.graph.scoring,
        depth=settings.graph.depth if graph.depth is None else graph.depth,
        seeds=settings.graph.seeds if graph.seeds is None else graph.seeds,
    )


@dataclass(frozen=True)
class ModeRequest:
    """How one reported mode asks the search service: a search mode, with explicit leg
    weights and per-leg parameters, or without (the server's defaults)."""

    mode: SearchMode
    weights: Mapping[str, float] | None = None
    leg_params: Mapping[str, Mapping[str, Any]] | None = None

    def body(self, *, text: str, candidates: int, fusion: FusionMethod | None) -> dict[str, Any]:
        """:meth:`query` as the JSON body of ``POST /v1/search``."""
        body: dict[str, Any] = {
            "query": text,
            "mode": self.mode.value,
            "top_k": TOP_K,
            "candidates": candidates,
        }
        if fusion is not None:
            body["fusion"] = fusion.value
        if self.weights is not None:
            body["weights"] = dict(self.weights)
        for leg, params in (self.leg_params or {}).items():
            body[leg] = dict(params)
        return body

    def query(self, *, text: str, candidates: int, fusion: FusionMethod | None) -> SearchQuery:
        """The search of one query in this mode (``top_k`` :data:`TOP_K`)."""
        return SearchQuery(
            tenant_id=TENANT,
            query=text,
            top_k=TOP_K,
            mode=self.mode,
            candidates=candidates,
            fusion=fusion,
            weights=None if self.weights is None else dict(self.weights),
            leg_params=(
                None
                if self.leg_params is None
                else {leg: dict(params) for leg, params in self.leg_params.items()}
            ),
        )


def graph_request(fusion: FusionDefault, graph: GraphOptions) -> ModeRequest:
    """The default hybrid request plus the graph leg at ``graph.weight``.

    A request naming weights replaces the defaults whole (a leg it does not name gets
    0), so it names the dense and sparse weights a default request would get
    (``fusion``: :meth:`SearchSettings.resolve_fusion`, as the planner resolves them)
    and adds the graph leg's.
    """
    weights = {leg.value: weight for leg, weight in fusion.leg_weights().items()}
    weights[GRAPH_LEG] = graph.weight
    return ModeRequest(SearchMode.HYBRID, weights, {GRAPH_LEG: graph.leg_params()})


def no_graph_request(fusion: FusionDefault, *, server_graph_weight: float) -> ModeRequest:
    """The default hybrid request, without the graph leg: the default request itself
    when the server gives the graph leg no weight by default (``graph.weight`` 0, the
    product's default), else the default weights with the graph leg's at 0."""
    if server_graph_weight == 0:
        return ModeRequest(SearchMode.HYBRID)
    weights = {leg.value: weight for leg, weight in fusion.leg_weights().items()}
    return ModeRequest(SearchMode.HYBRID, weights | {GRAPH_LEG: 0.0})


def dataset_modes(requested: Sequence[str], *, has_links: bool) -> tuple[str, ...]:
    """The modes a set is measured in: ``requested``, and on a set with links
    ``hybrid_no_graph`` right after ``hybrid`` (the graph leg's baseline)."""
    modes = list(requested)
    if has_links and "hybrid" in modes:
        modes.insert(modes.index("hybrid") + 1, HYBRID_NO_GRAPH)
    return tuple(modes)


def mode_requests(
    modes: Sequence[str],
    *,
    has_links: bool,
    fusion: FusionDefault,
    graph: GraphOptions,
    server_graph_weight: float = 0.0,
) -> dict[str, ModeRequest]:
    """How each of ``modes`` (:func:`dataset_modes`) is asked: the default request of
    its search mode, except ``hybrid`` on a set with links (:func:`graph_request`), whose
    default request is then ``hybrid_no_graph``'s (:func:`no_graph_request`;
    ``server_graph_weight``: the server's ``graph.weight``)."""
    requests: dict[str, ModeRequest] = {}
    for mode in modes:
        if mode == HYBRID_NO_GRAPH:
            requests[mode] = no_graph_request(fusion, server_graph_weight=server_graph_weight)
        elif mode == "hybrid" and has_links:
            requests[mode] = graph_request(fusion, graph)
        else:
            requests[mode] = ModeRequest(SearchMode(mode))
    return requests


@dataclass
class Options:
    encoder: str = "offline"
    bge_m3_path: Path | None = None
    max_queries: int | None = None
    seed: int = DEFAULT_SEED
    modes: tuple[str, ...] = MODES
    query_prefix: str | None = None
    by_prefix: bool = False
    keep: bool = False
    flush: bool = True
    fusion: str | None = None
    save_legs: TextIO | None = None
    graph: GraphOptions = field(default_factory=GraphOptions)


def build_settings(data_dir: Path, milvus_uri: str, options: Options) -> Settings:
    """Settings for a throw-away stack in ``data_dir``; every knob not set here keeps its
    default or its ``HSEARCH_*`` environment value (no ``.env`` file is read).

    Recording legs (``options.save_legs``) turns the keyword-coverage reading on, unless
    the environment sets it: the keyword mode's searches then read the coverage the
    replay needs (``search.keyword_coverage``; a hybrid mode of the same run reads it
    too). It is read where the resolved fusion is ``adaptive`` only (BGE-M3's ``sum``
    reads none)."""
    base = Settings(_env_file=None)
    s = base.search
    recording = options.save_legs is not None and s.keyword_coverage is None
    search = s.model_copy(
        update={
            "max_top_k": max(s.max_top_k, TOP_K),
            "max_candidates": max(s.max_candidates, s.candidates, TOP_K),
            "keyword_coverage": True if recording else s.keyword_coverage,
        }
    )
    return base.model_copy(
        update={
            "data_dir": data_dir,
            "database": DatabaseSettings(
                url=SecretStr(f"sqlite:///{(data_dir / 'hsearch.sqlite').resolve()}")
            ),
            "milvus": base.milvus.model_copy(
                update={"uri": milvus_uri, "collection": f"bench_{uuid.uuid4().hex[:12]}"}
            ),
            "encoder": base.encoder.model_copy(
                update={"kind": EncoderKind(options.encoder), "bge_m3_path": options.bge_m3_path}
            ),
            "search": search,
            # The benchmark indexes each job itself, whole (no queue to take turns in).
            "ingest": base.ingest.model_copy(update={"batches_per_task": 0}),
            # Searched through the HTTP API (bench.app_client), a sweep sends thousands of
            # searches a minute with one key.
            "ratelimit": base.ratelimit.model_copy(update={"enabled": False}),
        }
    )


def ingest(
    resources: Services,
    corpus: Sequence[Mapping[str, str]],
    links: Mapping[str, tuple[Link, ...]] | None = None,
) -> dict[str, Any]:
    """Submit the corpus in jobs of DOCUMENTS_PER_JOB and index them job by job; each
    document carries its ``links`` (by external id), if any."""
    settings = resources.settings
    links = links or {}
    started = time.perf_counter()
    queue = InMemoryJobQueue()
    for start in range(0, len(corpus), DOCUMENTS_PER_JOB):
        documents = [
            DocumentInput(
                external_id=d["_id"],
                title=d["title"],
                text=d["text"],
                links=links.get(d["_id"], ()),
            )
            for d in corpus[start : start + DOCUMENTS_PER_JOB]
        ]
        with unit_of_work(resources.sessions, queue=queue) as uow:
            JobService(uow, settings=settings.ingest).submit(tenant_id=TENANT, documents=documents)
    job_ids = queue.sent
    indexing = resources.indexing()
    indexed = failed = 0
    for n, job_id in enumerate(job_ids, 1):
        status = indexing.process_job(job_id)
        with unit_of_work(resources.sessions, queue=queue) as uow:
            view = JobService(uow, settings=settings.ingest).get(job_id, tenant_id=TENANT)
        indexed += view.indexed
        failed += view.failed
        for error in view.errors[:5]:
            progress(f"  failed document {error.external_id!r}: {error.error}")
        elapsed = time.perf_counter() - started
        done = indexed + failed
        progress(
            f"  ingest job {n}/{len(job_ids)} {status}: {done}/{len(corpus)} documents, "
            f"{done / elapsed:.1f} docs/s"
        )
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "indexed": indexed,
        "failed": failed,
        "chunks": resources.store.count(tenant_id=TENANT),
    }


def leg_candidates(result: SearchResult) -> list[list[Any]]:
    """A single-leg search's hits as ``[chunk_id, external_id, raw leg score]``.

    With ``top_k`` equal to the candidate depth, a single-leg mode returns the leg's
    whole candidate list in the leg's own order, with the raw scores in the explanation:
    exactly what the hybrid mode fuses.
    """
    rows: list[list[Any]] = []
    for hit in result.hits:
        e = hit.explanation
        dense = e.score_of("dense")
        score = dense if dense is not None else e.score_of("sparse")
        rows.append([hit.chunk_id, hit.external_id, score])
    return rows


def leg_record(
    dataset: Dataset,
    qid: str,
    legs: Mapping[str, list[list[Any]]],
    *,
    candidates: int,
    dense_scripts: Collection[str] | None,
    encoder: str | None = None,
    keyword_coverage: float | None = None,
) -> dict[str, Any]:
    """One query's line of a ``--save-legs`` file: what the service's weight rule and
    fusion see (query text, the legs, the encoder's dense scripts and kind, whose fusion
    default the replay applies, the keyword leg's coverage of the query) and the
    judgements."""
    return {
        "dataset": dataset.name,
        "query_id": qid,
        "query": dataset.queries[qid],
        "qrels": dataset.qrels[qid],
        "candidates": candidates,
        "dense_scripts": None if dense_scripts is None else sorted(dense_scripts),
        "encoder": encoder,
        "keyword_coverage": keyword_coverage,
        "legs": legs,
    }


def default_candidates(settings: Settings) -> int:
    """The candidate depth per leg of a default request (the window, ``candidates``).

    The benchmark asks for 100 hits (for recall@100) at the depth a default request
    gets, so nDCG@10 measures what a default search returns.
    """
    return max(TOP_K, settings.search.candidates)


@dataclass(frozen=True)
class Searched:
    """What the benchmark reads of one search: the hits' external ids, in order."""

    external_ids: list[str]
    degraded: bool
    method: str
    result: SearchResult | None = None
    """The service's result (in process only): the single-leg modes' candidates."""


async def _search(
    resources: Services,
    api: httpx.AsyncClient | None,
    request: ModeRequest,
    *,
    text: str,
    candidates: int,
    fusion: FusionMethod | None,
) -> Searched:
    """One search, in process or through ``api``; raises :class:`HsearchError` (an
    HTTP error: its status and body)."""
    if api is None:
        result = await resources.search.search(
            request.query(text=text, candidates=candidates, fusion=fusion)
        )
        return Searched(
            [h.external_id for h in result.hits], bool(result.degraded), result.method, result
        )
    resp = await api.post(
        "/v1/search", json=request.body(text=text, candidates=candidates, fusion=fusion)
    )
    if resp.status_code != 200:
        msg = f"HTTP {resp.status_code}: {resp.text[:300]}"
        raise HsearchError(msg)
    body = resp.json()
    return Searched(
        [h["external_id"] for h in body["hits"]], bool(body["degraded"]), body["method"]
    )


async def run_queries(
    resources: Services,
    dataset: Dataset,
    query_ids: Sequence[str],
    modes: Sequence[str],
    fusion: str | None = None,
    save_legs: TextIO | None = None,
    requests: Mapping[str, ModeRequest] | None = None,
    api: httpx.AsyncClient | None = None,
) -> dict[str, ModeRun]:
    """Every query in every mode, one search at a time, through SearchService, or
    through the HTTP API with ``api`` (:func:`bench.app_client.api_client`).

    A mode is asked as ``requests`` says (:func:`mode_requests`), else with the default
    request of the search mode of its name. With ``save_legs`` (in process only), one
    JSON line per query records the candidate lists of the single-leg modes (see
    :func:`leg_record`) for ``bench.fusion_replay``.
    """
    if api is not None and save_legs is not None:
        raise ValueError("save_legs records the service's results: not through the API")
    asked = {mode: (requests or {}).get(mode) or ModeRequest(SearchMode(mode)) for mode in modes}
    runs = {mode: ModeRun() for mode in modes}
    candidates = default_candidates(resources.settings)
    method = None if fusion is None else FusionMethod(fusion)
    started = last_report = time.perf_counter()
    try:
        for n, qid in enumerate(query_ids, 1):
            qrels = dataset.qrels[qid]
            legs: dict[str, list[list[Any]]] = {}
            coverage: float | None = None
            failed = False
            for mode in modes:
                run = runs[mode]
                t0 = time.perf_counter()
                try:
                    searched = await _search(
                        resources,
                        api,
                        asked[mode],
                        text=dataset.queries[qid],
                        candidates=candidates,
                        fusion=method,
                    )
                except HsearchError as exc:
                    failed = True
                    run.errors += 1
                    run.per_query.append(evaluate_ranking([], qrels))
                    if run.errors <= MAX_LOGGED_FAILURES:
                        progress(f"  query {qid} ({mode}) failed: {type(exc).__name__}: {exc}")
                    if run.errors == n >= ABORT_AFTER_FAILURES:
                        msg = f"{mode}: the first {n} searches all failed; giving up"
                        raise RuntimeError(msg) from exc
                    continue
                run.latencies_ms.append((time.perf_counter() - t0) * 1000)
                run.degraded += searched.degraded
                run.methods.add(searched.method)
                run.per_query.append(evaluate_ranking(searched.external_ids, qrels))
                single = SINGLE_LEG_MODES.get(mode)
                if save_legs is not None and single and searched.result is not None:
                    legs[single] = leg_candidates(searched.result)
                    if single == Leg.SPARSE.value:
                        coverage = searched.result.keyword_coverage
            # A failed search has no candidates to replay: recorded, it would replay as
            # a miss of every design (the run's failed_searches says how many there were).
            if save_legs is not None and not failed:
                record = leg_record(
                    dataset,
                    qid,
                    legs,
                    candidates=candidates,
                    dense_scripts=resources.embedder.info.dense_scripts,
                    encoder=resources.settings.encoder.kind.value,
                    keyword_coverage=coverage,
                )
                print(json.dumps(record, ensure_ascii=False), file=save_legs, flush=True)
            now = time.perf_counter()
            if now - last_report >= 15 or n == len(query_ids):
                last_report = now
                rate = n / (now - started)
                eta = (len(query_ids) - n) / rate if rate else 0.0
                progress(
                    f"  queries {n}/{len(query_ids)} ({rate:.1f} queries/s x {len(modes)} "
                    f"modes, ETA {eta:.0f} s)"
                )
    finally:
        await resources.store.aclose()
    return runs


@dataclass
class Stack:
    """A throw-away stack with a set ingested (:func:`prepared_stack`)."""

    resources: Services
    settings: Settings
    fusion: FusionDefault
    """What a default hybrid request fuses with (:meth:`SearchSettings.resolve_fusion`)."""
    encoder: str  # the encoder's fingerprint
    ingested: dict[str, Any]
    setup_seconds: float
    flush_seconds: float | None


@contextlib.contextmanager
def prepared_stack(dataset: Dataset, options: Options) -> Iterator[Stack]:
    """A fresh stack (Milvus Lite, SQLite, the services) with ``dataset``'s corpus and
    links ingested and flushed (unless ``options.flush`` is off); torn down on exit, also
    on an error or an interrupt."""
    tmp = Path(tempfile.mkdtemp(prefix=f"hsearch-bench-{dataset.name}-"))
    milvus: Child | None = None
    resources: Services | None = None
    try:
        milvus, milvus_uri = start_milvus_lite(tmp / "milvus", log=tmp / "milvus.log")
        settings = build_settings(tmp, milvus_uri, options)
        upgrade_database(settings.database_url)
        t0 = time.perf_counter()
        resources = build_services(settings)
        setup_seconds = time.perf_counter() - t0
        encoder = resources.embedder.info.fingerprint
        fusion = settings.search.resolve_fusion(resources.embedder.info.fusion, options.fusion)
        progress(
            f"  stack ready in {setup_seconds:.1f} s: milvus {milvus_uri}, encoder {encoder}, "
            f"hybrid fusion {fusion.describe()}"
        )
        ingested = ingest(resources, dataset.corpus, dataset.links)
        progress(
            f"  ingested {ingested['indexed']} documents ({ingested['failed']} failed) as "
            f"{ingested['chunks']} chunks"
            + (f", {dataset.link_count} links" if dataset.has_links else "")
            + f" in {ingested['seconds']:.1f} s"
        )
        flush_seconds = None
        if options.flush:
            t0 = time.perf_counter()
            resources.store.flush()
            flush_seconds = time.perf_counter() - t0
            progress(f"  flushed the collection in {flush_seconds:.1f} s")
        yield Stack(
            resources=resources,
            settings=settings,
            fusion=fusion,
            encoder=encoder,
            ingested=ingested,
            setup_seconds=setup_seconds,
            flush_seconds=flush_seconds,
        )
    finally:
        if resources is not None:
            resources.close()
        if milvus is not None:
            milvus.stop(MILVUS_STOP_SECONDS)
        if options.keep:
            progress(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def run_dataset(
    path: Path,
    options: Options,
    *,
    stack_for: Callable[[Dataset, Options], contextlib.AbstractContextManager[Stack]] = (
        prepared_stack
    ),
) -> DatasetRun:
    """Build a fresh stack, ingest ``path``'s corpus, run its queries, tear down.

    ``stack_for`` builds the stack with the set ingested (another stack, in tests)."""
    wall = time.perf_counter()
    dataset = load_dataset(path)
    query_ids = select_queries(
        dataset, max_queries=options.max_queries, seed=options.seed, prefix=options.query_prefix
    )
    modes = dataset_modes(options.modes, has_links=dataset.has_links)
    progress(
        f"{dataset.name}: {len(dataset.corpus)} documents, {len(query_ids)} of "
        f"{len(dataset.queries)} queries, modes {','.join(modes)}"
    )
    with stack_for(dataset, options) as stack:
        requests = mode_requests(
            modes,
            has_links=dataset.has_links,
            fusion=stack.fusion,
            graph=options.graph,
            server_graph_weight=stack.settings.graph.weight,
        )
        t0 = time.perf_counter()
        runs = asyncio.run(
            run_queries(
                stack.resources,
                dataset,
                query_ids,
                modes,
                options.fusion,
                options.save_legs,
                requests,
            )
        )
        search_seconds = time.perf_counter() - t0

    for mode, run in runs.items():
        if run.degraded or run.errors:
            progress(f"  WARNING {mode}: {run.degraded} degraded, {run.errors} failed searches")
    settings, ingested = stack.settings, stack.ingested
    recorded: dict[str, Any] = {
        "top_k": TOP_K,
        "candidates": default_candidates(settings),
        "chunk_max_tokens": settings.ingest.chunk_max_tokens,
        "chunk_overlap_tokens": settings.ingest.chunk_overlap_tokens,
        "search": settings.search.model_dump(mode="json"),
        # what hybrid fused with (SearchSettings.resolve_fusion)
        "fusion": stack.fusion.describe(),
    }
    if dataset.has_links and "hybrid" in requests:
        recorded["graph"] = {
            **resolved_graph(options.graph, settings).describe(),
            "links": dataset.link_count,
            "weights": dict(requests["hybrid"].weights or {}),
        }
    return DatasetRun(
        dataset=dataset.name,
        encoder=stack.encoder,
        documents=len(dataset.corpus),
        query_ids=query_ids,
        runs=runs,
        ingest_seconds=ingested["seconds"],
        chunks=ingested["chunks"],
        failed_documents=ingested["failed"],
        settings=recorded,
        setup_seconds=stack.setup_seconds,
        flush_seconds=stack.flush_seconds,
        search_seconds=search_seconds,
        total_seconds=time.perf_counter() - wall,
        sample=(
            {"max_queries": options.max_queries, "seed": options.seed}
            if options.max_queries is not None
            else None
        ),
        query_prefix=options.query_prefix,
        by_prefix=options.by_prefix,
    )
