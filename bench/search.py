"""Search latency against Milvus itself: the product's search service beside Milvus's own
server-side hybrid search and beside the bare legs, measured in one run.

A collection of ``--chunks`` synthetic chunks (1024-d unit dense vectors around a few
dozen centres; sparse vectors of 50 to 100 terms drawn from a Zipf-distributed vocabulary
of 30,000, weights as BM25 would give; ~1 kB of text; two tenants, alternating) is
written with the product's store (:class:`MilvusVectorStore`: its schema and indexes)
to a Milvus Lite server of this benchmark's own. It is built once per set of parameters
under ``--data-dir`` and reused by later runs (``--rebuild`` to start again).

Then ``--queries`` queries (pre-computed dense and sparse vectors of 4 to 8 terms, the
tenant ``bench_a`` as the filter) go, query by query and in a rotating order, to:

* **native** (a): Milvus's ``hybrid_search`` with ``RRFRanker(60)``, top 10, 100
  candidates per leg, the store's search parameters and output fields;
* **legs** (b): the product store's two leg searches in parallel
  (:meth:`MilvusVectorStore.search_dense`, :meth:`~MilvusVectorStore.search_sparse`:
  candidates without their text), fused by client-side RRF, then the top 10's texts
  read by id (:meth:`~MilvusVectorStore.texts`), nothing else: the floor of this design;
* **service** (c): :meth:`SearchService.search` without a result cache, top 10, query
  encoding excluded (:class:`PassThroughEmbedder` returns the pre-computed vectors),
  doing the work (a) does and nothing more: no facets, no snippets, the window counted
  (``track_total`` ``window``, i.e. false);
* **service_facets** (c+): the default request (``track_total`` ``bound``: the total
  exact when the windows hold every match, else a lower bound; snippets) with facets on
  ``source`` and ``tags``;
* **service_exact** (c++): the same with the exact count (``track_total`` ``exact``:
  every keyword match counted for the total and the facets, up to the count limit);
* with ``--coverage``, **service_adaptive** and **service_coverage**: (c) fused by
  ``adaptive``, without and with the keyword leg's coverage of the query read (one read
  of the first keyword candidate's terms by id; docs/fusion.md), from two services on
  the same collection (``ratios.service_coverage_over_adaptive_p50``: what the reading
  costs);
* **cache_hit_http** (d), once per run, before the others: ``POST /v1/search`` through
  HTTP to the API in a process of its own (:func:`bench.cache_hit.measure_http`: uvicorn
  on the app factory, the embedded profile, the in-process result cache, an API key),
  one keep-alive connection, sequential requests (at least 500), ten hits of ~1 kB
  text, every timed request a cache hit (checked).

It prints p50/p95/p99 of each, the ratios (``ratios.service_over_native_p50`` ...), how
often (c+) and (c++) answered a total that is a lower bound (``totals``: the relation
``gte``, and (c+)'s bound against (c++)'s count of the same query), and the load
average before and after. ``--sizes 10000,50000,200000`` runs the same at each
size (p50 per leg and of (c), the slope of log p50 against log N, build time and the
Milvus Lite process's resident memory per size; every size in full under ``runs``; the
top-level figures are the last size's).

Usage (from the repository root)::

    nice -n 5 python -m bench.search --json                 # 100,000 chunks, 100 queries
    nice -n 5 python -m bench.search --json --sizes 10000,50000 --queries 100
    nice -n 5 python -m bench.search --json --coverage --no-http  # the coverage read's cost

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import os
import shutil
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr
from pyinstrument import Profiler
from pymilvus import AnnSearchRequest, AsyncMilvusClient, RRFRanker

from bench.cache_hit import measure_http
from bench.interrupt import progress, run_and_print
from bench.metrics import percentile
from bench.runner import MILVUS_STOP_SECONDS, Options, build_settings
from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.embedding.fake import AnalyzerTokenizer
from hsearch.embedding.protocol import Embedding, EncoderInfo, SparseKind, Tokenizer
from hsearch.local.processes import Child, start_milvus_lite
from hsearch.runtime import Services, build_services
from hsearch.search.facets import FacetRequest
from hsearch.search.models import SearchQuery, SearchResult
from hsearch.search.timings import StageTimings
from hsearch.types import FusionMethod, SearchMode, SparseVector, TotalRelation, TotalTracking
from hsearch.vectorstore.milvus import MilvusVectorStore, grpc_options
from hsearch.vectorstore.milvus_filters import tenant_expression
from hsearch.vectorstore.protocol import ChunkRecord, StoredHit
from hsearch.vectorstore.schema import DENSE_FIELD, OUTPUT_FIELDS, PRIMARY_FIELD, SPARSE_FIELD

DIMENSION = 1024
TENANTS = ("bench_a", "bench_b")
QUERY_TENANT = TENANTS[0]
COLLECTION = "search_bench"
TOP_K = 10
CANDIDATES = 100
RRF_K = 60
VOCABULARY = 30_000
ZIPF_EXPONENT = 1.0
TERMS_PER_CHUNK = (50, 100)
TERMS_PER_QUERY = (4, 8)
QUERY_SKIP_COMMONEST = 100  # query terms are not stop words
TEXT_BYTES = 1000
CENTRES = 64
BUILD_BATCH = 1000
FORMAT = 2  # bump when the generated data changes: older builds are not reused
DEFAULT_DATA_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / (
    "hsearch-bench-search"
)
PROFILED = ("service", "service_facets", "service_exact")
HTTP_REQUESTS = 500  # (d): at least this many timed cache hits
SIDES = ("native", "legs", "service", "service_facets", "service_exact")
SERVICE_SIDES = {
    "service": TotalTracking.WINDOW,
    "service_facets": TotalTracking.BOUND,
    "service_exact": TotalTracking.EXACT,
}
"""The service's sides, with how each counts its total."""
"""Measured interleaved; (d), ``cache_hit_http``, after them (its own stack)."""
COVERAGE_SIDES = ("service_adaptive", "service_coverage")
"""With ``--coverage``: (c) fused by ``adaptive``, without and with the keyword leg's
coverage of the query read (one read of the first keyword candidate's terms by id)."""
LEG_SIDES = ("dense_leg", "sparse_leg")
FACETS = (FacetRequest("source"), FacetRequest("tags"))
SOURCES = ("web", "wiki", "mail", "docs", "forum")
TAGS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")
ENCODER = EncoderInfo(
    name="bench-search-pass-through",
    dimension=DIMENSION,
    version="1",
    sparse_kind=SparseKind.LEARNED,
)
DENSE_PARAMS = {"metric_type": "IP", "params": {"ef": 128}}  # the store's, limit <= ef
SPARSE_PARAMS = {"metric_type": "IP", "params": {"drop_ratio_search": 0.0}}

