"""Compare two relevance runs metric by metric: ``python -m bench.compare A B``.

``A`` and ``B`` are ``python -m bench.relevance --json`` outputs (comma-separated files
each, or - for stdin). Every dataset, mode and metric (and every query-id prefix, with
``--by-prefix`` runs) is compared rounded to ``--places`` decimals (5 by default), along
with what each run measured (queries, documents, chunks, sample). Latencies are not
compared. Prints one line per value and exits 1 if any differs: the check that a change
meant to keep behaviour (a refactor) kept every number.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.report import read_results

_SAME_RUN = ("queries", "documents", "chunks", "sample")


@dataclass(frozen=True, slots=True)
class Difference:
    where: str
    left: object
    right: object


def _runs(sources: str) -> dict[str, dict[str, Any]]:
    return {r["dataset"]: r for source in sources.split(",") for r in read_results(source)}


def _metric_groups(
    left: Mapping[str, Any], right: Mapping[str, Any]
) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    yield "all", left["modes"], right["modes"]
    prefixes = (left.get("by_prefix") or {}).keys() | (right.get("by_prefix") or {}).keys()
    for prefix in sorted(prefixes):
        yield (
            f"prefix {prefix!r}",
            (left.get("by_prefix") or {}).get(prefix, {}).get("modes", {}),
            (right.get("by_prefix") or {}).get(prefix, {}).get("modes", {}),
        )


def compare(
    left: Mapping[str, Mapping[str, Any]],
    right: Mapping[str, Mapping[str, Any]],
    *,
    places: int = 5,
) -> tuple[int, list[Difference]]:
    """How many values were compared, and those that differ (rounded to ``places``)."""
    compared = 0
    differences: list[Difference] = []
    for name in sorted(left.keys() | right.keys()):
        if name not in left or name not in right:
            differences.append(Difference(name, name in left, name in right))
            continue
        a, b = left[name], right[name]
        for key in _SAME_RUN:
            compared += 1
            if a.get(key) != b.get(key):
                differences.append(Difference(f"{name} {key}", a.get(key), b.get(key)))
        for label, modes_a, modes_b in _metric_groups(a, b):
            for mode in sorted(modes_a.keys() | modes_b.keys()):
                metrics_a, metrics_b = modes_a.get(mode, {}), modes_b.get(mode, {})
                for metric in sorted(metrics_a.keys() | metrics_b.keys()):
                    compared += 1
                    va, vb = metrics_a.get(metric), metrics_b.get(metric)
                    if va is None or vb is None or round(va, places) != round(vb, places):
                        differences.append(Difference(f"{name} {label} {mode} {metric}", va, vb))
    return compared, differences


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.compare", description=__doc__)
    parser.add_argument("left", help="JSON lines of one run (files, comma-separated, or -)")
    parser.add_argument("right", help="JSON lines of the other run")
    parser.add_argument("--places", type=int, default=5, help="decimals compared (default 5)")
    args = parser.parse_args(argv)
    compared, differences = compare(_runs(args.left), _runs(args.right), places=args.places)
    for d in differences:
        print(f"DIFF {d.where}: {d.left} != {d.right}")
    print(f"{compared} values compared to {args.places} decimals, {len(differences)} differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
