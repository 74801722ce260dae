"""Replay hybrid fusion on recorded candidate lists: seconds instead of a full benchmark.

``python -m bench.relevance --save-legs legs.jsonl`` records, for every query, the
dense and sparse candidate lists the product's own legs returned (chunk id, corpus id,
raw score). This tool fuses them again with the product's code, the weight rule of
:func:`hsearch.search.ranking.query_weights` and :func:`hsearch.search.fusion.fuse`,
and scores the result like the benchmark does. Fusion methods and weights can then be
compared on identical candidates, and the recorded file makes ``docs/fusion.md``'s
measurements reproducible.

Usage (from the repository root)::

    python -m bench.relevance --all --modes semantic,keyword --save-legs legs.jsonl
    python -m bench.fusion_replay legs.jsonl                       # the configured default
    python -m bench.fusion_replay legs.jsonl --fusion rrf --weights dense=0.5,sparse=0.5
    python -m bench.fusion_replay legs.jsonl --by-prefix --json

``HSEARCH_SEARCH__*`` environment variables apply as in the service.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from bench.metrics import evaluate_ranking
from bench.report import TOP_K, ModeRun, hybrid_check, per_query_comparison, summarise
from hsearch.config import SearchSettings, Settings
from hsearch.search.fusion import LegHit, fuse
from hsearch.search.ranking import query_weights
from hsearch.types import MODE_LEGS, FusionMethod

LEGS_OF_MODE = {mode.value: tuple(leg.value for leg in legs) for mode, legs in MODE_LEGS.items()}


@dataclass(frozen=True)
class QueryLegs:
    """One recorded query: its text, judgements and each leg's candidates in leg order."""

    dataset: str
    query_id: str
    query: str
    qrels: dict[str, float]
    legs: dict[str, list[tuple[str, str, float]]]  # leg -> [(chunk id, corpus id, score)]
    dense_scripts: frozenset[str] | None  # the encoder's (EncoderInfo.dense_scripts)


Fuser = Callable[[Mapping[str, Sequence[LegHit]], Mapping[str, float], int], list[str]]
"""(legs, weights, k) -> ids in fused order: a fusion other than the product's."""


@dataclass
class Replay:
    """What to fuse with: the configured search settings, optionally overridden.

    ``fuser`` replaces the product's :func:`fuse` for two-leg modes (designs that are
    not the product's, measured on the same legs); the weight rule stays the service's.
    """

    settings: SearchSettings
    fusion: str | None = None
    weights: dict[str, float] | None = None
    fuser: Fuser | None = None
    fuse_seconds: float = 0.0  # time spent in fuse() for queries with two legs
    fused_queries: int = 0

    def rank(self, q: QueryLegs, mode: str) -> list[str]:
        """Corpus ids of the first TOP_K hits ``mode`` returns for ``q``."""
        legs = {
            leg: [LegHit(chunk, score) for chunk, _, score in q.legs[leg]]
            for leg in LEGS_OF_MODE[mode]
            if q.legs.get(leg)
        }
        if not legs:
            return []
        method = FusionMethod(self.fusion or self.settings.fusion)
        configured = self.weights or {
            leg.value: w for leg, w in self.settings.default_weights(method).items()
        }
        weights = query_weights(
            q.query,
            legs,
            configured=configured,
            dense_scripts=q.dense_scripts,
            min_dense_script_coverage=self.settings.min_dense_script_coverage,
        )
        k = self.settings.rrf_k
        started = time.perf_counter()
        if self.fuser is not None and len(legs) > 1:
            ids = self.fuser(legs, weights, k)
        else:
            ids = [hit.id for hit in fuse(legs, method=method, weights=weights, k=k)]
        if len(legs) > 1:
            self.fuse_seconds += time.perf_counter() - started
            self.fused_queries += 1
        corpus_id = {chunk: doc for rows in q.legs.values() for chunk, doc, _ in rows}
        return [corpus_id[doc] for doc in ids[:TOP_K]]


def read_legs(path: Path) -> Iterator[QueryLegs]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            r = json.loads(line)
            yield QueryLegs(
                dataset=r["dataset"],
                query_id=r["query_id"],
                query=r["query"],
                qrels={doc: float(s) for doc, s in r["qrels"].items()},
                legs={
                    leg: [(str(c), str(d), float(s)) for c, d, s in rows]
                    for leg, rows in r["legs"].items()
                },
                dense_scripts=(
                    None if r["dense_scripts"] is None else frozenset(r["dense_scripts"])
                ),
            )


