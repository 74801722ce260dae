"""How much a set's links could lift the default hybrid ranking's first five, at most.

The graph leg ranks documents by their closeness (through the links) to the other legs'
best hits. Whatever its scoring and weight, it can only lift into the first five a
judged document that the links connect to what the ranking already holds there. This
tool measures that ceiling on recorded legs (``python -m bench.relevance --save-legs``)
and the set's ``edges.tsv``, with the default hybrid fusion replayed as the service
resolves it (:mod:`bench.fusion_replay`), at document level:

* ``judged_missing``: judged documents outside the first five, and where they rank;
* ``adjacent``: how many of them one link (either way) joins to a document of the first
  five, and to a *judged* one there;
* ``best_neighbour``: for the first ``--from`` hits, their best-ranked neighbour
  between ranks 6 and ``--max-rank``: how often it is judged (a graph leg promoting it
  would gain), against how often rank 5 is (what promoting it would push out).

A lift needs the second share above the first by enough to outweigh what it pushes out.

Usage (from the repository root)::

    python -m bench.relevance --dataset ../shared/datasets/en-musique-train-100 \\
        --modes semantic,keyword --save-legs legs.jsonl
    python -m bench.graph_headroom legs.jsonl --dataset ../shared/datasets/en-musique-train-100
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.datasets import EDGES_FILE, read_edges
from bench.fusion_replay import QueryLegs, Replay, read_legs
from hsearch.config import Settings

RANK_BUCKETS = ((10, "6-10"), (30, "11-30"), (100, "31-100"))


def neighbours(edges: Mapping[str, Sequence[Any]]) -> dict[str, set[str]]:
    """Each document's neighbours, links followed both ways."""
    out: dict[str, set[str]] = {}
    for source, links in edges.items():
        for link in links:
            out.setdefault(source, set()).add(link.target)
            out.setdefault(link.target, set()).add(source)
    return out


def _bucket(rank: int | None) -> str:
    for limit, name in RANK_BUCKETS:
        if rank is not None and rank <= limit:
            return name
    return "absent"


def headroom(
    queries: Sequence[QueryLegs],
    links: Mapping[str, set[str]],
    *,
    replay: Replay,
    first: int = 1,
    max_rank: int = 50,
) -> dict[str, Any]:
    """The figures of the module docstring, over ``queries`` of one set."""
    missing: Counter[str] = Counter()
    adjacent = adjacent_judged = judged_top5 = 0
    offered = offered_judged = rank5_judged = 0
    for q in queries:
        ranking = list(dict.fromkeys(replay.rank(q, "hybrid")))
        rank = {doc: i for i, doc in enumerate(ranking, start=1)}
        top5 = ranking[:5]
        for doc in q.qrels:
            if doc in top5:
                judged_top5 += 1
                continue
            missing[_bucket(rank.get(doc))] += 1
            near = links.get(doc, set()) & set(top5)
            adjacent += bool(near)
            adjacent_judged += any(n in q.qrels for n in near)
        reachable = set().union(*(links.get(doc, set()) for doc in ranking[:first]))
        candidates = [d for d in reachable if 5 < rank.get(d, max_rank + 1) <= max_rank]
        if candidates:
            offered += 1
            offered_judged += min(candidates, key=rank.__getitem__) in q.qrels
            rank5_judged += len(ranking) >= 5 and ranking[4] in q.qrels
    return {
        "queries": len(queries),
        "judged_in_top5": judged_top5,
        "judged_missing": sum(missing.values()),
        "missing_at_rank": dict(sorted(missing.items())),
        "adjacent": adjacent,
        "adjacent_to_judged": adjacent_judged,
        "best_neighbour": {
            "from_first": first,
            "max_rank": max_rank,
            "queries": offered,
            "judged": offered_judged,
            "rank5_judged": rank5_judged,
        },
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file")
    parser.add_argument("--dataset", type=Path, required=True, help="the set's BEIR folder")
    parser.add_argument("--from", dest="first", type=int, default=1, metavar="N")
    parser.add_argument("--max-rank", type=int, default=50)
    args = parser.parse_args(argv)
    if not (args.dataset / EDGES_FILE).is_file():
        parser.error(f"{args.dataset} has no {EDGES_FILE}")
    if args.first < 1 or args.max_rank <= 5:
        parser.error("--from must be >= 1 and --max-rank > 5")
    name = args.dataset.name
    queries = [q for q in read_legs(args.legs) if q.dataset == name]
    if not queries:
        parser.error(f"{args.legs} holds no query of {name}")
    links = neighbours(read_edges(args.dataset / EDGES_FILE))
    result = headroom(
        queries,
        links,
        replay=Replay(Settings().search),
        first=args.first,
        max_rank=args.max_rank,
    )
    json.dump({"dataset": name, **result}, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
