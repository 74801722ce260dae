"""The graph leg over a grid of settings, on one set with links, ingested once.

The set (a BEIR folder with ``edges.tsv``) goes through the same throw-away stack as
``python -m bench.relevance`` (:func:`bench.runner.prepared_stack`: ingestion, with the
links, is the slow part and happens once); then every query is searched once per
configuration, one search at a time: the default hybrid request (``hybrid_no_graph``, the
baseline), and the default hybrid request plus the graph leg
(:func:`bench.runner.graph_request`) for each weight x scoring x seed count of the grid.
``--scorings`` lists ``proximity:DEPTH`` or ``pagerank`` (whose walk has no depth). The
table gives nDCG@10, R@5, R@10 and R@100 per configuration, the nDCG@10 margin over the
baseline and how many queries it ranks better / same / worse (nDCG@10 per query).

Usage (from the repository root)::

    python -m bench.graph_sweep --dataset ../shared/datasets/en-musique-train-100
    python -m bench.graph_sweep --dataset DIR --weights 0.1,0.2 --scorings pagerank --json
    python -m bench.graph_sweep --dataset DIR --scorings bridge --seeds 5 --http

``--http`` sends every search as a ``POST /v1/search`` through the HTTP API (the app
served in this process over httpx's ASGI transport, the set's tenant's key, rate limits
off): the request's JSON, its checks and the response's, not only the service.

Progress goes to stderr; the table (or with ``--json`` one JSON object) to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bench.datasets import DEFAULT_SEED, is_beir_folder, load_dataset, select_queries
from bench.interrupt import INTERRUPTED, progress
from bench.metrics import mean_metrics, percentile
from bench.relevance import prepare_process
from bench.report import (
    GRAPH_SCORINGS,
    HYBRID_NO_GRAPH,
    METRIC_LABELS,
    METRICS,
    ModeRun,
    per_query_comparison,
)

if TYPE_CHECKING:
    from bench.runner import GraphOptions

DEFAULT_WEIGHTS = (0.05, 0.1, 0.2, 0.3)
DEFAULT_SCORINGS = ("proximity:1", "proximity:2", "pagerank")
DEFAULT_SEEDS = (5, 10, 20)


@dataclass(frozen=True)
class Scoring:
    """One ``--scorings`` entry: a scoring and, for proximity, its depth."""

    scoring: str
    depth: int | None = None


def parse_scorings(text: str) -> tuple[Scoring, ...]:
    """``proximity:1,proximity:2,pagerank`` as :class:`Scoring` values; raises
    ``ValueError`` naming what is allowed."""
    found: list[Scoring] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, _, depth = item.partition(":")
        if name not in GRAPH_SCORINGS:
            msg = f"unknown scoring {name!r}; allowed: {', '.join(GRAPH_SCORINGS)}"
            raise ValueError(msg)
        if name == "proximity":
            if depth not in ("1", "2", "3"):
                msg = f"{item!r}: proximity takes a depth of 1 to 3 (proximity:2)"
                raise ValueError(msg)
            found.append(Scoring(name, int(depth)))
        elif depth:
            msg = f"{item!r}: {name} takes no depth"
            raise ValueError(msg)
        else:
            found.append(Scoring(name))
    if not found:
        raise ValueError("no scoring given")
    return tuple(found)


def parse_numbers(text: str, kind: type[float] | type[int]) -> tuple[Any, ...]:
    """A comma-separated list of numbers of ``kind``."""
    values = tuple(kind(part) for part in text.split(",") if part.strip())
    if not values:
        raise ValueError("no value given")
    return values


def config_name(graph: GraphOptions) -> str:
    """``w0.1 proximity:2 s10``: a configuration's mode name in the run and the table."""
    scoring = graph.scoring or "default"
    if graph.depth is not None:
        scoring += f":{graph.depth}"
    seeds = "" if graph.seeds is None else f" s{graph.seeds}"
    included = " +seeds" if graph.include_seeds else ""
    return f"w{graph.weight:g} {scoring}{seeds}{included}"


