"""Document graph benchmark: building a :class:`LinkGraph`, its memory, and one graph-leg
scoring call, at several sizes.

For each size (``--sizes``, in links; about ``--links-per-node`` links per node) a
synthetic graph is drawn with a seeded generator (:func:`synthetic_links`): heavy-tailed
out-degrees (a few documents link to many), targets drawn by Zipf's law over a random ranking (a
few documents are linked to by many: hubs), three link types (``link`` 70 %,
``mention`` 20 % with weights in ``[0.25, 1)``, ``title_mention`` 10 %). Then:

* **build**: :meth:`LinkGraph.from_arrays` on the arrays, and
  :meth:`LinkGraph.from_edges` on the same links as Python tuples of document ids (the
  list already built; what the storage layer would hand over), best of ``--builds``;
  ``nbytes`` per link (keys included for the graph built from tuples);
* **scoring**: ``--queries`` queries of ``--seeds`` seed nodes each (drawn uniformly,
  weighted ``1 / (rank + 1)`` as a search's top hits would be), ``--limit`` results,
  following links both ways, all types; each query runs :func:`proximity` at depth 1, 2
  and 3, :func:`personalized_pagerank` at its defaults and :func:`bridge` (its matches:
  the seeds and the heaviest seed's first ``--limit`` out-links), in an order that rotates from
  query to query so load on the machine falls on every configuration alike; p50 and p95
  in milliseconds, and the mean number of results and of hops of the last one;
* **PPR accuracy**: on ``--accuracy-queries`` of those queries, the share of the top 10
  and top 100 of a converged push (``epsilon`` 1e-9, within 1e-9 of the power
  iteration's top 100 on these graphs) that :func:`personalized_pagerank` returns at
  several ``epsilon`` (``--epsilons``), and its p50 there: what the default's choice
  trades.

Each section is a function returning a dict (:func:`build_section`,
:func:`scoring_section`, :func:`accuracy_section`), so another (a whole HTTP search
with the graph leg on) can be added beside them.

Usage (from the repository root)::

    python -m bench.graph                               # 10k, 100k and 1M links, a table
    python -m bench.graph --json --sizes 1000000 --queries 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.metrics import percentile
from hsearch.graph.csr import LinkGraph
from hsearch.graph.scoring import DEFAULT_EPSILON, bridge, personalized_pagerank, proximity

TYPES = ("link", "mention", "title_mention")
TYPE_SHARES = (0.7, 0.2, 0.1)
SIZES = (10_000, 100_000, 1_000_000)


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class SyntheticLinks:
    """Links between ``n`` nodes as parallel arrays (before deduplication)."""

    n: int
    sources: npt.NDArray[np.int64]
    targets: npt.NDArray[np.int64]
    type_ids: npt.NDArray[np.int64]
    weights: npt.NDArray[np.float64]

    def keys(self) -> list[str]:
        return [f"doc-{i:08d}" for i in range(self.n)]

    def edges(self, keys: Sequence[str]) -> list[tuple[str, str, str, float]]:
        return [
            (keys[s], keys[t], TYPES[k], w)
            for s, t, k, w in zip(
                self.sources.tolist(),
                self.targets.tolist(),
                self.type_ids.tolist(),
                self.weights.tolist(),
                strict=True,
            )
        ]


def synthetic_links(links: int, *, links_per_node: float, seed: int) -> SyntheticLinks:
    """``links`` links over ``links / links_per_node`` nodes, heavy-tailed both ways: a
    node's share of the out-links is Pareto-distributed (shape 1.5), its share of the
    in-links Zipf's law over a random ranking, ``1 / (rank + 10)`` (at 100,000 nodes
    the top 1 % receive half the links and the most linked-to about 1 %)."""
    rng = np.random.default_rng(seed)
    n = max(int(links / links_per_node), 2)
    out_share = rng.pareto(1.5, n) + 1.0
    out_degree = rng.multinomial(links, out_share / out_share.sum())
    sources = np.repeat(np.arange(n, dtype=np.int64), out_degree)
    popularity = 1.0 / (rng.permutation(n) + 10.0)
    targets = rng.choice(n, size=links, p=popularity / popularity.sum()).astype(np.int64)
    type_ids = rng.choice(len(TYPES), size=links, p=TYPE_SHARES).astype(np.int64)
    weights = np.where(type_ids == 1, rng.uniform(0.25, 1.0, links), 1.0)
    return SyntheticLinks(n, sources, targets, type_ids, weights)


def timed(build: Callable[[], LinkGraph], repeats: int) -> tuple[LinkGraph, float]:
    """The graph and the best of ``repeats`` builds, in seconds."""
    best = float("inf")
    graph: LinkGraph | None = None
    for _ in range(repeats):
        started = time.perf_counter()
        graph = build()
        best = min(best, time.perf_counter() - started)
    assert graph is not None
    return graph, best


def build_section(data: SyntheticLinks, *, repeats: int) -> tuple[LinkGraph, dict[str, Any]]:
    """Build times from arrays and from tuples, and memory per link."""
    graph, from_arrays_s = timed(
        lambda: LinkGraph.from_arrays(
            data.n, data.sources, data.targets, data.type_ids, data.weights, types=TYPES
        ),
        repeats,
    )
    keys = data.keys()
    edges = data.edges(keys)
    keyed, from_edges_s = timed(lambda: LinkGraph.from_edges(keys, edges), repeats)
    return graph, {
        "nodes": graph.n,
        "links_drawn": len(data.sources),
        "links": graph.links,
        "max_out_degree": int(np.diff(graph.out_links.indptr).max()),
        "max_in_degree": int(np.diff(graph.back_links.indptr).max()),
        "from_arrays_ms": round(from_arrays_s * 1000, 1),
        "from_edges_ms": round(from_edges_s * 1000, 1),
        "bytes_per_link": round(graph.nbytes / graph.links, 1),
        "bytes_per_link_with_keys": round(keyed.nbytes / keyed.links, 1),
    }


Scorer = Callable[[LinkGraph, dict[int, float]], list[Any]]


def scorers(limit: int) -> dict[str, Scorer]:
    """The graph-leg calls measured, by name."""
    return {
        "proximity_d1": lambda g, s: proximity(g, s, depth=1, limit=limit),
        "proximity_d2": lambda g, s: proximity(g, s, depth=2, limit=limit),
        "proximity_d3": lambda g, s: proximity(g, s, depth=3, limit=limit),
        "ppr": lambda g, s: personalized_pagerank(g, s, limit=limit),
        "bridge": lambda g, s: _bridge(g, s, limit=limit),
    }


def _bridge(graph: LinkGraph, seeds: Mapping[int, float], *, limit: int) -> list[Any]:
    """:func:`bridge` as the leg calls it: its matches are the other legs' candidates,
    here the seeds and the heaviest seed's first ``limit`` out-links (so that it has
    something to return)."""
    top = min(seeds, key=lambda node: (-seeds[node], node))
    neighbours, _, _ = graph.out_links.row(top)
    matches = dict.fromkeys(neighbours[:limit].tolist(), 1.0) | dict(seeds)
    return bridge(graph, seeds, matches, limit=limit)


def scoring_section(
    graph: LinkGraph, *, queries: int, seeds: int, limit: int, warmup: int, seed: int
) -> dict[str, Any]:
    """p50/p95 of each scoring call over the same seeded queries, interleaved."""
    calls = scorers(limit)
    names = list(calls)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    returned: dict[str, list[int]] = {name: [] for name in names}
    last_hops: dict[str, list[int]] = {name: [] for name in names}
    asked = seed_queries(graph, count=warmup + queries, seeds=seeds, seed=seed)
    for q, query in enumerate(asked):
        rotated = names[q % len(names) :] + names[: q % len(names)]
        for name in rotated:
            started = time.perf_counter()
            result = calls[name](graph, query)
            elapsed = time.perf_counter() - started
            if q < warmup:
                continue
            seconds[name].append(elapsed)
            returned[name].append(len(result))
            last_hops[name].append(result[-1].hops if result else 0)
    return {
        "queries": queries,
        "seeds": seeds,
        "limit": limit,
        "ppr_epsilon": DEFAULT_EPSILON,
        "calls": {
            name: {
                "p50_ms": round(percentile([s * 1000 for s in seconds[name]], 50), 2),
                "p95_ms": round(percentile([s * 1000 for s in seconds[name]], 95), 2),
                "mean_results": round(sum(returned[name]) / queries, 1),
                "mean_last_hops": round(sum(last_hops[name]) / queries, 2),
            }
            for name in names
        },
    }


REFERENCE_EPSILON = 1e-9


def seed_queries(graph: LinkGraph, *, count: int, seeds: int, seed: int) -> list[dict[int, float]]:
    """``count`` queries of ``seeds`` distinct nodes weighted ``1 / (rank + 1)``."""
    rng = np.random.default_rng(seed)
    return [
        {
            node: 1.0 / (rank + 1)
            for rank, node in enumerate(rng.choice(graph.n, size=seeds, replace=False).tolist())
        }
        for _ in range(count)
    ]


def accuracy_section(
    graph: LinkGraph, *, queries: int, seeds: int, limit: int, epsilons: Sequence[float], seed: int
) -> dict[str, Any]:
    """Top-10 and top-``limit`` overlap of PPR at each epsilon with a converged push."""
    asked = seed_queries(graph, count=queries, seeds=seeds, seed=seed)
    reference = [
        [r.node for r in personalized_pagerank(graph, q, epsilon=REFERENCE_EPSILON, limit=limit)]
        for q in asked
    ]
    rows: dict[str, Any] = {}
    for epsilon in epsilons:
        ms: list[float] = []
        top10: list[float] = []
        top: list[float] = []
        for query, exact in zip(asked, reference, strict=True):
            started = time.perf_counter()
            found = [
                r.node for r in personalized_pagerank(graph, query, epsilon=epsilon, limit=limit)
            ]
            ms.append((time.perf_counter() - started) * 1000)
            top10.append(len(set(found[:10]) & set(exact[:10])) / max(len(exact[:10]), 1))
            top.append(len(set(found) & set(exact)) / max(len(exact), 1))
        rows[f"{epsilon:g}"] = {
            "p50_ms": round(percentile(ms, 50), 2),
            "overlap_at_10": round(sum(top10) / queries, 3),
            f"overlap_at_{limit}": round(sum(top) / queries, 3),
        }
    return {"queries": queries, "reference_epsilon": REFERENCE_EPSILON, "epsilons": rows}


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    sizes: list[dict[str, Any]] = []
    for links in args.sizes:
        data = synthetic_links(links, links_per_node=args.links_per_node, seed=args.seed)
        graph, build = build_section(data, repeats=args.builds)
        progress(f"{links} links: {build}")
        scoring = scoring_section(
            graph,
            queries=args.queries,
            seeds=args.seeds,
            limit=args.limit,
            warmup=args.warmup,
            seed=args.seed,
        )
        progress(f"{links} links: {scoring['calls']}")
        entry = {"links_requested": links, "build": build, "scoring": scoring}
        if args.accuracy_queries:
            entry["ppr_accuracy"] = accuracy_section(
                graph,
                queries=args.accuracy_queries,
                seeds=args.seeds,
                limit=args.limit,
                epsilons=args.epsilons,
                seed=args.seed + 1,
            )
            progress(f"{links} links: {entry['ppr_accuracy']['epsilons']}")
        sizes.append(entry)
    http: dict[str, Any] | None = None
    if args.http_documents:
        from bench.graph_http import http_section  # noqa: PLC0415 - starts servers: only when asked

        http = http_section(
            documents=args.http_documents,
            links=args.http_links,
            queries=args.http_queries,
            warmup=args.warmup,
            seed=args.seed,
        )
        progress(f"HTTP at {args.http_documents} documents: {http}")
    return {
        "benchmark": "graph",
        "links_per_node": args.links_per_node,
        "seed": args.seed,
        "load_average_before": [round(v, 2) for v in load_before],
        "load_average_after": [round(v, 2) for v in os.getloadavg()],
        "sizes": sizes,
        "http": http,
    }


def markdown(result: dict[str, Any]) -> str:
    first = result["sizes"][0]["scoring"]
    names = list(first["calls"])
    lines = [
        f"~{result['links_per_node']} links per node, seed {result['seed']}; "
        f"{first['queries']} queries of {first['seeds']} seeds, limit {first['limit']}, "
        f"PPR epsilon {first['ppr_epsilon']}; load average "
        f"{result['load_average_before'][0]} before, {result['load_average_after'][0]} after",
        "",
        "| links | nodes | from arrays ms | from tuples ms | bytes/link (with keys) "
        + "".join(f"| {name} p50 / p95 ms " for name in names)
        + "|",
        "| ---: | ---: | ---: | ---: | ---: " + "| ---: " * len(names) + "|",
    ]
    for size in result["sizes"]:
        b, calls = size["build"], size["scoring"]["calls"]
        cells = "".join(f"| {calls[n]['p50_ms']:.1f} / {calls[n]['p95_ms']:.1f} " for n in names)
        lines.append(
            f"| {b['links']:,} | {b['nodes']:,} | {b['from_arrays_ms']:,.0f} "
            f"| {b['from_edges_ms']:,.0f} | {b['bytes_per_link']} "
            f"({b['bytes_per_link_with_keys']}) {cells}|"
        )
    lines += [
        "",
        "| links | " + " | ".join(f"{n} results / last hops" for n in names) + " |",
        "| ---: " + "| ---: " * len(names) + "|",
    ]
    for size in result["sizes"]:
        calls = size["scoring"]["calls"]
        lines.append(
            f"| {size['build']['links']:,} | "
            + " | ".join(
                f"{calls[n]['mean_results']} / {calls[n]['mean_last_hops']}" for n in names
            )
            + " |"
        )
    accuracy = [size for size in result["sizes"] if "ppr_accuracy" in size]
    if accuracy:
        first_accuracy = accuracy[0]["ppr_accuracy"]
        epsilons = list(first_accuracy["epsilons"])
        lines += [
            "",
            f"PPR against a converged push (epsilon {first_accuracy['reference_epsilon']:g}), "
            f"{first_accuracy['queries']} queries: share of its top 10 / top "
            f"{first['limit']} returned, p50 ms",
            "",
            "| links | " + " | ".join(f"epsilon {e}" for e in epsilons) + " |",
            "| ---: " + "| ---: " * len(epsilons) + "|",
        ]
        for size in accuracy:
            shown: list[str] = []
            for e in epsilons:
                row = size["ppr_accuracy"]["epsilons"][e]
                top = row[f"overlap_at_{first['limit']}"]
                shown.append(f"{row['overlap_at_10']:.2f} / {top:.2f}, {row['p50_ms']:.1f}")
            lines.append(f"| {size['build']['links']:,} | " + " | ".join(shown) + " |")
    http = result.get("http")
    if http:
        lines += [
            "",
            f"A whole search through HTTP: {http['documents']:,} documents, {http['links']:,} "
            f"links, {http['queries']} queries (hybrid, top 10, result cache off), ms",
            "",
            "| request | wall p50 | wall p95 | took_ms p50 | took_ms p95 |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
        for name in ("with_graph", "without_graph"):
            row = http[name]
            lines.append(
                f"| {name.replace('_', ' ')} | {row['wall_ms_50']} | {row['wall_ms_95']} "
                f"| {row['took_ms_50']} | {row['took_ms_95']} |"
            )
        lines.append(
            f"\nWith / without (wall p50): {http['ratio_wall_p50']}; hits of a page the "
            f"graph leg ranked: {http['hits_ranked_by_graph_per_search']}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.graph", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--sizes",
        type=lambda s: [int(v) for v in s.split(",")],
        default=list(SIZES),
        help="links per graph, comma-separated (default 10000,100000,1000000)",
    )
    parser.add_argument("--links-per-node", type=float, default=10.0)
    parser.add_argument("--queries", type=int, default=300, help="timed queries per size")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=10, help="seed nodes per query")
    parser.add_argument("--limit", type=int, default=100, help="results per call")
    parser.add_argument(
        "--accuracy-queries", type=int, default=20, help="PPR accuracy queries (0: skip)"
    )
    parser.add_argument(
        "--epsilons",
        type=lambda s: [float(v) for v in s.split(",")],
        default=[1e-5, DEFAULT_EPSILON, 1e-6],
        help="PPR epsilons compared with a converged push",
    )
    parser.add_argument("--builds", type=int, default=3, help="builds timed, best kept")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--http-documents",
        type=int,
        default=1000,
        help="a whole search through HTTP at this many documents (0: skip; bench.graph_http)",
    )
    parser.add_argument("--http-links", type=int, default=5, help="links per document (HTTP)")
    parser.add_argument("--http-queries", type=int, default=200, help="timed queries (HTTP)")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
