"""A cached search, through the app in process or through HTTP to the API as it runs.

* In process (the default): the request through the real app and its lifespan
  (``httpx.ASGITransport``, ``asgi-lifespan``), no network, so what remains is the app's
  own path: middleware, authentication, dependencies, the result cache, the response
  model. Embedded parts only: the fake encoder, an in-memory store, an SQLite metadata
  database, the in-process cache. ``--profile FILE`` runs the hits under pyinstrument
  and writes its report (the profiler's overhead then lands in the times).
* ``--http``: (d) of ``bench.search`` as the product runs it: the API in a process of
  its own (uvicorn on the app factory, the command ``hsearch run`` uses), the embedded
  profile (SQLite, the in-process result cache) on a Milvus Lite server of its own and
  the fake encoder; documents submitted through the API and indexed by this process;
  one keep-alive connection, sequential requests, each a cache hit (checked).

Both use a tenant and key made by the tenancy service and ten hits of ~1 kB text, and
print p50/p95 of ``--requests`` sequential cache hits and the server's own time
(``took_ms``).

Usage (from the repository root)::

    python -m bench.cache_hit --json
    python -m bench.cache_hit --json --http
    python -m bench.cache_hit --profile /tmp/cache-hit.txt
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
from pyinstrument import Profiler

from bench.app_client import api_client
from bench.metrics import percentile
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.config import ApiSettings, EncoderKind, EncoderSettings, Settings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.local.processes import start_api, start_milvus_lite
from hsearch.runtime import Services, build_services
from hsearch.types import Scope
from hsearch.vectorstore.in_memory import InMemoryVectorStore

TENANT = "bench"
QUERY = {"query": "lorem ipsum", "top_k": 10}
# Ten hits of ~1 kB text, as in bench.search's (d).
DOCUMENTS = [
    {
        "external_id": f"d{i}",
        "title": f"Document {i}",
        "text": f"word{i} " + "lorem ipsum dolor sit amet consectetur " * 25,
    }
    for i in range(40)
]


def settings_for(data_dir: Path) -> Settings:
    base = Settings(
        _env_file=None,
        data_dir=data_dir,
        encoder=EncoderSettings(kind=EncoderKind.FAKE),
        api=ApiSettings(migrate_on_start=True),
        log_level="WARNING",  # a log line per request would be measured too
    )
    return base.model_copy(
        update={"ratelimit": base.ratelimit.model_copy(update={"enabled": False})}
    )


async def measure(requests: int, warmup: int, profile: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hsearch-cache-hit-") as tmp:
        settings = settings_for(Path(tmp))
        services = build_services(
            settings,
            store=InMemoryVectorStore(),
            queue=InMemoryJobQueue(),
            cache=InMemoryCacheBackend(),
        )
        try:
            # httpx's default timeout (5 s): a cache hit never comes near it.
            async with api_client(
                services, tenant=TENANT, scopes=list(Scope), timeout=5.0
            ) as client:
                return await _hits(client, services, requests, warmup, profile)
        finally:
            await services.aclose()


async def _hits(
    client: httpx.AsyncClient, services: Any, requests: int, warmup: int, profile: Path | None
) -> dict[str, Any]:
    resp = await client.post("/v1/documents", json={"documents": DOCUMENTS})
    resp.raise_for_status()
    services.indexing().process_job(uuid.UUID(resp.json()["job_id"]))
    for _ in range(warmup + 1):  # the first computes and fills the cache
        (await client.post("/v1/search", json=QUERY)).raise_for_status()
    profiler = Profiler(async_mode="enabled") if profile is not None else None
    seconds: list[float] = []
    server_ms: list[float] = []
    if profiler is not None:
        profiler.start()
    for _ in range(requests):
        started = time.perf_counter()
        resp = await client.post("/v1/search", json=QUERY)
        seconds.append(time.perf_counter() - started)
        server_ms.append(_hit_took_ms(resp))
    report = None
    if profiler is not None:
        profiler.stop()
        report = profiler.output_text(unicode=True, color=False, show_all=False)
    return {**_summary(seconds, server_ms, resp), "profile": report}


def _hit_took_ms(resp: httpx.Response) -> float:
    """The server's own time of a search that must have been a cache hit."""
    body = resp.json()
    if resp.status_code != 200 or not body["cached"]:
        msg = f"not a cache hit: {resp.status_code} {resp.text[:200]}"
        raise RuntimeError(msg)
    return float(body["took_ms"])


def _summary(
    seconds: Sequence[float], server_ms: Sequence[float], last: httpx.Response
) -> dict[str, Any]:
    return {
        "requests": len(seconds),
        "p50_ms": round(percentile(seconds, 50) * 1000, 2),
        "p95_ms": round(percentile(seconds, 95) * 1000, 2),
        "p99_ms": round(percentile(seconds, 99) * 1000, 2),
        "server_took_p50_ms": round(percentile(server_ms, 50), 2),
        "response_bytes": len(last.content),
        "hits": len(last.json()["hits"]),
    }