# -- pure parts -----------------------------------------------------------------------


def rrf(rankings: Sequence[Sequence[str]], *, k: int = RRF_K, limit: int = TOP_K) -> list[str]:
    """Reciprocal rank fusion of ``rankings`` (ids, best first): ``sum 1 / (k + rank)``
    with ranks from 1, the ``limit`` best; ties in order of first appearance."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores, key=lambda key: -scores[key])[:limit]


def log_slope(sizes: Sequence[float], values: Sequence[float]) -> float | None:
    """The least-squares slope of log ``values`` against log ``sizes`` (``None`` with
    fewer than two distinct sizes): 0 is flat, 1 linear."""
    points = [(math.log(n), math.log(v)) for n, v in zip(sizes, values, strict=True) if v > 0]
    if len({x for x, _ in points}) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    num = sum((x - mean_x) * (y - mean_y) for x, y in points)
    den = sum((x - mean_x) ** 2 for x, _ in points)
    return num / den


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 and the mean of ``seconds``, in milliseconds."""
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "p99_ms": round(percentile(ms, 99), 2),
        "mean_ms": round(sum(ms) / len(ms), 2),
        "n": len(ms),
    }


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b > 0 else None


# -- data -------------------------------------------------------------------------------


def zipf_weights(skip: int = 0) -> np.ndarray[Any, Any]:
    """The probability of each term id from ``skip`` on (id ``i`` is the ``i + 1``-th
    commonest word)."""
    ranks = np.arange(skip + 1, VOCABULARY + 1, dtype=np.float64)
    p: np.ndarray[Any, Any] = ranks**-ZIPF_EXPONENT
    weights: np.ndarray[Any, Any] = p / p.sum()
    return weights