def sweep_result(
    runs: Mapping[str, ModeRun], configs: Mapping[str, GraphOptions]
) -> list[dict[str, Any]]:
    """One row per configuration, the baseline first: its settings, mean metrics, the
    nDCG@10 margin over the baseline, the per-query comparison with it, p50 latency."""
    baseline = runs[HYBRID_NO_GRAPH].per_query
    base = mean_metrics(baseline)
    rows: list[dict[str, Any]] = []
    for name, run in runs.items():
        graph = configs.get(name)
        metrics = mean_metrics(run.per_query)
        rows.append(
            {
                "config": name,
                "graph": None if graph is None else graph.describe(),
                "metrics": metrics,
                "ndcg@10_margin": metrics["ndcg@10"] - base["ndcg@10"],
                "vs_no_graph": (
                    None if graph is None else per_query_comparison(run.per_query, baseline)
                ),
                "search_ms_p50": (
                    round(percentile(run.latencies_ms, 50), 1) if run.latencies_ms else None
                ),
                "degraded": run.degraded,
                "errors": run.errors,
            }
        )
    return rows


def render_table(rows: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    """The rows as a Markdown table, the best nDCG@10 marked with ``*``."""
    best = max(rows, key=lambda r: r["metrics"]["ndcg@10"])
    labels = " | ".join(METRIC_LABELS[m] for m in METRICS)
    print(f"| config | {labels} | ΔnDCG@10 | better / same / worse | p50 ms |", file=out)
    print("| --- |" + " ---: |" * len(METRICS) + " ---: | ---: | ---: |", file=out)
    for r in rows:
        cells = " | ".join(f"{r['metrics'][m]:.4f}" for m in METRICS)
        vs = r["vs_no_graph"]
        counts = "-" if vs is None else " / ".join(str(n) for n in vs.values())
        mark = " *" if r is best else ""
        failed = f" ({r['errors']} failed)" if r["errors"] else ""
        print(
            f"| {r['config']}{mark}{failed} | {cells} | {r['ndcg@10_margin']:+.4f} | {counts} "
            f"| {r['search_ms_p50'] if r['search_ms_p50'] is not None else '-'} |",
            file=out,
        )


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.graph_sweep",
        description="The graph leg over a grid of weights, scorings and seed counts, on a "
        "set with edges.tsv ingested once; each against the default hybrid request.",
    )
    parser.add_argument("--dataset", type=Path, required=True, metavar="DIR")
    parser.add_argument(
        "--weights", default=",".join(map(str, DEFAULT_WEIGHTS)),
        help="the graph leg's weights, beside the default dense and sparse ones "
        "(default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--scorings", default=",".join(DEFAULT_SCORINGS),
        help="proximity:DEPTH (1..3) and pagerank entries (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--seeds", default=",".join(map(str, DEFAULT_SEEDS)),
        help="the numbers of best hits the leg starts from (default %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--encoder", choices=["offline", "bge-m3", "fake"], default="offline",
        help="as python -m bench.relevance (default offline)",
    )  # fmt: skip
    parser.add_argument("--bge-m3-path", type=Path, help="directory holding BGE-M3 weights")
    parser.add_argument(
        "--max-queries", type=int, metavar="N",
        help="evaluate a seeded random sample of N queries (default: all)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sampling seed")
    parser.add_argument(
        "--include-seeds",
        default="false",
        help="comma-separated true/false: whether the graph leg ranks its seeds too",
    )
    parser.add_argument(
        "--http",
        action="store_true",
        help="send every search through the HTTP API (the app in process, over ASGI)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object, not a table")
    parser.add_argument("--verbose", action="store_true", help="hsearch's own INFO logs")
    args = parser.parse_args(argv)
    try:
        args.weights = parse_numbers(args.weights, float)
        args.scorings = parse_scorings(args.scorings)
        args.seeds = parse_numbers(args.seeds, int)
        args.include_seeds = tuple(
            {"true": True, "false": False}[v.strip()] for v in args.include_seeds.split(",")
        )
    except (ValueError, KeyError) as exc:
        parser.error(f"{exc} (--include-seeds takes true and false)")
    if not all(0 < w <= 1 for w in args.weights):
        parser.error("--weights: each in (0, 1]")
    if not all(s >= 1 for s in args.seeds):
        parser.error("--seeds: each >= 1")
    if args.encoder == "bge-m3" and args.bge_m3_path is None:
        parser.error("--encoder bge-m3 needs --bge-m3-path")
    if args.max_queries is not None and args.max_queries < 1:
        parser.error("--max-queries must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    if not is_beir_folder(args.dataset) or not (args.dataset / "edges.tsv").is_file():
        progress(f"{args.dataset}: not a BEIR folder with edges.tsv")
        return 2
    prepare_process(verbose=args.verbose)
    # Imported once the process is set up, as bench.relevance does.
    from bench.app_client import api_client  # noqa: PLC0415
    from bench.runner import (  # noqa: PLC0415
        TENANT,
        GraphOptions,
        ModeRequest,
        Options,
        graph_request,
        prepared_stack,
        run_queries,
    )
    from hsearch.types import SearchMode  # noqa: PLC0415

    configs = {
        config_name(graph): graph
        for graph in (
            GraphOptions(
                weight=w, scoring=s.scoring, depth=s.depth, seeds=n, include_seeds=i or None
            )
            for w in args.weights
            for s in args.scorings
            for n in args.seeds
            for i in args.include_seeds
        )
    }
    dataset = load_dataset(args.dataset)
    query_ids = select_queries(dataset, max_queries=args.max_queries, seed=args.seed)
    options = Options(
        encoder=args.encoder,
        bge_m3_path=args.bge_m3_path,
        max_queries=args.max_queries,
        seed=args.seed,
    )
    progress(
        f"{dataset.name}: {len(dataset.corpus)} documents, {dataset.link_count} links, "
        f"{len(query_ids)} queries x {len(configs) + 1} configurations"
    )
    try:
        with prepared_stack(dataset, options) as stack:
            requests = {HYBRID_NO_GRAPH: ModeRequest(SearchMode.HYBRID)} | {
                name: graph_request(stack.fusion, graph) for name, graph in configs.items()
            }

            async def searched() -> dict[str, ModeRun]:
                through = (
                    api_client(stack.resources, tenant=TENANT)
                    if args.http
                    else contextlib.nullcontext()
                )
                async with through as api:
                    return await run_queries(
                        stack.resources,
                        dataset,
                        query_ids,
                        list(requests),
                        requests=requests,
                        api=api,
                    )

            runs = asyncio.run(searched())
    except KeyboardInterrupt:
        progress("interrupted")
        return INTERRUPTED
    rows = sweep_result(runs, configs)
    if args.json:
        summary = {
            "dataset": dataset.name,
            "encoder": stack.encoder,
            "fusion": stack.fusion.describe(),
            "queries": len(query_ids),
            "documents": len(dataset.corpus),
            "links": dataset.link_count,
            "sample": (
                {"max_queries": args.max_queries, "seed": args.seed} if args.max_queries else None
            ),
            "ingest_seconds": round(stack.ingested["seconds"], 1),
            "through": "http" if args.http else "service",
            "rows": rows,
        }
        print(json.dumps(summary, ensure_ascii=False))
    else:
        print(
            f"{dataset.name}: {len(query_ids)} queries, {len(dataset.corpus)} documents, "
            f"{dataset.link_count} links; encoder {stack.encoder}; hybrid fusion "
            f"{stack.fusion.describe()}; searched through "
            f"{'the HTTP API' if args.http else 'the search service'}\n"
        )
        render_table(rows, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