def evaluate(
    queries: Sequence[QueryLegs], replay: Replay, *, by_prefix: bool = False
) -> list[dict[str, Any]]:
    """One result per dataset, in the shape ``bench.relevance --json`` prints."""
    datasets: dict[str, list[QueryLegs]] = {}
    for q in queries:
        datasets.setdefault(q.dataset, []).append(q)
    results = []
    for name, items in datasets.items():
        seconds, fused = replay.fuse_seconds, replay.fused_queries
        per_mode = {
            mode: [evaluate_ranking(replay.rank(q, mode), q.qrels) for q in items]
            for mode in LEGS_OF_MODE
        }
        modes, groups = summarise(
            {mode: ModeRun(per_query=rows) for mode, rows in per_mode.items()},
            [q.query_id for q in items],
        )
        result: dict[str, Any] = {
            "dataset": name,
            "queries": len(items),
            "fusion": replay.fusion or replay.settings.fusion,
            "modes": modes,
        }
        if replay.fused_queries > fused:
            result["fuse_ms_mean"] = (
                1000 * (replay.fuse_seconds - seconds) / (replay.fused_queries - fused)
            )
        check = hybrid_check(result)
        if check is not None:
            result["per_query_vs_best_leg"] = per_query_comparison(
                per_mode["hybrid"], per_mode[check[0]]
            )
        if by_prefix:
            result["by_prefix"] = groups
        results.append(result)
    return results


def render(results: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    """nDCG@10 per mode, and hybrid's margin over the better single leg."""
    print(
        f"{'dataset':<24}{'queries':>8}{'semantic':>10}{'keyword':>10}{'hybrid':>10}"
        f"{'margin':>10}  hybrid >= best leg; queries better/same/worse; mean fuse() time",
        file=out,
    )
    for r in results:
        m = {mode: r["modes"][mode]["ndcg@10"] for mode in LEGS_OF_MODE}
        check = hybrid_check(r)
        best, ok = check if check is not None else ("-", False)
        margin = m["hybrid"] - m[best] if best in m else float("nan")
        print(
            f"{r['dataset']:<24}{r['queries']:>8}{m['semantic']:>10.4f}{m['keyword']:>10.4f}"
            f"{m['hybrid']:>10.4f}{margin:>+10.5f}  {'yes' if ok else 'NO'} ({best}); "
            + "/".join(str(n) for n in r.get("per_query_vs_best_leg", {}).values())
            + (f"; fuse {r['fuse_ms_mean']:.2f} ms" if "fuse_ms_mean" in r else ""),
            file=out,
        )
        groups = r.get("by_prefix") or {}
        for prefix, group in groups.items() if len(groups) > 1 else ():
            g = {mode: group["modes"][mode]["ndcg@10"] for mode in LEGS_OF_MODE}
            best_leg = max(g["semantic"], g["keyword"])
            print(
                f"  {prefix or '-':<22}{group['queries']:>8}{g['semantic']:>10.4f}"
                f"{g['keyword']:>10.4f}{g['hybrid']:>10.4f}{g['hybrid'] - best_leg:>+10.5f}",
                file=out,
            )


def _parse_weights(text: str) -> dict[str, float]:
    try:
        pairs = (part.split("=", 1) for part in text.split(",") if part.strip())
        return {leg.strip(): float(value) for leg, value in pairs}
    except ValueError:
        msg = f"--weights: expected leg=weight pairs such as dense=0.7,sparse=0.3 (got {text!r})"
        raise argparse.ArgumentTypeError(msg) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fusion_replay",
        description="Fuse recorded dense and sparse candidate lists (bench.relevance "
        "--save-legs) with the product's fusion and report nDCG@10 per mode.",
    )
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file")
    parser.add_argument(
        "--fusion", choices=("adaptive", "rrf", "score"), help="default: the configured one"
    )
    parser.add_argument(
        "--weights", type=_parse_weights, metavar="dense=W,sparse=W",
        help="leg weights (default: the configured ones for the method)",
    )  # fmt: skip
    parser.add_argument(
        "--by-prefix", action="store_true", help="also per query-id prefix (XQuAD languages)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per dataset")
    args = parser.parse_args(argv)
    if not args.legs.is_file():
        parser.error(f"{args.legs}: no such file")
    replay = Replay(
        settings=Settings(_env_file=None).search, fusion=args.fusion, weights=args.weights
    )
    results = evaluate(list(read_legs(args.legs)), replay, by_prefix=args.by_prefix)
    if args.json:
        for result in results:
            print(json.dumps(result, ensure_ascii=False))
    else:
        render(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
