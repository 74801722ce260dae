"""Relevance benchmark: nDCG@10, recall@10 and recall@100 on BEIR-format evaluation sets.

Each dataset goes through the product's own code, in a fresh, throw-away stack:

* a temporary data directory with an SQLite metadata database migrated by Alembic
  (:func:`hsearch.db.migrate.upgrade_database`) and a Milvus Lite gRPC server process on
  a free port (stopped at the end, also on Ctrl-C or SIGTERM);
* :func:`hsearch.runtime.build_resources` on settings built here (unique collection,
  the chosen encoder); every other knob is the product default or ``HSEARCH_*`` from
  the environment, so a candidate setting can be measured without code changes;
* ingestion: :func:`hsearch.ingestion.service.submit_documents` in jobs of 500 documents,
  each committed, then :meth:`IndexingService.process_job` per job: the code the Celery
  worker runs (the broker hop is left out);
* search: :meth:`hsearch.search.service.SearchService.search` per query and mode
  (semantic, keyword, hybrid) with ``top_k=100`` (for recall@100) at the candidate depth
  a default request gets (:func:`default_candidates`), so nDCG@10 measures what a
  default search returns; queries are issued one after the other.
  Hits are chunks: they are mapped to documents by ``external_id`` and deduplicated
  (first occurrence wins) before scoring (:mod:`bench.metrics`).

Usage (from the repository root)::

    python -m bench.relevance --dataset ../shared/datasets/en-limit-small
    python -m bench.relevance --all --json > results.jsonl      # one JSON object per line
    python -m bench.relevance --markdown results.jsonl           # tables for docs/benchmarks.md

Progress goes to stderr; results to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import math
import os
import random
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

from bench.metrics import evaluate_ranking, mean_metrics, percentile, relevant

if TYPE_CHECKING:
    from hsearch.config import Settings
    from hsearch.runtime import Resources
    from hsearch.search.models import SearchResult

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_ROOT = REPO_ROOT.parent / "shared" / "datasets"

MODES = ("semantic", "keyword", "hybrid")
METRICS = ("ndcg@10", "recall@10", "recall@100")
METRIC_LABELS = {"ndcg@10": "nDCG@10", "recall@10": "R@10", "recall@100": "R@100"}
TOP_K = 100
DOCUMENTS_PER_JOB = 500
TENANT = "bench"
DEFAULT_SEED = 1234
MAX_LOGGED_FAILURES = 3  # per mode; the total is in the result's failed_searches
ABORT_AFTER_FAILURES = 20  # every search of a mode failed so far: a broken stack, stop


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- dataset ---------------------------------------------------------------------------


@dataclass
class Dataset:
    name: str
    corpus: list[dict[str, str]]
    queries: dict[str, str]  # id -> text, in file order
    qrels: dict[str, dict[str, float]] = field(default_factory=dict)  # query -> doc -> score


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_dataset(path: Path) -> Dataset:
    """Read a BEIR folder: corpus.jsonl, queries.jsonl and qrels.tsv (with its header)."""
    corpus = [
        {"_id": str(d["_id"]), "title": str(d.get("title") or ""), "text": str(d["text"])}
        for d in _read_jsonl(path / "corpus.jsonl")
    ]
    queries = {str(q["_id"]): str(q["text"]) for q in _read_jsonl(path / "queries.jsonl")}
    qrels: dict[str, dict[str, float]] = {}
    with (path / "qrels.tsv").open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header[:2] != ["query-id", "corpus-id"]:
            msg = f"{path / 'qrels.tsv'}: expected a 'query-id<TAB>corpus-id<TAB>score' header"
            raise ValueError(msg)
        for line in handle:
            if not line.strip():
                continue
            qid, doc, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[doc] = float(score)
    return Dataset(name=path.name, corpus=corpus, queries=queries, qrels=qrels)


def select_queries(
    dataset: Dataset, *, max_queries: int | None, seed: int, prefix: str | None = None
) -> list[str]:
    """Ids of the queries to evaluate: those with a positive judgement (and ``prefix``),
    a seeded random sample of ``max_queries`` of them if asked, in file order."""
    ids = [
        q
        for q in dataset.queries
        if relevant(dataset.qrels.get(q, {})) and (prefix is None or q.startswith(prefix))
    ]
    if max_queries is not None and max_queries < len(ids):
        chosen = set(random.Random(seed).sample(ids, max_queries))
        ids = [q for q in ids if q in chosen]
    return ids


# -- Milvus Lite server ----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.3)
        return s.connect_ex(("127.0.0.1", port)) == 0


class MilvusLiteServer:
    """The product's Milvus Lite server (:func:`hsearch.processes.milvus_lite_command`) on a
    free port, in its own process group (a terminal's Ctrl-C reaches only us, and
    :meth:`stop` takes it down deliberately)."""

    def __init__(self, data_dir: Path, log: Path, *, timeout: float = 60.0) -> None:
        from hsearch.processes import Child, milvus_lite_command  # noqa: PLC0415

        data_dir.mkdir(parents=True, exist_ok=True)
        self.port = _free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.child = Child(
            "milvus",
            argv=milvus_lite_command(data_dir, host="127.0.0.1", port=self.port),
            env=os.environ,
            log=log,
        )
        deadline = time.monotonic() + timeout
        while not _port_open(self.port):
            if not self.child.alive() or time.monotonic() > deadline:
                self.stop()
                tail = log.read_text(errors="replace")[-2000:]
                msg = f"Milvus Lite server did not start on port {self.port}:\n{tail}"
                raise RuntimeError(msg)
            time.sleep(0.1)

    def stop(self, timeout: float = 20.0) -> None:
        self.child.stop(timeout)


# -- one dataset -----------------------------------------------------------------------


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


def build_settings(data_dir: Path, milvus_uri: str, options: Options) -> Settings:
    """Settings for a throw-away stack in ``data_dir``; every knob not set here keeps its
    default or its ``HSEARCH_*`` environment value (no ``.env`` file is read)."""
    from pydantic import SecretStr  # noqa: PLC0415

    from hsearch.config import DatabaseSettings, EncoderKind, Settings  # noqa: PLC0415

    base = Settings(_env_file=None)
    s = base.search
    search = s.model_copy(
        update={
            "max_top_k": max(s.max_top_k, TOP_K),
            "max_candidates": max(s.max_candidates, s.min_candidates, s.candidates_factor * TOP_K),
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
        }
    )


def ingest(resources: Resources, corpus: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """Submit the corpus in jobs of DOCUMENTS_PER_JOB and index them job by job."""
    from hsearch.db.engine import transaction  # noqa: PLC0415
    from hsearch.ingestion.models import DocumentInput  # noqa: PLC0415
    from hsearch.ingestion.service import (  # noqa: PLC0415
        IndexingService,
        get_job,
        submit_documents,
    )

    settings = resources.settings
    started = time.perf_counter()
    job_ids = []
    for start in range(0, len(corpus), DOCUMENTS_PER_JOB):
        documents = [
            DocumentInput(external_id=d["_id"], title=d["title"], text=d["text"])
            for d in corpus[start : start + DOCUMENTS_PER_JOB]
        ]
        with transaction(resources.sessions) as session:
            job_ids.append(submit_documents(session, tenant_id=TENANT, documents=documents).id)
    indexing = IndexingService(
        session_factory=resources.sessions,
        embedder=resources.embedder,
        store=resources.store,
        chunk_max_chars=settings.ingest.chunk_max_chars,
        chunk_overlap_chars=settings.ingest.chunk_overlap_chars,
    )
    indexed = failed = 0
    for n, job_id in enumerate(job_ids, 1):
        status = indexing.process_job(job_id)
        with resources.sessions() as session:
            view = get_job(session, job_id=job_id, tenant_id=TENANT)
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


def flush_collection(uri: str, collection: str) -> float:
    """Seal the collection's growing segments; returns the seconds it took.

    Milvus seals segments on its own by size or age; a benchmark that searches right
    after ingesting would otherwise measure unindexed growing segments: on Milvus Lite a
    sparse search over 1.1k chunks (ja-jsquad-valid) took 230 ms before the flush and
    45 ms after it. Rankings barely change (growing segments are searched exhaustively).
    """
    from pymilvus import MilvusClient  # noqa: PLC0415

    started = time.perf_counter()
    client = MilvusClient(uri=uri)
    try:
        client.flush(collection)
    finally:
        client.close()
    return time.perf_counter() - started


@dataclass
class ModeRun:
    per_query: list[dict[str, float]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    degraded: int = 0
    errors: int = 0
    methods: set[str] = field(default_factory=set)


SINGLE_LEG_MODES = {"semantic": "dense", "keyword": "sparse"}


def leg_candidates(result: SearchResult) -> list[list[Any]]:
    """A single-leg search's hits as ``[chunk_id, external_id, raw leg score]``.

    With ``top_k`` equal to the candidate depth, a single-leg mode returns the leg's
    whole candidate list in the leg's own order, with the raw scores in the explanation:
    exactly what the hybrid mode fuses.
    """
    rows: list[list[Any]] = []
    for hit in result.hits:
        e = hit.explanation
        score = e.dense_score if e.dense_score is not None else e.sparse_score
        rows.append([hit.chunk_id, hit.external_id, score])
    return rows


def leg_record(
    dataset: Dataset,
    qid: str,
    legs: Mapping[str, list[list[Any]]],
    *,
    candidates: int,
    dense_scripts: Collection[str] | None,
) -> dict[str, Any]:
    """One query's line of a ``--save-legs`` file: what the service's weight rule and
    fusion see (query text, the legs, the encoder's dense scripts) and the judgements."""
    return {
        "dataset": dataset.name,
        "query_id": qid,
        "query": dataset.queries[qid],
        "qrels": dataset.qrels[qid],
        "candidates": candidates,
        "dense_scripts": None if dense_scripts is None else sorted(dense_scripts),
        "legs": legs,
    }


def default_candidates(settings: Settings) -> int:
    """The candidate depth per leg of a default request (``top_k`` = 10).

    The benchmark asks for 100 hits (for recall@100) but searches at the depth a default
    request gets, so nDCG@10 measures what a default search returns.
    """
    s = settings.search
    return max(TOP_K, min(s.max_candidates, max(s.min_candidates, s.candidates_factor * 10)))


async def run_queries(
    resources: Resources,
    dataset: Dataset,
    query_ids: Sequence[str],
    modes: Sequence[str],
    fusion: str | None = None,
    save_legs: TextIO | None = None,
) -> dict[str, ModeRun]:
    """Every query in every mode, one search at a time, through SearchService.

    With ``save_legs``, one JSON line per query records the candidate lists of the
    single-leg modes (see :func:`leg_record`) for ``bench.fusion_replay``.
    """
    from hsearch.errors import HsearchError  # noqa: PLC0415
    from hsearch.search.models import SearchQuery  # noqa: PLC0415
    from hsearch.search.service import SearchService  # noqa: PLC0415
    from hsearch.types import SearchMode  # noqa: PLC0415

    service = SearchService(
        embedder=resources.embedder,
        store=resources.store,
        session_factory=resources.sessions,
        settings=resources.settings.search,
    )
    runs = {mode: ModeRun() for mode in modes}
    candidates = default_candidates(resources.settings)
    started = last_report = time.perf_counter()
    try:
        for n, qid in enumerate(query_ids, 1):
            qrels = dataset.qrels[qid]
            legs: dict[str, list[list[Any]]] = {}
            for mode in modes:
                run = runs[mode]
                t0 = time.perf_counter()
                try:
                    result = await service.search(
                        SearchQuery(
                            tenant_id=TENANT,
                            query=dataset.queries[qid],
                            top_k=TOP_K,
                            mode=SearchMode(mode),
                            candidates=candidates,
                            fusion=fusion,
                        )
                    )
                except HsearchError as exc:
                    run.errors += 1
                    run.per_query.append(evaluate_ranking([], qrels))
                    if run.errors <= MAX_LOGGED_FAILURES:
                        progress(f"  query {qid} ({mode}) failed: {type(exc).__name__}: {exc}")
                    if run.errors == n >= ABORT_AFTER_FAILURES:
                        msg = f"{mode}: the first {n} searches all failed; giving up"
                        raise RuntimeError(msg) from exc
                    continue
                run.latencies_ms.append((time.perf_counter() - t0) * 1000)
                run.degraded += bool(result.degraded)
                run.methods.add(result.method)
                run.per_query.append(evaluate_ranking([h.external_id for h in result.hits], qrels))
                if mode in SINGLE_LEG_MODES:
                    legs[SINGLE_LEG_MODES[mode]] = leg_candidates(result)
            if save_legs is not None:
                record = leg_record(
                    dataset,
                    qid,
                    legs,
                    candidates=candidates,
                    dense_scripts=resources.embedder.info.dense_scripts,
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


def summarise(
    runs: Mapping[str, ModeRun], query_ids: Sequence[str]
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """Mean metrics per mode, and per query-id prefix (the part before ':')."""
    modes = {mode: mean_metrics(run.per_query) for mode, run in runs.items()}
    groups: dict[str, list[int]] = {}
    for i, qid in enumerate(query_ids):
        groups.setdefault(qid.split(":", 1)[0] if ":" in qid else "", []).append(i)
    by_prefix = {
        prefix: {
            "queries": len(idx),
            "modes": {
                mode: mean_metrics([run.per_query[i] for i in idx]) for mode, run in runs.items()
            },
        }
        for prefix, idx in sorted(groups.items())
    }
    return modes, by_prefix


def evaluate_dataset(path: Path, options: Options) -> dict[str, Any]:
    """Build a fresh stack, ingest ``path``'s corpus, run its queries, tear down."""
    from hsearch.db.migrate import upgrade_database  # noqa: PLC0415
    from hsearch.runtime import build_resources  # noqa: PLC0415

    wall = time.perf_counter()
    dataset = load_dataset(path)
    query_ids = select_queries(
        dataset, max_queries=options.max_queries, seed=options.seed, prefix=options.query_prefix
    )
    progress(
        f"{dataset.name}: {len(dataset.corpus)} documents, {len(query_ids)} of "
        f"{len(dataset.queries)} queries, modes {','.join(options.modes)}"
    )
    tmp = Path(tempfile.mkdtemp(prefix=f"hsearch-bench-{dataset.name}-"))
    server: MilvusLiteServer | None = None
    resources: Resources | None = None
    try:
        server = MilvusLiteServer(tmp / "milvus", tmp / "milvus.log")
        settings = build_settings(tmp, server.uri, options)
        upgrade_database(settings.database_url)
        t0 = time.perf_counter()
        resources = build_resources(settings)
        setup_seconds = time.perf_counter() - t0
        encoder = resources.embedder.info.fingerprint
        progress(f"  stack ready in {setup_seconds:.1f} s: milvus {server.uri}, encoder {encoder}")
        ingested = ingest(resources, dataset.corpus)
        progress(
            f"  ingested {ingested['indexed']} documents ({ingested['failed']} failed) as "
            f"{ingested['chunks']} chunks in {ingested['seconds']:.1f} s"
        )
        flush_seconds = None
        if options.flush:
            flush_seconds = flush_collection(server.uri, settings.milvus.collection)
            progress(f"  flushed the collection in {flush_seconds:.1f} s")
        t0 = time.perf_counter()
        runs = asyncio.run(
            run_queries(
                resources,
                dataset,
                query_ids,
                options.modes,
                options.fusion,
                options.save_legs,
            )
        )
        search_seconds = time.perf_counter() - t0
    finally:
        if resources is not None:
            resources.close()
        if server is not None:
            server.stop()
        if options.keep:
            progress(f"  kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    modes, by_prefix = summarise(runs, query_ids)
    methods = sorted(set().union(*(run.methods for run in runs.values())))
    hybrid = runs.get("hybrid")
    result: dict[str, Any] = {
        "dataset": dataset.name,
        "encoder": encoder,
        "queries": len(query_ids),
        "documents": len(dataset.corpus),
        "modes": modes,
        "fusion": ",".join(sorted(hybrid.methods)) if hybrid else ",".join(methods),
        "ingest_seconds": round(ingested["seconds"], 1),
        "search_ms_p50": {
            m: round(percentile(r.latencies_ms, 50), 1) for m, r in runs.items() if r.latencies_ms
        },
        "search_ms_p95": {
            m: round(percentile(r.latencies_ms, 95), 1) for m, r in runs.items() if r.latencies_ms
        },
        "chunks": ingested["chunks"],
        "failed_documents": ingested["failed"],
        "degraded_searches": {m: r.degraded for m, r in runs.items()},
        "failed_searches": {m: r.errors for m, r in runs.items()},
        "settings": {
            "top_k": TOP_K,
            "candidates": default_candidates(settings),
            "chunk_max_chars": settings.ingest.chunk_max_chars,
            "chunk_overlap_chars": settings.ingest.chunk_overlap_chars,
            "search": settings.search.model_dump(mode="json"),
        },
        "setup_seconds": round(setup_seconds, 1),
        "flush_seconds": None if flush_seconds is None else round(flush_seconds, 1),
        "search_seconds": round(search_seconds, 1),
        "total_seconds": round(time.perf_counter() - wall, 1),
        "sample": (
            {"max_queries": options.max_queries, "seed": options.seed}
            if options.max_queries is not None
            else None
        ),
    }
    check = hybrid_check(result)
    if check is not None:
        result["per_query_vs_best_leg"] = per_query_comparison(
            runs["hybrid"].per_query, runs[check[0]].per_query
        )
    if options.query_prefix:
        result["query_prefix"] = options.query_prefix
    if options.by_prefix:
        result["by_prefix"] = by_prefix
    for mode, run in runs.items():
        if run.degraded or run.errors:
            progress(f"  WARNING {mode}: {run.degraded} degraded, {run.errors} failed searches")
    return result


# -- output ----------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def render_text(result: Mapping[str, Any], out: TextIO) -> None:
    """A readable table of one dataset's result."""
    print(
        f"\n{result['dataset']}: {result['queries']} queries, {result['documents']} documents "
        f"({result.get('chunks', '?')} chunks), ingest {result['ingest_seconds']} s, "
        f"fusion {result['fusion']}\nencoder {result['encoder']}",
        file=out,
    )
    header = f"{'mode':<10}" + "".join(f"{METRIC_LABELS[m]:>10}" for m in METRICS) + "  p50 ms"
    print(header, file=out)
    print("-" * len(header), file=out)
    for mode, metrics in result["modes"].items():
        p50 = result["search_ms_p50"].get(mode)
        print(
            f"{mode:<10}"
            + "".join(f"{_fmt(metrics.get(m)):>10}" for m in METRICS)
            + f"  {p50 if p50 is not None else '-':>6}",
            file=out,
        )
    check = hybrid_check(result)
    if check is not None:
        best, ok = check
        print(f"hybrid >= best single leg ({best}) on nDCG@10: {'yes' if ok else 'NO'}", file=out)


def hybrid_check(result: Mapping[str, Any], metric: str = "ndcg@10") -> tuple[str, bool] | None:
    """(best single leg, hybrid >= it) on ``metric``, or None when a mode is missing."""
    modes = result["modes"]
    if not {"semantic", "keyword", "hybrid"} <= set(modes):
        return None
    best = max(("semantic", "keyword"), key=lambda m: modes[m][metric])
    # Strict: a shortfall in the fourth decimal is still a shortfall (the table shows it).
    return best, modes["hybrid"][metric] >= modes[best][metric]


def per_query_comparison(
    hybrid: Sequence[Mapping[str, float]], best: Sequence[Mapping[str, float]]
) -> dict[str, int]:
    """How many queries hybrid ranks better than, as well as, or worse than the set's
    better single leg (nDCG@10 per query): a mean margin of 0.00004 may be one query."""
    counts = {"better": 0, "same": 0, "worse": 0}
    for h, b in zip(hybrid, best, strict=True):
        if math.isclose(h["ndcg@10"], b["ndcg@10"], rel_tol=1e-9, abs_tol=1e-12):
            counts["same"] += 1
        else:
            counts["better" if h["ndcg@10"] > b["ndcg@10"] else "worse"] += 1
    return counts


def render_markdown(results: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    """The docs/benchmarks.md tables: metrics per dataset x mode, then the hybrid check."""
    print("| dataset | queries | docs | mode | nDCG@10 | R@10 | R@100 | p50 ms |", file=out)
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |", file=out)
    for r in results:
        for mode in MODES:
            if mode not in r["modes"]:
                continue
            m = r["modes"][mode]
            p50 = r["search_ms_p50"].get(mode)
            print(
                f"| {r['dataset']} | {r['queries']} | {r['documents']} | {mode} | "
                + " | ".join(_fmt(m.get(k)) for k in METRICS)
                + f" | {p50 if p50 is not None else '-'} |",
                file=out,
            )
    print(file=out)
    print(
        "| dataset | best single leg (nDCG@10) | hybrid nDCG@10 | margin | hybrid ≥ best leg "
        "(nDCG@10) | hybrid ≥ best leg (R@100) | queries better / same / worse |",
        file=out,
    )
    print("| --- | --- | ---: | ---: | :---: | :---: | ---: |", file=out)
    for r in results:
        check = hybrid_check(r)
        if check is None:
            continue
        best, ok = check
        recall = hybrid_check(r, "recall@100")
        recall_ok = recall is not None and recall[1]
        print(
            f"| {r['dataset']} | {best} {_fmt(r['modes'][best]['ndcg@10'])} | "
            f"{_fmt(r['modes']['hybrid']['ndcg@10'])} | "
            f"{r['modes']['hybrid']['ndcg@10'] - r['modes'][best]['ndcg@10']:+.5f} | "
            f"{'✓' if ok else '✗'} | "
            f"{'✓' if recall_ok else '✗'} | "
            f"{' / '.join(str(n) for n in r.get('per_query_vs_best_leg', {}).values()) or '-'} |",
            file=out,
        )
    print(file=out)
    print(
        "| dataset | docs | chunks | ingest s | queries x modes | search s | total s |",
        file=out,
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |", file=out)
    for r in results:
        print(
            f"| {r['dataset']} | {r['documents']} | {r.get('chunks', '-')} | "
            f"{r.get('ingest_seconds', '-')} | {r['queries']} x {len(r['modes'])} | "
            f"{r.get('search_seconds', '-')} | {r.get('total_seconds', '-')} |",
            file=out,
        )
    grouped = [r for r in results if len(r.get("by_prefix") or {}) > 1]
    for r in grouped:
        print(f"\n{r['dataset']} by query-id prefix (nDCG@10):\n", file=out)
        modes = [m for m in MODES if m in r["modes"]]
        print("| prefix | queries | " + " | ".join(modes) + " |", file=out)
        print("| --- | ---: |" + " ---: |" * len(modes), file=out)
        for prefix, group in r["by_prefix"].items():
            cells = " | ".join(_fmt(group["modes"][m]["ndcg@10"]) for m in modes)
            print(f"| {prefix or '-'} | {group['queries']} | {cells} |", file=out)


def read_results(source: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]


# -- command line ----------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.relevance",
        description="Relevance (nDCG@10, R@10, R@100) of hsearch's search modes on "
        "BEIR-format datasets, through the real ingestion and search code.",
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--dataset", type=Path, action="append", metavar="DIR",
        help="a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv); repeatable",
    )  # fmt: skip
    what.add_argument("--all", action="store_true", help=f"every folder under {DATASETS_ROOT}")
    what.add_argument(
        "--markdown", metavar="JSONL",
        help="render earlier --json output (a file, or - for stdin) as Markdown tables; "
        "runs nothing",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="one JSON object per dataset")
    parser.add_argument(
        "--encoder", choices=["offline", "bge-m3", "fake"], default="offline",
        help="offline (MiniLM + BM25, the default), bge-m3 (needs --bge-m3-path) or fake "
        "(hashing encoder: a plumbing smoke test, meaningless numbers)",
    )  # fmt: skip
    parser.add_argument("--bge-m3-path", type=Path, help="directory holding BGE-M3 weights")
    parser.add_argument(
        "--max-queries", type=int, metavar="N",
        help="evaluate a seeded random sample of N queries (default: all)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed")
    parser.add_argument(
        "--modes", default=",".join(MODES),
        help=f"comma-separated subset of {','.join(MODES)} (default: all three)",
    )  # fmt: skip
    parser.add_argument(
        "--fusion", choices=("adaptive", "rrf", "score"),
        help="fusion method for hybrid (default: the configured default)",
    )  # fmt: skip
    parser.add_argument(
        "--query-prefix", metavar="P", help="only queries whose id starts with P (e.g. en:)"
    )
    parser.add_argument(
        "--by-prefix", action="store_true",
        help="also report metrics per query-id prefix (the part before ':', e.g. languages)",
    )  # fmt: skip
    parser.add_argument(
        "--no-flush", dest="flush", action="store_false",
        help="search right after ingesting, without sealing Milvus' growing segments first",
    )  # fmt: skip
    parser.add_argument(
        "--save-legs", type=Path, metavar="JSONL",
        help="append each query's dense and sparse candidate lists (from the semantic and "
        "keyword modes) to JSONL, for python -m bench.fusion_replay",
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    parser.add_argument("--verbose", action="store_true", help="hsearch's own INFO logs")
    args = parser.parse_args(argv)
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = set(modes) - set(MODES)
    if unknown or not modes:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {','.join(MODES)}")
    args.modes = modes
    if args.save_legs is not None and not set(SINGLE_LEG_MODES) <= set(modes):
        parser.error("--save-legs needs the semantic and keyword modes (their hits are the legs)")
    if args.encoder == "bge-m3" and args.bge_m3_path is None:
        parser.error("--encoder bge-m3 needs --bge-m3-path")
    if args.max_queries is not None and args.max_queries < 1:
        parser.error("--max-queries must be >= 1")
    return args


def _terminate(signum: int, _frame: FrameType | None) -> None:
    # SIGTERM unwinds like Ctrl-C, so the finally blocks stop the Milvus server.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if args.markdown:
        render_markdown(read_results(args.markdown), sys.stdout)
        return 0

    # Nothing may reach a model hub: the encoders load from disk.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )  # fmt: skip
    logging.getLogger("hsearch").setLevel(logging.INFO if args.verbose else logging.WARNING)
    # Ctrl-C and SIGTERM unwind through the finally blocks that stop the Milvus server
    # (SIGINT explicitly: a shell starting us in the background would have ignored it).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)

    # Import every hsearch module up front: the process then runs one consistent version
    # of the code even if the working tree changes during a long run.
    for module in ("hsearch.runtime", "hsearch.db.migrate", "hsearch.ingestion.service",
                   "hsearch.search.service", "hsearch.errors"):  # fmt: skip
        importlib.import_module(module)

    if args.all:
        paths = sorted(p for p in DATASETS_ROOT.iterdir() if (p / "corpus.jsonl").is_file())
    else:
        paths = list(args.dataset)
    for path in paths:
        if not all((path / f).is_file() for f in ("corpus.jsonl", "queries.jsonl", "qrels.tsv")):
            progress(f"{path}: not a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv)")
            return 2
    options = Options(
        encoder=args.encoder,
        bge_m3_path=args.bge_m3_path,
        max_queries=args.max_queries,
        seed=args.seed,
        modes=args.modes,
        query_prefix=args.query_prefix,
        by_prefix=args.by_prefix,
        keep=args.keep,
        flush=args.flush,
        fusion=args.fusion,
    )
    try:
        with contextlib.ExitStack() as stack:
            if args.save_legs is not None:
                options.save_legs = stack.enter_context(args.save_legs.open("a", encoding="utf-8"))
            for path in paths:
                result = evaluate_dataset(path, options)
                progress(f"{result['dataset']}: done in {result['total_seconds']} s")
                if args.json:
                    print(json.dumps(result, ensure_ascii=False), flush=True)
                else:
                    render_text(result, sys.stdout)
    except KeyboardInterrupt:
        progress("interrupted")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
