"""The relevance benchmark's results: summaries, the JSON object per dataset, and its
text and Markdown renderings.

Pure: the runner (:mod:`bench.runner`) fills :class:`ModeRun` and :class:`DatasetRun`;
:func:`dataset_result` gives the object ``python -m bench.relevance --json`` prints, and
the renderers read those objects back (``--markdown`` renders earlier ``--json``
output without running anything). ``bench.fusion_replay`` scores its replays with the
same summaries.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from bench.metrics import mean_metrics, percentile

MODES = ("semantic", "keyword", "hybrid")
SINGLE_LEG_MODES = {"semantic": "dense", "keyword": "sparse"}  # mode -> the leg it searches
HYBRID_NO_GRAPH = "hybrid_no_graph"
"""On a set with links, ``hybrid`` is the default hybrid request plus the graph leg, and
this mode the default hybrid request alone (what ``hybrid`` is on a set without links)."""
REPORTED_MODES = (*MODES, HYBRID_NO_GRAPH)  # the order of the tables
GRAPH_SCORINGS = ("proximity", "pagerank", "bridge")  # the graph leg's ``scoring`` parameter
DEFAULT_GRAPH_WEIGHT = 0.5
DEFAULT_GRAPH_SCORING = "bridge"
DEFAULT_GRAPH_SEEDS = 5
"""The graph leg's request in ``hybrid`` on a set with links, beside the encoder's own
dense and sparse weights: the ``bridge`` scoring from 5 seeds at weight 0.5, the
lightest setting of ``python -m bench.graph_sweep --http`` that lifted recall@5 on
MuSiQue by 0.02 or more with nDCG@10 not lower (docs/benchmarks.md, The bridge
scoring). Chosen on that set, the only one with links: a documented request, not the
server's default (which leaves the graph leg off)."""
METRICS = ("ndcg@10", "recall@5", "recall@10", "recall@100")
METRIC_LABELS = {
    "ndcg@10": "nDCG@10",
    "recall@5": "R@5",
    "recall@10": "R@10",
    "recall@100": "R@100",
}
TOP_K = 100  # the depth of every scored ranking (recall@100 needs 100)


@dataclass
class ModeRun:
    """One mode's measurements: per-query metrics (in query order) and search outcomes."""

    per_query: list[dict[str, float]] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    degraded: int = 0
    errors: int = 0
    methods: set[str] = field(default_factory=set)


