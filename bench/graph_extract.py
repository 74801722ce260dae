"""Link extraction benchmark: the cost of :func:`hsearch.graph.extract.hyperlink_targets`
and :meth:`TitleMentions.find` on inputs built to be slow, at doubling sizes.

Each input is timed at ``--size`` characters, then twice and four times that; the
``growth`` column is the time at four times the size over the time at the size: about 4
for linear cost, about 16 for quadratic.

Usage (from the repository root)::

    python -m bench.graph_extract                 # a table, 250 KB / 500 KB / 1 MB
    python -m bench.graph_extract --size 100000 --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from hsearch.graph.extract import TitleMentions, hyperlink_targets

# name -> the input of a given length
INPUTS: dict[str, Callable[[int], str]] = {
    "prose with links": lambda n: (
        "Some prose with a [link](a/b.md), `code`, [[Wiki]] and <a href=x>y</a>. " * n
    )[:n],
    "open brackets then <": lambda n: "[" * (n - 1) + "<",
    "nested brackets": lambda n: "[" * (n // 2) + "]" * (n // 2),
    "bracket pairs": lambda n: "[]" * (n // 2),
    "unclosed destinations": lambda n: "[](" * (n // 3),
    "unclosed wiki links": lambda n: "[[a|" * (n // 4) + "]",
    "bracket lines": lambda n: "[\n" * (n // 2) + "]",
    "unclosed html attributes": lambda n: '<a href="' * (n // 9),
}

# 2,000 titles, each a suffix of the next ("aaaa" ... ): every place in a run of "a"
# ends as many occurrences as there are titles up to it, the automaton's worst case.
NESTED_TITLES = TitleMentions([(f"t{i}", "a" * i) for i in range(4, 60)])


def _seconds(run: Callable[[str], object], text: str) -> float:
    started = time.perf_counter()
    run(text)
    return time.perf_counter() - started


def measure(size: int) -> list[dict[str, object]]:
    """One row per input: seconds at size, 2 x size and 4 x size, and the growth."""
    rows: list[dict[str, object]] = []
    cases: dict[str, Callable[[str], object]] = dict.fromkeys(INPUTS, hyperlink_targets)
    cases["mentions: run of a, nested titles"] = NESTED_TITLES.find
    makers: dict[str, Callable[[int], str]] = {
        **INPUTS,
        "mentions: run of a, nested titles": lambda n: "a" * n,
    }
    for name, case in cases.items():
        seconds = [_seconds(case, makers[name](size * factor)) for factor in (1, 2, 4)]
        rows.append(
            {
                "input": name,
                "seconds": [round(s, 3) for s in seconds],
                "growth": round(seconds[2] / seconds[0], 1) if seconds[0] > 0 else None,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=250_000, help="characters (then x2, x4)")
    parser.add_argument("--json", action="store_true", help="one JSON document")
    args = parser.parse_args(argv)
    rows = measure(args.size)
    if args.json:
        print(json.dumps({"size": args.size, "rows": rows}, indent=2))
        return
    sizes = [args.size * factor for factor in (1, 2, 4)]
    print(f"{'input':38} " + " ".join(f"{size:>10,}" for size in sizes) + "   growth")
    for row in rows:
        seconds = row["seconds"]
        assert isinstance(seconds, list)
        print(f"{row['input']!s:38} " + " ".join(f"{s:>9.2f}s" for s in seconds), row["growth"])


if __name__ == "__main__":
    main()
