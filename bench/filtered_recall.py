"""Filtered-search benchmark: recall@limit and latency of the dense leg under filters of
known selectivity, for the store and for the plain alternatives (docs/filtered-search.md).

On a Milvus Lite server of its own (a temporary directory, removed at the end), the
benchmark writes a synthetic tenant (:mod:`bench.synthetic`: ``--chunks`` clustered unit
vectors of ``--dim`` dimensions, ``source`` values selecting 50 %, 5 %, 0.5 % and five
chunks) through :meth:`MilvusVectorStore.upsert`, and, in the same Milvus Lite partition
(Milvus Lite hashes a partition key value into one of 16 buckets with md5), two small
tenants of 1,000 and 50 chunks. It then flushes and reloads the collection (Milvus Lite
builds a sealed segment's HNSW index in the background after a flush, synchronously on
load) and sends ``--queries`` queries per filter, each to every method in turn (so load
on the machine hits every method alike):

* ``store``: :meth:`MilvusVectorStore.search_dense`, the product;
* ``hnsw ef=E``: one HNSW search under the filter; ``ef=128`` is what the store did
  before (``ef = max(hnsw_ef 128, limit)``);
* ``exact``: every matching chunk's vector fetched with a query and scored in numpy;
* ``count``: ``count(*)`` under the filter (latency only), the estimate a count-based
  method would need first.

Recall@limit is the share of the exact top ``--limit`` (numpy over the same vectors) in
what a method returns. With ``--growing`` the store and ``hnsw ef=128`` are measured
before the flush too.

Usage (from the repository root)::

    python -m bench.filtered_recall                  # a table
    python -m bench.filtered_recall --json           # one JSON object
    python -m bench.filtered_recall --chunks 5000 --queries 10
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pymilvus import AsyncMilvusClient, MilvusClient

from bench.metrics import percentile
from bench.synthetic import SOURCES, Corpus, Vectors, recall
from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.local.processes import start_milvus_lite
from hsearch.vectorstore.filters import parse_filter
from hsearch.vectorstore.milvus import MilvusVectorStore, grpc_options
from hsearch.vectorstore.milvus_filters import compile_filter
from hsearch.vectorstore.schema import DENSE_FIELD, OUTPUT_FIELDS, PRIMARY_FIELD

TENANT = "bench"
SMALL_TENANTS = (1000, 50)
FILTERS: tuple[str | None, ...] = (None, *SOURCES)
BASELINE_EF = (128, 2048, 8192)

Search = Callable[[Vectors], Awaitable[list[str]]]


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def lite_bucket(tenant: str) -> int:
    """The Milvus Lite partition-key bucket of ``tenant`` (md5 of the value, mod 16)."""
    return int(hashlib.md5(tenant.encode()).hexdigest(), 16) % 16


@dataclass
class Cell:
    """One method on one filter: recall and latency per query."""

    state: str
    tenant: str
    filter: str
    matches: int
    method: str
    recalls: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        ms = [s * 1000 for s in self.seconds]
        return {
            "state": self.state,
            "tenant": self.tenant,
            "filter": self.filter,
            "matches": self.matches,
            "method": self.method,
            "queries": len(ms),
            "recall_mean": round(statistics.fmean(self.recalls), 4) if self.recalls else None,
            "recall_min": round(min(self.recalls), 4) if self.recalls else None,
            "p50_ms": round(percentile(ms, 50), 1),
            "p95_ms": round(percentile(ms, 95), 1),
        }


class Methods:
    """The ways of answering a dense search under ``expr`` compared here."""

    def __init__(self, store: MilvusVectorStore, uri: str, *, limit: int) -> None:
        self.store = store
        self.client = AsyncMilvusClient(uri=uri, grpc_options=grpc_options())
        self.limit = limit

    def for_filter(
        self, tenant: str, source: str | None, *, baselines: Sequence[int]
    ) -> dict[str, Search]:
        node = None if source is None else parse_filter({"source": {"eq": source}})
        expr = compile_filter(node, tenant_id=tenant)

        async def store(query: Vectors) -> list[str]:
            hits = await self.store.search_dense(
                query.tolist(), tenant_id=tenant, filter=node, limit=self.limit, timeout=60
            )
            return [h.chunk_id for h in hits]

        def hnsw(ef: int) -> Search:
            async def run(query: Vectors) -> list[str]:
                result = await self.client.search(
                    self.store.collection,
                    data=[query.tolist()],
                    anns_field=DENSE_FIELD,
                    filter=expr,
                    limit=self.limit,
                    output_fields=list(OUTPUT_FIELDS),
                    search_params={"metric_type": "IP", "params": {"ef": max(ef, self.limit)}},
                    timeout=60,
                )
                return [str(h["entity"][PRIMARY_FIELD]) for h in result[0]]

            return run

        async def exact(query: Vectors) -> list[str]:
            rows = await self.client.query(
                self.store.collection,
                filter=expr,
                output_fields=[PRIMARY_FIELD, DENSE_FIELD],
                limit=16384,
                timeout=60,
            )
            if not rows:
                return []
            scores = np.asarray([r[DENSE_FIELD] for r in rows], dtype=np.float32) @ query
            return [str(rows[int(i)][PRIMARY_FIELD]) for i in np.argsort(-scores)[: self.limit]]

        async def count(_query: Vectors) -> list[str]:
            await self.client.query(
                self.store.collection, filter=expr, output_fields=["count(*)"], timeout=60
            )
            return []

        methods: dict[str, Search] = {"store": store}
        methods.update({f"hnsw ef={ef}": hnsw(ef) for ef in baselines})
        if baselines == BASELINE_EF:
            methods["exact"] = exact
            methods["count"] = count
        return methods

    async def measure(
        self,
        corpus: Corpus,
        *,
        state: str,
        source: str | None,
        queries: int,
        baselines: Sequence[int],
    ) -> list[Cell]:
        matches = int(corpus.mask(source).sum())
        methods = self.for_filter(corpus.tenant, source, baselines=baselines)
        cells = {name: Cell(state, corpus.tenant, source or "-", matches, name) for name in methods}
        for query in corpus.dense_queries(queries):
            expected = corpus.exact_dense(query, source=source, limit=self.limit)
            for name, search in methods.items():
                started = time.perf_counter()
                found = await search(query)
                cells[name].seconds.append(time.perf_counter() - started)
                if name != "count":
                    cells[name].recalls.append(recall(found, expected))
        await self.store.aclose()
        return list(cells.values())

    async def close(self) -> None:
        await self.client.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="hsearch-filtered-"))
    server, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
    try:
        return asyncio.run(_run(args, uri))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _run(args: argparse.Namespace, uri: str) -> dict[str, Any]:
    corpus = Corpus.generate(args.chunks, dim=args.dim, tenant=TENANT, seed=args.seed)
    small = [
        Corpus.generate(size, dim=args.dim, tenant=name, seed=args.seed + size)
        for size, name in zip(SMALL_TENANTS, _neighbours(TENANT, len(SMALL_TENANTS)), strict=True)
    ]
    store = MilvusVectorStore(uri, collection=f"filtered_{uuid.uuid4().hex[:8]}")
    store.ensure_collection(
        EncoderInfo(
            name="synthetic", dimension=args.dim, version="1", sparse_kind=SparseKind.LEARNED
        )
    )
    started = time.perf_counter()
    for part in (corpus, *small):
        for start in range(0, len(part), 2000):
            store.upsert(part.records(start, start + 2000))
    took = time.perf_counter() - started
    progress(f"wrote {args.chunks} + {sum(SMALL_TENANTS)} chunks in {took:.1f} s")
    methods = Methods(store, uri, limit=args.limit)
    cells: list[Cell] = []
    try:
        if args.growing:
            for source in FILTERS:
                cells += await methods.measure(
                    corpus, state="growing", source=source, queries=args.queries, baselines=(128,)
                )
            progress("measured the growing segments")
        started = time.perf_counter()
        store.flush()
        client = MilvusClient(uri=uri, grpc_options=grpc_options())
        client.release_collection(store.collection)
        client.load_collection(store.collection)
        client.close()
        progress(f"flushed and indexed in {time.perf_counter() - started:.1f} s")
        for source in FILTERS:
            cells += await methods.measure(
                corpus, state="sealed", source=source, queries=args.queries, baselines=BASELINE_EF
            )
            progress(f"measured filter {source or '-'}")
        for part in small:
            for source in (None, "p50"):
                cells += await methods.measure(
                    part, state="sealed", source=source, queries=args.queries, baselines=(128,)
                )
            progress(f"measured tenant {part.tenant} ({len(part)} chunks)")
    finally:
        await methods.close()
        store.drop_collection()
        store.close()
    return {
        "benchmark": "filtered_recall",
        "chunks": args.chunks,
        "dim": args.dim,
        "limit": args.limit,
        "queries": args.queries,
        "seed": args.seed,
        "small_tenants": {part.tenant: len(part) for part in small},
        "results": [cell.row() for cell in cells],
    }


def _neighbours(tenant: str, count: int) -> list[str]:
    """Tenant names in ``tenant``'s Milvus Lite partition bucket."""
    names = (f"neighbour{i}" for i in range(100_000))
    return [n for n in names if lite_bucket(n) == lite_bucket(tenant)][:count]


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| state | tenant | filter | matches | method | recall mean | recall min "
        "| p50 ms | p95 ms |",
        "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in result["results"]:
        mean = "" if r["recall_mean"] is None else f"{r['recall_mean']:.3f}"
        low = "" if r["recall_min"] is None else f"{r['recall_min']:.2f}"
        lines.append(
            f"| {r['state']} | {r['tenant']} | {r['filter']} | {r['matches']} | {r['method']} "
            f"| {mean} | {low} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.filtered_recall", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=20_000, help="chunks of the large tenant")
    parser.add_argument("--dim", type=int, default=384, help="dense dimension (MiniLM: 384)")
    parser.add_argument("--queries", type=int, default=30, help="queries per filter")
    parser.add_argument("--limit", type=int, default=100, help="candidates per search")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--growing", action="store_true", help="measure before the flush too")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