@dataclass
class DatasetRun:
    """What one dataset's run measured, and how it was set up."""

    dataset: str
    encoder: str  # the encoder's fingerprint
    documents: int
    query_ids: list[str]
    runs: dict[str, ModeRun]
    ingest_seconds: float
    chunks: int
    failed_documents: int
    settings: dict[str, Any]  # the knobs that shape the numbers, as JSON
    setup_seconds: float
    flush_seconds: float | None
    search_seconds: float
    total_seconds: float
    sample: dict[str, Any] | None = None  # max_queries and seed, when sampled
    query_prefix: str | None = None
    by_prefix: bool = False


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
    better single leg (nDCG@10 per query): a mean margin of 0.00004 may be one query.
    Also hybrid against hybrid without the graph leg, on a set with links."""
    counts = {"better": 0, "same": 0, "worse": 0}
    for h, b in zip(hybrid, best, strict=True):
        if math.isclose(h["ndcg@10"], b["ndcg@10"], rel_tol=1e-9, abs_tol=1e-12):
            counts["same"] += 1
        else:
            counts["better" if h["ndcg@10"] > b["ndcg@10"] else "worse"] += 1
    return counts


def dataset_result(run: DatasetRun) -> dict[str, Any]:
    """The JSON object of one dataset (one line of ``--json``; its keys and their order
    are the output format)."""
    runs = run.runs
    modes, by_prefix = summarise(runs, run.query_ids)
    methods = sorted(set().union(*(r.methods for r in runs.values())))
    hybrid = runs.get("hybrid")
    result: dict[str, Any] = {
        "dataset": run.dataset,
        "encoder": run.encoder,
        "queries": len(run.query_ids),
        "documents": run.documents,
        "modes": modes,
        "fusion": ",".join(sorted(hybrid.methods)) if hybrid else ",".join(methods),
        "ingest_seconds": round(run.ingest_seconds, 1),
        "search_ms_p50": {
            m: round(percentile(r.latencies_ms, 50), 1) for m, r in runs.items() if r.latencies_ms
        },
        "search_ms_p95": {
            m: round(percentile(r.latencies_ms, 95), 1) for m, r in runs.items() if r.latencies_ms
        },
        "chunks": run.chunks,
        "failed_documents": run.failed_documents,
        "degraded_searches": {m: r.degraded for m, r in runs.items()},
        "failed_searches": {m: r.errors for m, r in runs.items()},
        "settings": run.settings,
        "setup_seconds": round(run.setup_seconds, 1),
        "flush_seconds": None if run.flush_seconds is None else round(run.flush_seconds, 1),
        "search_seconds": round(run.search_seconds, 1),
        "total_seconds": round(run.total_seconds, 1),
        "sample": run.sample,
    }
    check = hybrid_check(result)
    if check is not None:
        result["per_query_vs_best_leg"] = per_query_comparison(
            runs["hybrid"].per_query, runs[check[0]].per_query
        )
    if "hybrid" in runs and HYBRID_NO_GRAPH in runs:
        result["per_query_vs_no_graph"] = per_query_comparison(
            runs["hybrid"].per_query, runs[HYBRID_NO_GRAPH].per_query
        )
    if run.query_prefix:
        result["query_prefix"] = run.query_prefix
    if run.by_prefix:
        result["by_prefix"] = by_prefix
    return result


# -- rendering --------------------------------------------------------------------------


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
    width = max(10, *(len(mode) + 1 for mode in result["modes"]))
    header = f"{'mode':<{width}}" + "".join(f"{METRIC_LABELS[m]:>10}" for m in METRICS) + "  p50 ms"
    print(header, file=out)
    print("-" * len(header), file=out)
    for mode, metrics in result["modes"].items():
        p50 = result["search_ms_p50"].get(mode)
        print(
            f"{mode:<{width}}"
            + "".join(f"{_fmt(metrics.get(m)):>10}" for m in METRICS)
            + f"  {p50 if p50 is not None else '-':>6}",
            file=out,
        )
    check = hybrid_check(result)
    if check is not None:
        best, ok = check
        print(f"hybrid >= best single leg ({best}) on nDCG@10: {'yes' if ok else 'NO'}", file=out)
    graph = result.get("per_query_vs_no_graph")
    if graph is not None:
        modes = result["modes"]
        margin = modes["hybrid"]["ndcg@10"] - modes[HYBRID_NO_GRAPH]["ndcg@10"]
        print(
            f"graph leg: nDCG@10 {margin:+.4f} over {HYBRID_NO_GRAPH}; queries better / same "
            f"/ worse: {' / '.join(str(n) for n in graph.values())}",
            file=out,
        )


def render_markdown(results: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    """The docs/benchmarks.md tables: metrics per dataset x mode, the hybrid check, the
    graph leg's margin (sets with links), the timings; a metric an older result lacks
    (recall@5) shows as ``-``."""
    labels = " | ".join(METRIC_LABELS[m] for m in METRICS)
    print(f"| dataset | queries | docs | mode | {labels} | p50 ms |", file=out)
    print("| --- | ---: | ---: | --- |" + " ---: |" * len(METRICS) + " ---: |", file=out)
    for r in results:
        for mode in REPORTED_MODES:
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
    graphed = [r for r in results if {"hybrid", HYBRID_NO_GRAPH} <= set(r["modes"])]
    if graphed:
        _render_graph_margins(graphed, out)
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
        modes = [m for m in REPORTED_MODES if m in r["modes"]]
        print("| prefix | queries | " + " | ".join(modes) + " |", file=out)
        print("| --- | ---: |" + " ---: |" * len(modes), file=out)
        for prefix, group in r["by_prefix"].items():
            cells = " | ".join(_fmt(group["modes"][m]["ndcg@10"]) for m in modes)
            print(f"| {prefix or '-'} | {group['queries']} | {cells} |", file=out)


def _render_graph_margins(results: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    """hybrid (with the graph leg) against hybrid_no_graph, per metric."""
    print(file=out)
    print(
        "| dataset | graph leg | "
        + " | ".join(f"{METRIC_LABELS[m]} margin" for m in METRICS)
        + " | queries better / same / worse (nDCG@10) |",
        file=out,
    )
    print("| --- | --- |" + " ---: |" * len(METRICS) + " ---: |", file=out)
    for r in results:
        with_graph, without = r["modes"]["hybrid"], r["modes"][HYBRID_NO_GRAPH]
        graph = (r.get("settings") or {}).get("graph") or {}
        described = ", ".join(
            f"{key} {graph[key]}" for key in ("weight", "scoring", "depth", "seeds") if key in graph
        )
        margins = " | ".join(
            f"{with_graph[m] - without[m]:+.5f}" if m in with_graph and m in without else "-"
            for m in METRICS
        )
        counts = " / ".join(str(n) for n in r.get("per_query_vs_no_graph", {}).values())
        print(f"| {r['dataset']} | {described or '-'} | {margins} | {counts or '-'} |", file=out)


def read_results(source: str) -> list[dict[str, Any]]:
    """The JSON objects among the lines of ``source`` (a file, or - for stdin)."""
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
