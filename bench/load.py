"""Load test: concurrent search clients against the whole stack while ingestion runs.

The stack is the one ``hsearch run`` starts, from the same commands
(:mod:`hsearch.local.processes`), in a temporary data directory of its own:

* a Milvus Lite gRPC server (:func:`start_milvus_lite`);
* a redis-server of this run's own on a free loopback port (result and embedding
  caches, rate limits, the Celery broker): nothing is shared with other work on the
  machine (``--redis-url`` uses an existing one instead);
* a Postgres database of its own (``bench_load_<pid>``, created on ``--postgres-url``'s
  server and dropped at the end), migrated with Alembic;
* the API, uvicorn with ``--api-workers`` processes (default: one per core), and one
  Celery ingest worker (:func:`start_worker`);
* the **fake encoder** (``encoder.kind = fake``: hashed term vectors, no model), so the
  measurement is the service around the encoder (HTTP, auth, rate limits, caches,
  planner, Milvus legs, fusion, hydration), not the encoder.

``--tenants`` tenants (one API key each, made with the tenancy service) each get
``--documents`` generated documents through ``POST /v1/documents``, indexed by the
worker before the clock starts. Then, for ``--warmup`` seconds (not measured) and
``--duration`` seconds (measured):

* ``--clients`` asyncio clients (one shared ``httpx.AsyncClient`` on loopback, a
  keep-alive connection per client) each loop: pick a tenant at random, send
  ``POST /v1/search`` (``top_k`` 10, hybrid), wait ``--think-ms`` (uniform 0.5x-1.5x).
  With probability ``--hot-share`` the query is one of the tenant's ``--hot-queries``
  fixed queries (answered from the result cache once searched, until the tenant's data
  changes), else a fresh random one (a miss). Whether it was a hit is read from the
  response's ``cached`` field;
* one ingest client sends a job of ``--ingest-batch`` documents every
  ``--ingest-interval`` seconds to the first ``--ingest-tenants`` tenants in turn (the
  others only search, so their cached results live out their TTL), through
  ``POST /v1/documents``: new
  revisions of the tenant's existing documents (same external ids, new text), so the
  corpus keeps its size and memory growth is not data growth; the real worker indexes
  them while the searches run (each finished job changes the tenant's data generation,
  which also turns its cached results into misses). It follows its jobs with
  ``GET /v1/jobs/{id}``.

Rate limits are on and set far above the offered load (each key's limit per second is
at least 10 times what the clients could send with no latency at all); the concurrency
cap (``api.max_concurrent_searches``) is set above the number of clients. So the
expected count of 429, 503, errors and degraded answers is 0.

Reported: searches/s over the measured window (and its 30 s windows' min and max),
latency p50/p95/p99 as the client sees it, counts of errors, 429, 503 and degraded
answers, hits and misses, the ingestion's jobs and documents, and the resident memory of
every process of the stack (each API process, the Celery worker and its pool process,
Milvus Lite, Redis) after the warm-up and at the end, with the ratio end / after
warm-up (target: at most 1.10 for each of the product's processes; Redis is reported
but not held to it, :data:`OUTSIDE_RSS_TARGET`), and the load average.

Usage (from the repository root)::

    nice -n 5 python -m bench.load --json > load.json       # 10 minutes measured
    python -m bench.load --markdown load.json               # its tables
    python -m bench.load --duration 20                      # a smoke run (~1 minute)

Ends by itself; every child is stopped on exit, on Ctrl-C and on SIGTERM (and dies with
this process otherwise). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx
import psutil
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bench.interrupt import progress, run_and_print
from bench.metrics import percentile
from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.local.processes import (
    LOCALHOST,
    Child,
    free_port,
    port_open,
    start_api,
    start_milvus_lite,
    start_worker,
    stop_all,
)
from hsearch.metrics.exposition import MULTIPROC_ENV, prepare_multiprocess_dir
from hsearch.tenancy.factory import open_tenancy
from hsearch.types import FINISHED_JOB_STATUSES, SEARCHABLE_JOB_STATUSES

POSTGRES_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
TOP_K = 10
VOCABULARY = 3000
WORDS_PER_DOCUMENT = (60, 160)
WORDS_PER_QUERY = (2, 5)
WINDOW_S = 30.0
"""The measured window is cut in windows of this long: their rates show it sustained."""
RSS_TARGET = 1.10
OUTSIDE_RSS_TARGET = ("redis",)
"""Reported, not held to the target: Redis grows with cache entries (a result per new
search, a page snapshot, the query's embedding) until their TTLs expire them
(``cache.result_ttl_s`` 300 s, ``cache.snapshot_ttl_s`` 600 s, ``cache.embedding_ttl_s``
a day), by design; the process is Redis's, not the product's."""
REQUEST_TIMEOUT_S = 30.0
SEED_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 20.0
MAX_LOGGED = 10
"""Answers other than a plain 200 shown on stderr (all are counted)."""
ACTOR = "bench.load"


# -- pure parts ----------------------------------------------------------------------


class Outcome(StrEnum):
    """What one search request got."""

    OK = "ok"
    DEGRADED = "degraded"  # 200, but a leg failed or timed out
    RATE_LIMITED = "rate_limited"  # 429
    UNAVAILABLE = "unavailable"  # 503 (overloaded, a backend down)
    ERROR = "error"  # any other status, a malformed body, or no answer at all


def classify(status: int | None, body: Mapping[str, Any] | None) -> Outcome:
    """The outcome of a response with ``status`` (``None``: no response) and its JSON
    ``body`` (``None`` when it was not a JSON object)."""
    if status == 429:
        return Outcome.RATE_LIMITED
    if status == 503:
        return Outcome.UNAVAILABLE
    if status != 200 or body is None or not isinstance(body.get("cached"), bool):
        return Outcome.ERROR
    return Outcome.DEGRADED if body.get("degraded") else Outcome.OK


@dataclass(frozen=True)
class Sample:
    """One search: when it ended (seconds from the start of the measured window), how
    long it took, what it got, and whether the answer came from the result cache."""

    at: float
    seconds: float
    outcome: Outcome
    cached: bool = False
    hot: bool = False


def window_rates(
    ends: Sequence[float], *, duration: float, window: float = WINDOW_S
) -> list[float]:
    """Completions per second in each whole ``window`` of ``[0, duration)`` (the last,
    partial window left out unless it is the only one)."""
    if duration <= 0:
        return []
    count = max(1, int(duration // window))
    width = duration / count if duration < window else window
    bins = [0] * count
    for at in ends:
        i = int(at // width)
        if 0 <= i < count:
            bins[i] += 1
    return [round(b / width, 2) for b in bins]


def summarize(samples: Sequence[Sample], *, duration: float) -> dict[str, Any]:
    """The measured window's figures: throughput, latency of answered searches, and the
    count of each outcome (``errors``, ``429``, ``503``, ``degraded``), hits and misses."""
    answered = [s for s in samples if s.outcome in (Outcome.OK, Outcome.DEGRADED)]
    counts = {outcome: sum(1 for s in samples if s.outcome is outcome) for outcome in Outcome}
    ms = [s.seconds * 1000 for s in answered]
    hits = [s.seconds * 1000 for s in answered if s.cached]
    misses = [s.seconds * 1000 for s in answered if not s.cached]
    rates = window_rates([s.at for s in answered], duration=duration)

    def pct(values: Sequence[float], p: float) -> float | None:
        return round(percentile(values, p), 2) if values else None

    return {
        "requests": len(samples),
        "searches": len(answered),
        "searches_per_s": round(len(answered) / duration, 2) if duration > 0 else 0.0,
        "window_rates_per_s": {
            "min": min(rates) if rates else None,
            "max": max(rates) if rates else None,
            "windows": len(rates),
            "window_s": WINDOW_S,
        },
        "latency_ms": {
            "p50": pct(ms, 50),
            "p95": pct(ms, 95),
            "p99": pct(ms, 99),
            "max": round(max(ms), 2) if ms else None,
            "mean": round(sum(ms) / len(ms), 2) if ms else None,
        },
        "errors": counts[Outcome.ERROR],
        "rate_limited_429": counts[Outcome.RATE_LIMITED],
        "unavailable_503": counts[Outcome.UNAVAILABLE],
        "degraded": counts[Outcome.DEGRADED],
        "cache": {
            "hits": len(hits),
            "misses": len(misses),
            "hit_ratio": round(len(hits) / len(answered), 3) if answered else None,
            "hot_requests": sum(1 for s in samples if s.hot),
            "hit_p50_ms": pct(hits, 50),
            "miss_p50_ms": pct(misses, 50),
            "miss_p99_ms": pct(misses, 99),
        },
    }


def rss_growth(
    warm: Mapping[str, int],
    end: Mapping[str, int],
    *,
    target: float = RSS_TARGET,
    outside_target: Collection[str] = (),
) -> dict[str, Any]:
    """Resident memory per process after the warm-up and at the end (MiB), each ratio
    end / warm, the totals, and whether every process stayed within ``target``.

    Processes whose role (the name's first word) is in ``outside_target`` are reported
    but not held to it. A process present at only one of the two moments (it died, or
    was started again) fails the target: its growth cannot be told.
    """
    processes: dict[str, dict[str, Any]] = {}
    held: list[float | None] = []
    for name in sorted(set(warm) | set(end)):
        w, e = warm.get(name), end.get(name)
        r = round(e / w, 3) if w and e is not None else None
        counted = name.split(" ", 1)[0] not in outside_target
        if counted:
            held.append(r)
        processes[name] = {
            "warm_mb": None if w is None else round(w / 2**20, 1),
            "end_mb": None if e is None else round(e / 2**20, 1),
            "ratio": r,
            "held_to_target": counted,
        }
    warm_total, end_total = sum(warm.values()), sum(end.values())
    ratios = [r for r in held if r is not None]
    worst = max(ratios) if ratios else None
    return {
        "processes": processes,
        "total_warm_mb": round(warm_total / 2**20, 1),
        "total_end_mb": round(end_total / 2**20, 1),
        "total_ratio": round(end_total / warm_total, 3) if warm_total else None,
        "max_ratio": worst,
        "target": target,
        "met": bool(held) and None not in held and worst is not None and worst <= target,
    }


def rate_limit_for(*, clients: int, think_s: float) -> str:
    """Each key's limit: ten times what all clients could send to one key if every
    search took no time at all (with ``think_s`` = 0, one per millisecond each)."""
    per_client = 1.0 / max(think_s * 0.5, 0.001)  # the shortest think time drawn
    offered = clients * per_client  # all of them on one key: an upper bound
    return f"{max(1000, math.ceil(offered * 10))}/second"


def targets_met(summary: Mapping[str, Any], rss: Mapping[str, Any]) -> dict[str, bool]:
    return {
        "errors": summary["errors"] == 0,
        "rate_limited_429": summary["rate_limited_429"] == 0,
        "unavailable_503": summary["unavailable_503"] == 0,
        "degraded": summary["degraded"] == 0,
        "rss_within_10pct": bool(rss["met"]),
    }


def make_vocabulary(seed: int, size: int = VOCABULARY) -> list[str]:
    """``size`` distinct pronounceable words, the same for a given ``seed``."""
    rng = random.Random(seed)
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: dict[str, None] = {}
    while len(words) < size:
        syllables = rng.randint(2, 4)
        words["".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(syllables))] = None
    return list(words)


@dataclass
class Corpus:
    """Generated documents and queries over a Zipf-weighted vocabulary (common words
    are common), reproducible from ``seed``."""

    seed: int
    words: list[str] = field(init=False)
    _weights: list[float] = field(init=False)

    def __post_init__(self) -> None:
        self.words = make_vocabulary(self.seed)
        self._weights = [1.0 / (rank + 1) for rank in range(len(self.words))]

    def text(self, rng: random.Random, count: int) -> str:
        return " ".join(rng.choices(self.words, weights=self._weights, k=count))

    def document(self, tenant: str, n: int, *, revision: int) -> dict[str, Any]:
        rng = random.Random(f"{self.seed}:{tenant}:{n}:{revision}")
        return {
            "external_id": f"doc-{n}",
            "title": self.text(rng, 4),
            "text": self.text(rng, rng.randint(*WORDS_PER_DOCUMENT)),
            "source": ("web", "wiki", "mail")[n % 3],
            "tags": [f"rev-{revision % 5}"],
            "metadata": {"revision": revision},
        }

    def query(self, rng: random.Random) -> str:
        # Queries skip the 50 commonest words (stop-word-like) and lean to mid frequency.
        return " ".join(
            rng.choice(self.words[50:1000]) for _ in range(rng.randint(*WORDS_PER_QUERY))
        )


def markdown(result: Mapping[str, Any]) -> str:
    s, o = result["search"], result["offered"]
    lat, cache = s["latency_ms"], s["cache"]
    lines = [
        f"{o['clients']} clients, think {o['think_ms']} ms, {o['tenants']} tenants, "
        f"{o['hot_share']:.0%} hot queries; {result['duration_s']} s measured after "
        f"{result['warmup_s']} s warm-up; API workers {result['stack']['api_workers']} on "
        f"{result['machine']['cpus']} CPUs; load average {result['load_average_before'][0]} -> "
        f"{result['load_average_after'][0]}",
        "",
        "| searches/s | p50 ms | p95 ms | p99 ms | errors | 429 | 503 | degraded | hits | misses |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {s['searches_per_s']} | {lat['p50']} | {lat['p95']} | {lat['p99']} | {s['errors']} "
        f"| {s['rate_limited_429']} | {s['unavailable_503']} | {s['degraded']} | {cache['hits']} "
        f"| {cache['misses']} |",
        "",
        "| process | RSS after warm-up MiB | RSS at end MiB | end / warm-up |",
        "| --- | ---: | ---: | ---: |",
    ]
    rss = result["rss"]
    for name, p in rss["processes"].items():
        held = "" if p.get("held_to_target", True) else " (not held to the target)"
        lines.append(f"| {name} | {p['warm_mb']} | {p['end_mb']} | {p['ratio']}{held} |")
    lines.append(
        f"| **all** | {rss['total_warm_mb']} | {rss['total_end_mb']} | {rss['total_ratio']} |"
    )
    lines += ["", json.dumps({"ingest": result["ingest"], "met": result["met"]})]
    return "\n".join(lines)


# -- the stack ----------------------------------------------------------------------------


def redis_server_command(port: int, data_dir: Path) -> list[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        msg = "redis-server is not installed: pass --redis-url"
        raise SystemExit(msg)
    return [
        *(binary, "--port", str(port), "--bind", LOCALHOST),
        *("--save", "", "--appendonly", "no", "--dir", str(data_dir)),
    ]


@contextlib.contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    """A new, empty database of this run's own on ``admin_url``'s server; dropped after."""
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    name = f"bench_load_{os.getpid()}_{secrets.token_hex(3)}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with contextlib.suppress(Exception), admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def stack_env(
    *,
    data_dir: Path,
    database_url: str,
    redis_url: str,
    milvus_uri: str,
    rate_limit: str,
    max_concurrent: int,
) -> dict[str, str]:
    """The ``HSEARCH_*`` settings every process of the stack reads (one settings object,
    from the environment, as deployed)."""
    return {
        "HSEARCH_DATA_DIR": str(data_dir),
        "HSEARCH_DATABASE__URL": database_url,
        "HSEARCH_REDIS__URL": redis_url,
        "HSEARCH_MILVUS__URI": milvus_uri,
        "HSEARCH_MILVUS__COLLECTION": "bench_load",
        "HSEARCH_ENCODER__KIND": "fake",
        "HSEARCH_AUTH__SECRET": secrets.token_hex(32),
        "HSEARCH_RATELIMIT__ENABLED": "true",
        "HSEARCH_RATELIMIT__DEFAULT": rate_limit,
        "HSEARCH_API__MAX_CONCURRENT_SEARCHES": str(max_concurrent),
        # A log line per request would be measured too; warnings and errors still show.
        "HSEARCH_LOG_LEVEL": "WARNING",
        MULTIPROC_ENV: str(prepare_multiprocess_dir(data_dir / "metrics")),
    }


def _kind(role: str, proc: psutil.Process) -> str:
    """What a descendant of a ``role`` process is, from its command line."""
    if role == "celery":
        return "pool process"  # the prefork pool's child, which runs the tasks
    with contextlib.suppress(psutil.Error):
        cmd = " ".join(proc.cmdline())
        if "resource_tracker" in cmd:
            return "resource tracker"
        if "spawn_main" in cmd:
            return "worker"
        return str(proc.name())
    return "?"


def process_rss(children: Mapping[str, Child]) -> dict[str, int]:
    """Resident memory of every process of the stack by role and pid (``api worker
    (pid 123)``): each child and its descendants."""
    out: dict[str, int] = {}
    for role, child in children.items():
        if not child.alive():
            continue
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(child.proc.pid)
            procs = [root, *sorted(root.children(recursive=True), key=lambda p: p.pid)]
            for n, proc in enumerate(procs):
                kind = "main" if n == 0 else _kind(role, proc)
                with contextlib.suppress(psutil.Error):  # one that just ended
                    out[f"{role} {kind} (pid {proc.pid})"] = proc.memory_info().rss
    return out


def by_role(rss: Mapping[str, int]) -> dict[str, float]:
    """Total MiB per role (the first word of each name)."""
    out: dict[str, float] = {}
    for name, value in rss.items():
        role = name.split(" ", 1)[0]
        out[role] = round(out.get(role, 0.0) + value / 2**20, 1)
    return out


# -- the clients --------------------------------------------------------------------------


@dataclass
class Load:
    """Shared state of the clients: the samples and when the measured window started."""

    samples: list[Sample] = field(default_factory=list)
    measuring_since: float | None = None
    logged: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)


async def search_client(
    http: httpx.AsyncClient,
    load: Load,
    *,
    keys: Mapping[str, str],
    hot: Mapping[str, Sequence[str]],
    corpus: Corpus,
    rng: random.Random,
    think_s: float,
    hot_share: float,
) -> None:
    tenants = sorted(keys)
    while not load.stop.is_set():
        tenant = rng.choice(tenants)
        is_hot = rng.random() < hot_share
        query = rng.choice(hot[tenant]) if is_hot else corpus.query(rng)
        started = time.perf_counter()
        status: int | None = None
        body: dict[str, Any] | None = None
        try:
            response = await http.post(
                "/v1/search",
                json={"query": query, "top_k": TOP_K, "mode": "hybrid"},
                headers={"Authorization": f"Bearer {keys[tenant]}"},
            )
            status = response.status_code
            with contextlib.suppress(ValueError):
                parsed = response.json()
                body = parsed if isinstance(parsed, dict) else None
        except httpx.HTTPError:
            pass
        ended = time.perf_counter()
        outcome = classify(status, body)
        since = load.measuring_since
        if since is not None and started >= since:
            cached = bool(body and body.get("cached"))
            load.samples.append(Sample(ended - since, ended - started, outcome, cached, is_hot))
        if outcome is not Outcome.OK and load.logged < MAX_LOGGED:
            load.logged += 1
            detail = body.get("degraded") if outcome is Outcome.DEGRADED and body else body
            progress(f"  search {outcome} ({status}): {detail}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(load.stop.wait(), think_s * rng.uniform(0.5, 1.5))


@dataclass
class Ingest:
    """The background ingestion: jobs sent, their outcomes, the submissions refused."""

    submitted: int = 0
    documents: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    finished: dict[str, int] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)
    pending: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Unfinished jobs: status URL -> (tenant, when sent)."""

    def report(self, *, duration: float) -> dict[str, Any]:
        done = sorted(self.seconds)
        return {
            "jobs_submitted": self.submitted,
            "documents_submitted": self.documents,
            "documents_per_s": round(self.documents / duration, 2) if duration > 0 else 0.0,
            "jobs_finished": dict(sorted(self.finished.items())),
            "jobs_pending_at_end": len(self.pending),
            "submissions_refused": dict(sorted(self.refused.items())),
            "job_seconds_p50": round(percentile(done, 50), 2) if done else None,
            "job_seconds_max": round(done[-1], 2) if done else None,
        }


async def ingest_client(
    http: httpx.AsyncClient,
    load: Load,
    ingest: Ingest,
    *,
    keys: Mapping[str, str],
    corpus: Corpus,
    documents: int,
    batch: int,
    interval: float,
) -> None:
    """A job of ``batch`` new revisions every ``interval`` seconds to the tenants of
    ``keys`` in turn, each job followed until it finishes."""
    tenants = sorted(keys)
    turn = 0
    next_at = time.perf_counter()
    while not load.stop.is_set():
        tenant = tenants[turn % len(tenants)]
        revision = 1 + turn // len(tenants)
        start = (revision - 1) * batch % documents
        docs = [
            corpus.document(tenant, (start + i) % documents, revision=revision)
            for i in range(batch)
        ]
        turn += 1
        auth = {"Authorization": f"Bearer {keys[tenant]}"}
        try:
            response = await http.post("/v1/documents", json={"documents": docs}, headers=auth)
            if response.status_code == 202:
                job = response.json()
                ingest.pending[job["status_url"]] = (tenant, time.perf_counter())
                if load.measuring_since is not None:
                    ingest.submitted += 1
                    ingest.documents += len(docs)
            else:
                ingest.refused[str(response.status_code)] = (
                    ingest.refused.get(str(response.status_code), 0) + 1
                )
        except httpx.HTTPError as exc:
            ingest.refused[type(exc).__name__] = ingest.refused.get(type(exc).__name__, 0) + 1
        await poll_jobs(http, ingest, keys=keys, measuring=load.measuring_since is not None)
        next_at += interval
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(load.stop.wait(), max(0.0, next_at - time.perf_counter()))


async def poll_jobs(
    http: httpx.AsyncClient, ingest: Ingest, *, keys: Mapping[str, str], measuring: bool
) -> None:
    for url, (tenant, sent) in list(ingest.pending.items()):
        try:
            response = await http.get(url, headers={"Authorization": f"Bearer {keys[tenant]}"})
        except httpx.HTTPError:
            continue
        if response.status_code != 200:
            continue
        status = response.json()["status"]
        if status in FINISHED_JOB_STATUSES:
            del ingest.pending[url]
            if measuring:
                ingest.finished[status] = ingest.finished.get(status, 0) + 1
                ingest.seconds.append(time.perf_counter() - sent)


async def seed(
    http: httpx.AsyncClient, *, keys: Mapping[str, str], corpus: Corpus, documents: int
) -> float:
    """Every tenant's ``documents`` (revision 0), one job each; waits until all are
    searchable. Returns the seconds it took."""
    started = time.perf_counter()
    jobs: dict[str, str] = {}
    for tenant, key in keys.items():
        docs = [corpus.document(tenant, n, revision=0) for n in range(documents)]
        response = await http.post(
            "/v1/documents", json={"documents": docs}, headers={"Authorization": f"Bearer {key}"}
        )
        response.raise_for_status()
        jobs[tenant] = response.json()["status_url"]
    deadline = started + SEED_TIMEOUT_S
    while jobs:
        for tenant, url in list(jobs.items()):
            response = await http.get(url, headers={"Authorization": f"Bearer {keys[tenant]}"})
            response.raise_for_status()
            status = response.json()["status"]
            if status in SEARCHABLE_JOB_STATUSES:
                del jobs[tenant]
            elif status in FINISHED_JOB_STATUSES:
                msg = f"seeding tenant {tenant}: job ended {status}: {response.json()}"
                raise RuntimeError(msg)
        if time.perf_counter() > deadline:
            msg = f"seeding not finished after {SEED_TIMEOUT_S:.0f} s: {sorted(jobs)}"
            raise RuntimeError(msg)
        await asyncio.sleep(0.5)
    return time.perf_counter() - started


async def drive(
    args: argparse.Namespace,
    *,
    base_url: str,
    keys: Mapping[str, str],
    children: Mapping[str, Child],
) -> dict[str, Any]:
    corpus = Corpus(args.seed)
    rng = random.Random(args.seed)
    hot = {t: [corpus.query(rng) for _ in range(args.hot_queries)] for t in sorted(keys)}
    limits = httpx.Limits(
        max_connections=args.clients + 4, max_keepalive_connections=args.clients + 4
    )
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout) as http:
        seeded_s = await seed(http, keys=keys, corpus=corpus, documents=args.documents)
        progress(f"seeded {len(keys)} x {args.documents} documents in {seeded_s:.1f} s")
        load, ingest = Load(), Ingest()
        tasks = [
            asyncio.create_task(
                search_client(
                    http,
                    load,
                    keys=keys,
                    hot=hot,
                    corpus=corpus,
                    rng=random.Random(f"{args.seed}:client:{n}"),
                    think_s=args.think_ms / 1000,
                    hot_share=args.hot_share,
                )
            )
            for n in range(args.clients)
        ]
        tasks.append(
            asyncio.create_task(
                ingest_client(
                    http,
                    load,
                    ingest,
                    keys={t: keys[t] for t in sorted(keys)[: args.ingest_tenants]},
                    corpus=corpus,
                    documents=args.documents,
                    batch=args.ingest_batch,
                    interval=args.ingest_interval,
                )
            )
        )
        try:
            progress(f"warm-up: {args.warmup:.0f} s")
            await watch(tasks, children, seconds=args.warmup)
            rss_warm = process_rss(children)
            load_before = os.getloadavg()
            load.measuring_since = time.perf_counter()
            progress(f"measuring: {args.duration:.0f} s")
            rss_trend = await watch(
                tasks, children, seconds=args.duration, load=load, every=WINDOW_S
            )
            rss_end = process_rss(children)
            load_after = os.getloadavg()
            measured = time.perf_counter() - load.measuring_since
        finally:
            load.stop.set()
            _, late = await asyncio.wait(tasks, timeout=REQUEST_TIMEOUT_S + 5)
            for task in late:
                task.cancel()
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise RuntimeError("a client failed") from task.exception()
    duration = min(measured, args.duration)
    samples = [s for s in load.samples if s.at <= duration]  # one in flight at the end: out
    summary = summarize(samples, duration=duration)
    rss = rss_growth(rss_warm, rss_end, outside_target=OUTSIDE_RSS_TARGET)
    rss["mb_by_role_every_window"] = rss_trend
    return {
        "search": summary,
        "ingest": ingest.report(duration=duration),
        "rss": rss,
        "seed_s": round(seeded_s, 1),
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
        "met": targets_met(summary, rss),
    }


async def watch(
    tasks: Sequence[asyncio.Task[None]],
    children: Mapping[str, Child],
    *,
    seconds: float,
    load: Load | None = None,
    every: float | None = None,
) -> list[dict[str, float]]:
    """Let the clients run ``seconds``; stop early if one of them or a process of the
    stack died. With ``every``, the RSS (MiB) of each role every that many seconds."""
    deadline = time.perf_counter() + seconds
    next_sample = time.perf_counter() + (every or seconds + 1)
    trend: list[dict[str, float]] = []
    while (left := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(min(1.0, left))
        if failed := [t for t in tasks if t.done()]:
            failed[0].result()  # raises what ended it
            raise RuntimeError("a client ended early")
        if dead := [role for role, c in children.items() if not c.alive()]:
            msg = f"a process of the stack exited: {dead}"
            raise RuntimeError(msg)
        if every is not None and time.perf_counter() >= next_sample:
            next_sample += every
            trend.append(by_role(process_rss(children)))
            if load is not None:
                progress(f"  {len(load.samples)} searches so far; RSS MiB {trend[-1]}")
    return trend


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="hsearch-bench-load-"))
    children: dict[str, Child] = {}
    api_workers = args.api_workers or os.cpu_count() or 1
    try:
        with contextlib.ExitStack() as stack:
            database_url = stack.enter_context(postgres_database(args.postgres_url))
            redis_url = args.redis_url
            if redis_url is None:
                port = free_port()
                redis = Child(
                    "redis", argv=redis_server_command(port, tmp), env={}, log=tmp / "redis.log"
                )
                children["redis"] = redis
                redis.wait_until(lambda: port_open(port), timeout=20, what="redis-server")
                redis_url = f"redis://{LOCALHOST}:{port}/0"
            milvus, milvus_uri = start_milvus_lite(tmp / "milvus", log=tmp / "milvus.log")
            children["milvus"] = milvus
            env = stack_env(
                data_dir=tmp,
                database_url=database_url,
                redis_url=redis_url,
                milvus_uri=milvus_uri,
                rate_limit=rate_limit_for(clients=args.clients, think_s=args.think_ms / 1000),
                max_concurrent=args.clients + 16,
            )
            os.environ.update(env)  # this process reads the same settings (tenancy, migrations)
            settings = Settings(_env_file=None)
            upgrade_database(settings.database_url)
            with open_tenancy(settings) as tenancy:
                keys = {
                    f"load{t}": tenancy.create_tenant(
                        f"load {t}", tenant_id=f"load{t}", actor=ACTOR
                    ).key.key
                    for t in range(args.tenants)
                }
            child_env = dict(os.environ)
            worker = start_worker(
                child_env, node=f"load{os.getpid()}@%h", log=tmp / "worker.log", standalone=True
            )
            children["celery"] = worker
            api, base_url = start_api(child_env, log=tmp / "api.log", workers=api_workers)
            children["api"] = api
            progress(f"stack up: API {base_url} ({api_workers} workers), Milvus {milvus_uri}")
            result = asyncio.run(drive(args, base_url=base_url, keys=keys, children=children))
    finally:
        stop_all(list(reversed(children.values())), timeout=STOP_TIMEOUT_S)
        if args.keep:
            progress(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return {
        "benchmark": "load",
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "offered": {
            "clients": args.clients,
            "think_ms": args.think_ms,
            "tenants": args.tenants,
            "documents_per_tenant": args.documents,
            "hot_share": args.hot_share,
            "hot_queries_per_tenant": args.hot_queries,
            "ingest_tenants": args.ingest_tenants,
            "ingest_batch": args.ingest_batch,
            "ingest_interval_s": args.ingest_interval,
        },
        "stack": {
            "api_workers": api_workers,
            "encoder": "fake",
            "rate_limit_per_key": env["HSEARCH_RATELIMIT__DEFAULT"],
            "max_concurrent_searches_per_process": int(env["HSEARCH_API__MAX_CONCURRENT_SEARCHES"]),
            "metadata": "postgres",
            "redis": "private redis-server" if args.redis_url is None else "given",
        },
        **result,
        "machine": {"cpus": os.cpu_count(), "nice": os.nice(0)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--duration", type=float, default=600.0, help="measured seconds")
    parser.add_argument(
        "--warmup", type=float, default=None,
        help="seconds of load before the clock starts (default: 60, or a quarter of a "
        "shorter --duration)",
    )  # fmt: skip
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument(
        "--think-ms", type=float, default=200.0, help="mean pause between a client's searches"
    )
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--documents", type=int, default=200, help="per tenant")
    parser.add_argument(
        "--hot-share", type=float, default=0.5, help="share of searches from the hot set"
    )
    parser.add_argument("--hot-queries", type=int, default=10, help="hot queries per tenant")
    parser.add_argument("--ingest-batch", type=int, default=10, help="documents per background job")
    parser.add_argument("--ingest-interval", type=float, default=3.0, help="seconds between jobs")
    parser.add_argument(
        "--ingest-tenants", type=int, default=2,
        help="how many of the tenants get the background jobs (the others only search)",
    )  # fmt: skip
    parser.add_argument("--api-workers", type=int, default=None, help="default: one per core")
    parser.add_argument(
        "--postgres-url", default=POSTGRES_ADMIN_URL, help="server to make a database on"
    )
    parser.add_argument(
        "--redis-url", default=None, help="default: a redis-server of this run's own"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the data directory and logs")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--markdown", type=Path, default=None, metavar="FILE",
        help="print the tables of a saved --json result (runs nothing)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())))
        return 0
    if args.warmup is None:
        args.warmup = min(60.0, args.duration / 4)
    if args.duration <= 0 or args.clients < 1 or args.tenants < 1 or args.documents < 1:
        parser.error("--duration, --clients, --tenants and --documents must be positive")
    if not 0 <= args.hot_share <= 1 or args.hot_queries < 1 or args.ingest_batch < 1:
        parser.error("--hot-share in [0, 1]; --hot-queries and --ingest-batch >= 1")
    if not 1 <= args.ingest_tenants <= args.tenants or args.ingest_interval <= 0:
        parser.error("--ingest-tenants in [1, --tenants]; --ingest-interval > 0")
    return run_and_print(
        lambda: run(args), lambda result: json.dumps(result) if args.json else markdown(result)
    )


if __name__ == "__main__":
    sys.exit(main())