def http_env(root: Path, milvus_uri: str, redis_url: str | None = None) -> dict[str, str]:
    """The settings of the API process and of this one (read from the environment, as
    deployed): the embedded profile on a Milvus Lite server of its own, the result cache
    in process or on ``redis_url``."""
    redis = {"HSEARCH_REDIS__URL": redis_url} if redis_url else {}
    return {
        **redis,
        "HSEARCH_DATA_DIR": str(root / "data"),
        "HSEARCH_MILVUS__URI": milvus_uri,
        "HSEARCH_MILVUS__COLLECTION": "cache_hit",
        "HSEARCH_ENCODER__KIND": "fake",
        "HSEARCH_AUTH__SECRET": secrets.token_hex(32),
        "HSEARCH_RATELIMIT__ENABLED": "false",  # sequential requests far above a human's
        "HSEARCH_API__MIGRATE_ON_START": "true",
        "HSEARCH_LOG_LEVEL": "WARNING",  # a log line per request would be measured too
    }


@contextlib.contextmanager
def http_stack(
    prefix: str, *, redis_url: str | None = None, env: Mapping[str, str] | None = None
) -> Iterator[tuple[httpx.Client, Services]]:
    """The API in a process of its own on a Milvus Lite server of its own (see the
    module), with a key of every scope for :data:`TENANT`: a client sending it, and this
    process's services on the same database and collection (to index without a worker).
    ``env``: settings beyond :func:`http_env`'s, for both processes."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        root = Path(tmp)
        (root / "data").mkdir()
        milvus, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
        served = {**os.environ, **http_env(root, uri, redis_url), **(env or {})}
        saved = dict(os.environ)
        os.environ.update(served)  # this process reads the same settings
        try:
            settings = Settings(_env_file=None)
            upgrade_database(settings.database_url)
            services = build_services(settings)
            try:
                services.tenancy.ensure_tenant(TENANT, actor="bench")
                key = services.tenancy.create_key(TENANT, scopes=list(Scope), actor="bench").key
                api, base = start_api(served, log=root / "api.log")
                try:
                    with httpx.Client(
                        base_url=base, timeout=60, headers={"Authorization": f"Bearer {key}"}
                    ) as client:
                        yield client, services
                finally:
                    api.stop()
            finally:
                services.close()
        finally:
            os.environ.clear()
            os.environ.update(saved)
            milvus.stop()


def measure_http(requests: int, warmup: int, *, redis_url: str | None = None) -> dict[str, Any]:
    """Cache hits through HTTP to the API in a process of its own (see the module)."""
    with http_stack("hsearch-cache-hit-http-", redis_url=redis_url) as (client, services):
        return _http_hits(client, services, requests, warmup)


def _http_hits(client: httpx.Client, services: Any, requests: int, warmup: int) -> dict[str, Any]:
    resp = client.post("/v1/documents", json={"documents": DOCUMENTS})
    resp.raise_for_status()
    # Indexed here, on the same database and collection (no worker process to start).
    if services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) != "succeeded":
        msg = "the documents were not indexed"
        raise RuntimeError(msg)
    for _ in range(warmup + 1):  # the first computes and fills the cache
        client.post("/v1/search", json=QUERY).raise_for_status()
    seconds: list[float] = []
    server_ms: list[float] = []
    for _ in range(requests):
        started = time.perf_counter()
        resp = client.post("/v1/search", json=QUERY)
        seconds.append(time.perf_counter() - started)
        server_ms.append(_hit_took_ms(resp))
    return _summary(seconds, server_ms, resp)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.cache_hit", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--profile", type=Path, default=None, metavar="FILE")
    parser.add_argument(
        "--http", action="store_true", help="through HTTP to the API in a process of its own"
    )
    parser.add_argument(
        "--redis-url", default=None, help="with --http: the result cache on this Redis"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.warmup < 0:
        parser.error("--requests must be >= 1, --warmup >= 0")
    if args.http and args.profile is not None:
        parser.error("--profile profiles the app in process: leave out --http")
    if args.http:
        result = measure_http(args.requests, args.warmup, redis_url=args.redis_url)
        report = None
    else:
        result = asyncio.run(measure(args.requests, args.warmup, args.profile))
        report = result.pop("profile")
    if args.profile is not None and report is not None:
        args.profile.write_text(report)
    if args.json:
        print(json.dumps(result))
    else:
        where = "through HTTP" if args.http else "through the app, in process"
        print(
            f"cache hit {where}: p50 {result['p50_ms']} ms, "
            f"p95 {result['p95_ms']} ms (server's own p50 {result['server_took_p50_ms']} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