def _zipf_terms(rng: np.random.Generator, count: int, *, skip: int = 0) -> np.ndarray[Any, Any]:
    """``count`` distinct term ids, drawn by Zipf frequency (skipping the ``skip``
    commonest)."""
    p = zipf_weights(skip)
    ids: np.ndarray[Any, Any] = rng.choice(p.size, size=count, replace=False, p=p) + skip
    return ids


@dataclass(frozen=True)
class Generator:
    """Deterministic chunks and queries: batch ``b`` is drawn from seed ``(seed, b)``."""

    seed: int
    dimension: int = DIMENSION

    def centres(self) -> np.ndarray[Any, Any]:
        rng = np.random.default_rng(self.seed)
        return rng.normal(size=(CENTRES, self.dimension)).astype(np.float32)

    def _around(self, rng: np.random.Generator, count: int) -> np.ndarray[Any, Any]:
        centres = self.centres()
        picked = centres[rng.integers(0, len(centres), count)]
        vectors = picked + rng.normal(size=picked.shape).astype(np.float32)
        out: np.ndarray[Any, Any] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        return out.astype(np.float32)

    def records(self, start: int, stop: int) -> list[ChunkRecord]:
        rng = np.random.default_rng((self.seed, start))
        count = stop - start
        dense = self._around(rng, count)
        cdf = np.cumsum(zipf_weights())
        words = [f"w{i}" for i in range(VOCABULARY)]
        sizes = rng.integers(TERMS_PER_CHUNK[0], TERMS_PER_CHUNK[1] + 1, count)
        terms_all = np.searchsorted(cdf, rng.random(int(sizes.sum())) * cdf[-1])
        text_all = np.searchsorted(cdf, rng.random((count, TEXT_BYTES // 3)) * cdf[-1])
        ends = np.cumsum(sizes)
        out = []
        for j in range(count):
            i = start + j
            # A repeated draw merges: a few chunks hold slightly fewer terms.
            terms = np.unique(terms_all[ends[j] - sizes[j] : ends[j]])
            weights = rng.uniform(0.2, 3.0, terms.size)
            sparse = SparseVector.from_mapping(
                dict(zip(terms.tolist(), weights.tolist(), strict=True))
            )
            text = " ".join(words[w] for w in text_all[j])[:TEXT_BYTES]
            out.append(
                ChunkRecord(
                    chunk_id=f"c{i:010d}",
                    document_id=f"d{i // 4}",
                    tenant_id=TENANTS[i % len(TENANTS)],
                    external_id=f"doc-{i // 4}",
                    title=f"document {i // 4}",
                    text=text,
                    ordinal=i % 4,
                    dense=tuple(dense[j].tolist()),
                    sparse=sparse,
                    source=SOURCES[i % len(SOURCES)],
                    tags=(TAGS[i % len(TAGS)], TAGS[(i // 7) % len(TAGS)]),
                    char_start=0,
                    char_end=len(text),
                )
            )
        return out

    def queries(self, count: int) -> list[Embedding]:
        rng = np.random.default_rng((self.seed, 2**40))  # apart from every batch
        dense = self._around(rng, count)
        out = []
        for q in range(count):
            n = int(rng.integers(TERMS_PER_QUERY[0], TERMS_PER_QUERY[1] + 1))
            terms = _zipf_terms(rng, n, skip=QUERY_SKIP_COMMONEST)
            weights = rng.uniform(0.5, 1.0, n)
            out.append(
                Embedding(
                    dense=tuple(float(v) for v in dense[q]),
                    sparse=SparseVector.from_mapping(
                        dict(zip(terms.tolist(), weights.tolist(), strict=True))
                    ),
                )
            )
        return out


class PassThroughEmbedder:
    """An encoder that returns pre-computed query vectors by query text (``q<n>``):
    the service's search without the cost of encoding."""

    def __init__(self, queries: Sequence[Embedding]) -> None:
        self._queries = list(queries)
        self._tokenizer = AnalyzerTokenizer(512)

    @property
    def info(self) -> EncoderInfo:
        return ENCODER

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        return self._queries[int(text.strip().lower().removeprefix("q"))]

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        return [self.embed_query(t, dense=dense, sparse=sparse) for t in texts]

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        """``None``: the generated sparse vectors stand for a model's (learned)."""
        del text
        return None


# -- the server and the collection ----------------------------------------------------


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants (psutil; else /proc, ``pid`` only)."""
    try:
        import psutil  # noqa: PLC0415 - optional
    except ImportError:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0
    proc = psutil.Process(pid)
    total = 0
    for p in (proc, *proc.children(recursive=True)):
        with contextlib.suppress(psutil.Error):  # a child that just ended
            total += p.memory_info().rss
    return total


def build_key(chunks: int, seed: int) -> str:
    return f"n{chunks}-d{DIMENSION}-s{seed}-f{FORMAT}"


def ensure_collection(
    uri: str, root: Path, *, chunks: int, seed: int
) -> tuple[MilvusVectorStore, dict[str, Any]]:
    """The collection of ``chunks`` chunks: reused when ``root`` holds a complete build,
    else built (written in batches through the store, then flushed)."""
    marker = root / "build.json"
    store = MilvusVectorStore(uri, collection=COLLECTION, hnsw_ef=128)
    if marker.exists():
        store.ensure_collection(ENCODER)
        info: dict[str, Any] = json.loads(marker.read_text())
        if store.count(tenant_id=QUERY_TENANT) == (chunks + 1) // 2:
            progress(f"reusing the collection of {chunks} chunks ({info})")
            return store, {**info, "reused": True}
        progress("the kept collection is incomplete: rebuilding")
        store.drop_collection()
    store.ensure_collection(ENCODER)
    generator = Generator(seed)
    started = time.perf_counter()
    generate_s = 0.0
    for start in range(0, chunks, BUILD_BATCH):
        t = time.perf_counter()
        records = generator.records(start, min(start + BUILD_BATCH, chunks))
        generate_s += time.perf_counter() - t
        store.upsert(records)
        if (start // BUILD_BATCH) % 10 == 9:
            progress(f"  wrote {start + len(records)}/{chunks}")
    written = time.perf_counter()
    store.flush()
    flushed = time.perf_counter()
    info = {
        "chunks": chunks,
        "build_s": round(flushed - started - generate_s, 1),
        "write_s": round(written - started - generate_s, 1),
        "flush_s": round(flushed - written, 1),
        "generate_s": round(generate_s, 1),
    }
    marker.write_text(json.dumps(info))
    progress(f"built {chunks} chunks: {info}")
    return store, {**info, "reused": False}


# -- the sides ---------------------------------------------------------------------------


async def native(client: AsyncMilvusClient, query: Embedding) -> list[str]:
    expr = tenant_expression(QUERY_TENANT)
    requests = [
        AnnSearchRequest(
            data=[list(query.dense or ())],
            anns_field=DENSE_FIELD,
            param=DENSE_PARAMS,
            limit=CANDIDATES,
            expr=expr,
        ),
        AnnSearchRequest(
            data=[query.sparse.to_dict() if query.sparse is not None else {}],
            anns_field=SPARSE_FIELD,
            param=SPARSE_PARAMS,
            limit=CANDIDATES,
            expr=expr,
        ),
    ]
    result = await client.hybrid_search(
        COLLECTION,
        requests,
        RRFRanker(RRF_K),
        limit=TOP_K,
        output_fields=list(OUTPUT_FIELDS),
        timeout=60,
    )
    return [str(h["entity"].get(PRIMARY_FIELD, h.get("id"))) for h in result[0]]


async def legs(
    store: MilvusVectorStore, query: Embedding, timings: dict[str, list[float]] | None = None
) -> list[str]:
    """Both legs in parallel, client-side RRF; each leg's own seconds go to ``timings``
    (``dense_leg``, ``sparse_leg``: run side by side, so each includes the other's
    contention for the server)."""

    async def timed(name: str, call: Awaitable[list[StoredHit]]) -> list[StoredHit]:
        started = time.perf_counter()
        hits = await call
        if timings is not None:
            timings[name].append(time.perf_counter() - started)
        return hits

    dense, sparse = await asyncio.gather(
        timed(
            "dense_leg",
            store.search_dense(
                query.dense, tenant_id=QUERY_TENANT, filter=None, limit=CANDIDATES, timeout=60
            ),
        ),
        timed(
            "sparse_leg",
            store.search_sparse(
                query.sparse, tenant_id=QUERY_TENANT, filter=None, limit=CANDIDATES, timeout=60
            ),
        ),
    )
    fused = rrf([_ids(dense), _ids(sparse)])
    # The legs' candidates come without their text: the fused top 10's is read by id,
    # so (b) returns what (a) does.
    await store.texts(fused, tenant_id=QUERY_TENANT, timeout=60)
    return fused


def _ids(hits: Sequence[StoredHit]) -> list[str]:
    return [h.chunk_id for h in hits]


def service_query(
    n: int, *, tracking: TotalTracking, fusion: FusionMethod | None = None
) -> SearchQuery:
    """(c), :attr:`TotalTracking.WINDOW`: the work (a) does (fused top 10 with their
    fields) and nothing more: no total beyond the window, no facets, no snippets. Any
    other ``tracking``: what a search gives by default (snippets) with facets, the total
    counted so: (c+) the default bound, (c++) the exact count."""
    full = tracking is not TotalTracking.WINDOW
    return SearchQuery(
        tenant_id=QUERY_TENANT,
        query=f"q{n}",
        top_k=TOP_K,
        mode=SearchMode.HYBRID,
        candidates=CANDIDATES,
        facets=FACETS if full else (),
        highlight=full,
        track_total=tracking,
        fusion=fusion,
    )


# -- one size ---------------------------------------------------------------------------


def settings_for(run_dir: Path, uri: str, redis_url: str | None) -> Settings:
    base = build_settings(run_dir, uri, Options())
    return base.model_copy(
        update={
            "milvus": base.milvus.model_copy(update={"collection": COLLECTION}),
            # A slow leg under load is measured, not cut off and answered degraded.
            "search": base.search.model_copy(
                update={"candidates": CANDIDATES, "leg_timeout_s": 30.0, "max_leg_timeout_s": 60.0}
            ),
            "redis": base.redis.model_copy(
                update={"url": SecretStr(redis_url) if redis_url else None}
            ),
            "cache": base.cache.model_copy(
                update={"namespace": f"bench-search-{os.getpid()}-{time.time_ns()}"}
            ),
            "log_level": "WARNING",  # a log line per request would be measured too
            # Sequential requests of one key, far above a human's rate: not limited.
            "ratelimit": base.ratelimit.model_copy(update={"enabled": False}),
        }
    )


async def measure(
    *,
    profile: Path | None = None,
    store: MilvusVectorStore,
    uri: str,
    service: Services,
    queries: Sequence[Embedding],
    warmup: int,
    coverage: Services | None = None,
) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Seconds per query and side, interleaved query by query in a rotating order; with
    ``coverage`` (the service reading the keyword coverage), :data:`COVERAGE_SIDES` too."""
    client = AsyncMilvusClient(uri=uri, grpc_options=grpc_options())
    extra = COVERAGE_SIDES if coverage is not None else ()
    seconds: dict[str, list[float]] = {side: [] for side in (*SIDES, *extra, *LEG_SIDES)}
    leg_seconds: dict[str, list[float]] = {side: [] for side in LEG_SIDES}
    agree: list[float] = []
    reported: dict[str, list[SearchResult]] = {side: [] for side in SERVICE_SIDES}
    profilers = {side: Profiler(async_mode="enabled") for side in PROFILED} if profile else {}

    async def one(side: str, n: int) -> list[str] | None:
        query = queries[n]
        if side == "native":
            return await native(client, query)
        if side == "legs":
            return await legs(store, query, leg_seconds)
        if side in SERVICE_SIDES:
            request = service_query(n, tracking=SERVICE_SIDES[side])
            profiler = profilers.get(side)
            if profiler is None:
                result = await service.search.search(request)
            else:
                profiler.start()
                try:
                    result = await service.search.search(request)
                finally:
                    profiler.stop()
            reported[side].append(result)
            return [h.chunk_id for h in result.hits]
        if side in COVERAGE_SIDES and coverage is not None:
            reads = side == "service_coverage"
            request = service_query(n, tracking=TotalTracking.WINDOW, fusion=FusionMethod.ADAPTIVE)
            result = await (coverage if reads else service).search.search(request)
            if (result.keyword_coverage is not None) != reads:
                msg = f"{side}: the keyword coverage was {'not ' if reads else ''}read"
                raise RuntimeError(msg)
            return [h.chunk_id for h in result.hits]
        msg = f"no side {side!r}"
        raise ValueError(msg)

    sides = (*SIDES, *extra)
    try:
        for n in range(-warmup, len(queries)):
            q = n % len(queries)
            order = sides[q % len(sides) :] + sides[: q % len(sides)]
            found: dict[str, list[str] | None] = {}
            for side in order:
                started = time.perf_counter()
                found[side] = await one(side, q)
                took = time.perf_counter() - started
                if n >= 0:
                    seconds[side].append(took)
            for leg, values in leg_seconds.items():
                if n >= 0:
                    seconds[leg].extend(values)
                values.clear()
            if n >= 0 and found["native"] and found["legs"]:
                agree.append(len(set(found["native"]) & set(found["legs"] or [])) / TOP_K)
            if n >= 0 and (n + 1) % 50 == 0:
                progress(f"  {n + 1}/{len(queries)} queries")
    finally:
        await client.close()
        await store.aclose()
    if profile is not None:
        for side, profiler in profilers.items():
            report = profile / f"{side}.txt"
            report.write_text(profiler.output_text(unicode=True, color=False, show_all=False))
            progress(f"  profile of {side}: {report}")
    seconds["_overlap_native_legs"] = agree
    stages: dict[str, Any] = {
        side: breakdown(results[warmup:]) for side, results in reported.items()
    }
    stages["totals"] = totals_report(
        reported["service_facets"][warmup:], reported["service_exact"][warmup:]
    )
    return seconds, stages


def breakdown(results: Sequence[SearchResult]) -> dict[str, Any]:
    """Where the service's time went, by its own clock: p50 of each stage and of each
    leg's own time (the legs overlap), and how many answers were degraded."""
    if not results:
        return {}
    stages = {
        f.name: round(percentile([getattr(r.timings, f.name) for r in results], 50), 2)
        for f in dataclasses.fields(StageTimings)
    }
    legs: dict[str, list[float]] = {}
    for r in results:
        for report in r.legs:
            legs.setdefault(str(report.leg), []).append(report.took_ms)
    return {
        "stages_p50_ms": stages,
        "legs_p50_ms": {leg: round(percentile(v, 50), 2) for leg, v in legs.items()},
        "degraded": sum(1 for r in results if r.degraded),
    }


def totals_report(bound: Sequence[SearchResult], exact: Sequence[SearchResult]) -> dict[str, Any]:
    """How (c+)'s default totals relate to (c++)'s exact counts of the same queries:
    how many were lower bounds (relation ``gte``; (c++)'s too, past the count limit),
    the counts' p50, and the bound as a share of the count (p50, min)."""
    shares = [
        b.totals.total / e.totals.total for b, e in zip(bound, exact, strict=True) if e.totals.total
    ]
    return {
        "queries": len(bound),
        "service_facets_gte": sum(1 for r in bound if r.totals.relation is TotalRelation.GTE),
        "service_exact_gte": sum(1 for r in exact if r.totals.relation is TotalRelation.GTE),
        "service_facets_total_p50": percentile([r.totals.total for r in bound], 50)
        if bound
        else None,
        "service_exact_total_p50": percentile([r.totals.total for r in exact], 50)
        if exact
        else None,
        "bound_over_exact_p50": round(percentile(shares, 50), 3) if shares else None,
        "bound_over_exact_min": round(min(shares), 3) if shares else None,
    }


def run_size(args: argparse.Namespace, chunks: int) -> dict[str, Any]:
    root = args.data_dir / build_key(chunks, args.seed)
    if args.rebuild and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    run_dir = root / f"run-{os.getpid()}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir()
    milvus: Child | None = None
    services: list[Services] = []
    try:
        milvus, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
        store, build = ensure_collection(uri, root, chunks=chunks, seed=args.seed)
        rss_after_build = rss_bytes(milvus.proc.pid)
        queries = Generator(args.seed).queries(args.queries)
        embedder = PassThroughEmbedder(queries)
        settings = settings_for(run_dir, uri, args.redis_url)
        upgrade_database(settings.database_url)
        miss = build_services(settings, embedder=embedder, with_cache=False)
        services.append(miss)
        reading: Services | None = None
        if args.coverage:
            search = settings.search.model_copy(update={"keyword_coverage": True})
            reading = build_services(
                settings.model_copy(update={"search": search}), embedder=embedder, with_cache=False
            )
            services.append(reading)
        load_before = os.getloadavg()
        started = time.perf_counter()
        seconds, stages = asyncio.run(
            measure(
                store=store,
                uri=uri,
                service=miss,
                queries=queries,
                warmup=args.warmup,
                profile=args.profile,
                coverage=reading,
            )
        )
        measured_s = time.perf_counter() - started
        load_after = os.getloadavg()
        rss_after = rss_bytes(milvus.proc.pid)
        store.close()
    finally:
        for s in services:
            s.close()
        if milvus is not None:
            milvus.stop(MILVUS_STOP_SECONDS)
        shutil.rmtree(run_dir, ignore_errors=True)
    overlap = seconds.pop("_overlap_native_legs")
    sides = {side: summary_ms(v) for side, v in seconds.items() if v}
    p = {side: (sides[side]["p50_ms"], sides[side]["p95_ms"]) for side in sides}
    result: dict[str, Any] = {
        "chunks": chunks,
        "queries": args.queries,
        "build": build,
        "milvus_rss_mb": {
            "after_build_or_load": round(rss_after_build / 2**20),
            "after_queries": round(rss_after / 2**20),
        },
        **sides,
        "ratios": {
            "service_over_native_p50": ratio(p["service"][0], p["native"][0]),
            "service_over_native_p95": ratio(p["service"][1], p["native"][1]),
            "service_over_legs_p50": ratio(p["service"][0], p["legs"][0]),
            "legs_over_native_p50": ratio(p["legs"][0], p["native"][0]),
            "service_facets_over_native_p50": ratio(p["service_facets"][0], p["native"][0]),
            "service_facets_over_service_p50": ratio(p["service_facets"][0], p["service"][0]),
            "service_exact_over_service_p50": ratio(p["service_exact"][0], p["service"][0]),
            **(
                {
                    "service_coverage_over_adaptive_p50": ratio(
                        p["service_coverage"][0], p["service_adaptive"][0]
                    ),
                    "service_coverage_over_adaptive_p95": ratio(
                        p["service_coverage"][1], p["service_adaptive"][1]
                    ),
                }
                if "service_coverage" in p
                else {}
            ),
        },
        "service_breakdown": stages,
        "top10_overlap_native_legs": round(sum(overlap) / len(overlap), 3) if overlap else None,
        "measured_s": round(measured_s, 1),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
    }
    return result


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = args.sizes or [args.chunks]
    hits: dict[str, Any] | None = None
    if not args.no_http:
        # (d) on a stack of its own, the API in its own process as deployed; first, on a
        # machine that no collection of the other sides loads yet (independent of N).
        progress("(d): cache hits through HTTP to the API in a process of its own")
        hits = measure_http(max(args.queries, HTTP_REQUESTS), args.warmup, redis_url=args.redis_url)
    runs = []
    for chunks in sizes:
        progress(f"size {chunks}")
        runs.append(run_size(args, chunks))
    first = runs[-1]  # the headline: the (last, so usually largest) size
    out: dict[str, Any] = {
        "benchmark": "search",
        **first,
        "targets": {
            "service_over_native_p50": 1.0,
            "service_over_native_p95": 1.0,
            "service_over_legs_p50": 1.05,
            "service_facets_over_service_p50": 1.25,
            "cache_hit_http_p50_ms": 3.0,
        },
        "settings": {
            "dimension": DIMENSION,
            "tenants": list(TENANTS),
            "query_tenant": QUERY_TENANT,
            "top_k": TOP_K,
            "candidates_per_leg": CANDIDATES,
            "rrf_k": RRF_K,
            "terms_per_chunk": list(TERMS_PER_CHUNK),
            "terms_per_query": list(TERMS_PER_QUERY),
            "vocabulary": VOCABULARY,
            "text_bytes": TEXT_BYTES,
            "warmup": args.warmup,
            "redis": bool(args.redis_url),
            "nice": os.nice(0),
        },
        "machine": {"cpus": os.cpu_count()},
    }
    if hits is not None:
        out["cache_hit_http"] = {
            "p50_ms": hits["p50_ms"],
            "p95_ms": hits["p95_ms"],
            "p99_ms": hits["p99_ms"],
            "n": hits["requests"],
        }
        out["service_breakdown"] = {
            **first["service_breakdown"],
            "cache_hit_http": {
                "server_took_p50_ms": hits["server_took_p50_ms"],
                "not_cached": 0,  # measure_http refuses a miss
            },
        }
        out["met"] = {
            "service_over_native_p50": (out["ratios"]["service_over_native_p50"] or 9) <= 1.0,
            "service_over_native_p95": (out["ratios"]["service_over_native_p95"] or 9) <= 1.0,
            "service_over_legs_p50": (out["ratios"]["service_over_legs_p50"] or 9) <= 1.05,
            "cache_hit_http_p50_ms": hits["p50_ms"] <= 3.0,
        }
    out.setdefault("met", {})["service_facets_over_service_p50"] = (
        out["ratios"]["service_facets_over_service_p50"] or 9
    ) <= 1.25
    if args.sizes:
        out["runs"] = runs  # every size in full
        ns = [r["chunks"] for r in runs]
        out["sizes"] = [
            {
                "chunks": r["chunks"],
                "p50_ms": {side: r[side]["p50_ms"] for side in (*SIDES, *LEG_SIDES) if side in r},
                "build_s": r["build"]["build_s"],
                "build_reused": r["build"]["reused"],
                "milvus_rss_mb": r["milvus_rss_mb"]["after_queries"],
                "load_average_before": r["load_average_before"],
            }
            for r in runs
        ]
        out["slopes"] = {
            side: (
                None
                if (s := log_slope(ns, [r[side]["p50_ms"] for r in runs])) is None
                else round(s, 3)
            )
            for side in SIDES
            if all(side in r for r in runs)
        }
        out["slopes"].update(leg_slopes(args, runs))
    return out


def leg_slopes(args: argparse.Namespace, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Slopes of each leg alone, measured per size in :func:`run_size` as ``dense_leg``
    and ``sparse_leg`` when present."""
    out: dict[str, Any] = {}
    ns = [r["chunks"] for r in runs]
    for side in ("dense_leg", "sparse_leg"):
        if all(side in r for r in runs):
            s = log_slope(ns, [r[side]["p50_ms"] for r in runs])
            out[side] = None if s is None else round(s, 3)
    return out


def markdown(result: Mapping[str, Any]) -> str:
    lines = [
        f"{result['chunks']} chunks, {result['queries']} queries; load average "
        f"{result['load_average_before'][0]} -> {result['load_average_after'][0]} on "
        f"{result['machine']['cpus']} CPUs",
        "",
        "| side | p50 ms | p95 ms | p99 ms |",
        "| --- | ---: | ---: | ---: |",
    ]
    for side in SIDES:
        if side in result:
            r = result[side]
            lines.append(f"| {side} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} |")
    lines += ["", json.dumps(result["ratios"]), json.dumps(result["service_breakdown"]["totals"])]
    if "sizes" in result:
        lines += ["", json.dumps(result["sizes"]), json.dumps(result["slopes"])]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.search", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument(
        "--sizes", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=None,
        help="comma-separated chunk counts: the same run at each (overrides --chunks)",
    )  # fmt: skip
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10, help="untimed queries first")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--rebuild", action="store_true", help="do not reuse a kept build")
    parser.add_argument(
        "--redis-url", default=None,
        help="(d): the result cache on this Redis (default: in process, as without redis.url)",
    )  # fmt: skip
    parser.add_argument("--no-http", action="store_true", help="leave out (d)")
    parser.add_argument(
        "--coverage", action="store_true",
        help="also (c) fused by adaptive without and with the keyword coverage read",
    )  # fmt: skip
    parser.add_argument(
        "--profile", type=Path, default=None, metavar="DIR",
        help="profile (c), (c+) and (c++) with pyinstrument (its overhead lands in their times: "
        "read their ratios from a run without it) and write DIR/<side>.txt",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    if args.chunks < 2 or args.queries < 1 or any(n < 2 for n in args.sizes or []):
        parser.error("--chunks, --sizes must be >= 2, --queries >= 1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return run_and_print(
        lambda: run(args), lambda result: json.dumps(result) if args.json else markdown(result)
    )


if __name__ == "__main__":
    sys.exit(main())
