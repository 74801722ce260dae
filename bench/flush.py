"""Flush benchmark: how fast each search leg is right after ingestion, without a flush,
after the product's post-ingest step and after an explicit flush.

Milvus searches unsealed (growing) segments by brute force until a flush seals them.
The indexer flushes after ingest jobs on a schedule (:class:`FlushSchedule`: at the end
of a job, or on a timer when a flush began less than ``ingest.flush_min_interval_s``
ago) and reports a job finished only once flushed. This benchmark checks that what it
leaves behind searches as fast as an explicit flush does.

On a Milvus Lite server of its own (a temporary directory, removed at the end), the same
``--chunks`` synthetic chunks (:mod:`bench.synthetic`, ``--dim`` dimensions) are written
through :meth:`MilvusVectorStore.upsert` into three collections:

* ``no_flush``: written, nothing else;
* ``post_ingest``: written in jobs of ``--job-chunks`` chunks, each followed by the
  indexer's flush request on a :class:`FlushSchedule` with the configured interval
  (``HSEARCH_INGEST__FLUSH_MIN_INTERVAL_S`` or ``--interval``); measured once the last
  job would be reported finished (the schedule's last flush has run);
* ``explicit_flush``: written, then :meth:`MilvusVectorStore.flush`.

Then ``--queries`` dense and sparse queries (no filter, ``--limit`` candidates) go to the
three collections in turn, query by query (the order rotates), so load on the machine
hits all three alike. It prints p50/p95 per leg and collection, and the ratios to the
explicitly flushed collection.

Usage (from the repository root)::

    python -m bench.flush                    # a table
    python -m bench.flush --json --chunks 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.metrics import percentile
from bench.synthetic import Corpus
from hsearch.config import Settings
from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.ingestion.worker.flushing import FlushSchedule
from hsearch.local.processes import start_milvus_lite
from hsearch.vectorstore.milvus import MilvusVectorStore
from hsearch.vectorstore.protocol import ChunkRecord

STATES = ("no_flush", "post_ingest", "explicit_flush")
LEGS = ("dense", "sparse")
TENANT = "bench"


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def write(store: MilvusVectorStore, records: Sequence[ChunkRecord], *, batch: int = 1000) -> None:
    for start in range(0, len(records), batch):
        store.upsert(records[start : start + batch])


def ingest_in_jobs(
    store: MilvusVectorStore, corpus: Corpus, *, job_chunks: int, interval: float
) -> dict[str, Any]:
    """Write ``corpus`` job by job, each job's end asking for a flush as the indexer
    does; return once the last job would be reported finished."""
    flushes: list[float] = []
    started = time.perf_counter()

    def flush() -> None:
        flushes.append(time.perf_counter() - started)
        store.flush()

    schedule = FlushSchedule(flush, min_interval_s=interval)
    jobs = 0
    for start in range(0, len(corpus), job_chunks):
        write(store, corpus.records(start, start + job_chunks))
        schedule.request()
        jobs += 1
    written = time.perf_counter()
    while schedule.pending:
        time.sleep(0.05)
    return {
        "jobs": jobs,
        "flushes": len(flushes),
        "write_s": round(written - started, 1),
        "finished_after_write_s": round(time.perf_counter() - written, 1),
    }


async def measure(
    stores: dict[str, MilvusVectorStore], corpus: Corpus, *, queries: int, limit: int
) -> dict[str, dict[str, list[float]]]:
    """Seconds per search, by leg and collection, interleaved query by query."""
    seconds: dict[str, dict[str, list[float]]] = {
        leg: {state: [] for state in STATES} for leg in LEGS
    }
    dense = corpus.dense_queries(queries)
    sparse = corpus.sparse_queries(queries)
    for n in range(queries):
        order = STATES[n % 3 :] + STATES[: n % 3]
        for state in order:
            store = stores[state]
            started = time.perf_counter()
            await store.search_dense(
                dense[n].tolist(), tenant_id=TENANT, filter=None, limit=limit, timeout=60
            )
            seconds["dense"][state].append(time.perf_counter() - started)
            started = time.perf_counter()
            await store.search_sparse(
                sparse[n], tenant_id=TENANT, filter=None, limit=limit, timeout=60
            )
            seconds["sparse"][state].append(time.perf_counter() - started)
    for store in stores.values():
        await store.aclose()
    return seconds


def run(args: argparse.Namespace) -> dict[str, Any]:
    interval = (
        args.interval if args.interval is not None else Settings().ingest.flush_min_interval_s
    )
    corpus = Corpus.generate(args.chunks, dim=args.dim, tenant=TENANT, seed=args.seed)
    encoder = EncoderInfo(
        name="synthetic", dimension=args.dim, version="1", sparse_kind=SparseKind.LEARNED
    )
    root = Path(tempfile.mkdtemp(prefix="hsearch-flush-"))
    server, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
    stores: dict[str, MilvusVectorStore] = {}
    try:
        for state in STATES:
            stores[state] = MilvusVectorStore(
                uri, collection=f"flush_{state}_{uuid.uuid4().hex[:6]}"
            )
            stores[state].ensure_collection(encoder)
        started = time.perf_counter()
        write(stores["no_flush"], corpus.records())
        progress(f"no_flush: wrote {args.chunks} chunks in {time.perf_counter() - started:.1f} s")
        started = time.perf_counter()
        write(stores["explicit_flush"], corpus.records())
        stores["explicit_flush"].flush()
        progress(f"explicit_flush: wrote and flushed in {time.perf_counter() - started:.1f} s")
        post_ingest = ingest_in_jobs(
            stores["post_ingest"], corpus, job_chunks=args.job_chunks, interval=interval
        )
        progress(f"post_ingest: {post_ingest}")
        seconds = asyncio.run(measure(stores, corpus, queries=args.queries, limit=args.limit))
    finally:
        for store in stores.values():
            store.drop_collection()
            store.close()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    legs: dict[str, Any] = {}
    for leg in LEGS:
        ms = {state: [s * 1000 for s in seconds[leg][state]] for state in STATES}
        p50 = {state: percentile(ms[state], 50) for state in STATES}
        legs[leg] = {
            **{
                state: {
                    "p50_ms": round(p50[state], 1),
                    "p95_ms": round(percentile(ms[state], 95), 1),
                }
                for state in STATES
            },
            "p50_ratio_no_flush": round(p50["no_flush"] / p50["explicit_flush"], 2),
            "p50_ratio_post_ingest": round(p50["post_ingest"] / p50["explicit_flush"], 2),
        }
    return {
        "benchmark": "flush",
        "chunks": args.chunks,
        "dim": args.dim,
        "queries": args.queries,
        "limit": args.limit,
        "flush_min_interval_s": interval,
        "job_chunks": args.job_chunks,
        "post_ingest": post_ingest,
        "legs": legs,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"{result['chunks']} chunks ({result['dim']}-d), {result['queries']} queries per leg, "
        f"jobs of {result['job_chunks']} chunks, flush_min_interval_s "
        f"{result['flush_min_interval_s']}: {result['post_ingest']}",
        "",
        "| leg | no flush p50 / p95 ms | post-ingest p50 / p95 ms | explicit flush p50 / p95 ms "
        "| no flush / explicit | post-ingest / explicit |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for leg in LEGS:
        r = result["legs"][leg]
        cells = [f"{r[s]['p50_ms']:.0f} / {r[s]['p95_ms']:.0f}" for s in STATES]
        lines.append(
            f"| {leg} | {' | '.join(cells)} | {r['p50_ratio_no_flush']:.2f} "
            f"| {r['p50_ratio_post_ingest']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.flush", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--chunks", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=384, help="dense dimension (MiniLM: 384)")
    parser.add_argument("--job-chunks", type=int, default=500, help="chunks per ingest job")
    parser.add_argument(
        "--interval", type=float, default=None, help="flush_min_interval_s (default: settings)"
    )
    parser.add_argument("--queries", type=int, default=50, help="queries per leg")
    parser.add_argument("--limit", type=int, default=100, help="candidates per search")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
