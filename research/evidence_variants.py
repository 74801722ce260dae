"""Query-level tests of a standout, chosen by the fusion protocol on recorded legs.

``adaptive`` fusion moves weight to a leg whose best candidate stands out
(:func:`hsearch.search.fusion.leg_evidence`, ``e`` in ``[0, 1]``). The documented loss on
dense-led sets is that regime: a keyword leg whose confident but wrong first candidate
takes the share ``E`` whatever the prior. This tool replays the product's ``adaptive``
fusion with the evidence transformed by a general, query-level signal and runs the
selection protocol of :mod:`bench.fusion_lodo` (the same grid of priors and ``k``, the
same objective, the same leave-one-dataset-out folds and bootstrap intervals) with the
transform's parameter as one more dimension of the grid (``--fit``) or fixed
(``--fixed``: the parameter is part of the method, the grid is the priors and ``k``).

Transforms (``e`` a leg's evidence, the query's words counted as the sparse leg's
analyzer would split on white space; a Japanese question without spaces counts as one
word, so it is never sharpened):

* ``none``: the product, ``e``;
* ``power:G``: ``e ** G`` (only an unmistakable standout moves the weights);
* ``length:L0``: ``e ** max(1, words / L0)`` (a long question's standout, made of many
  generic terms, must be clearer).

With ``--keyword-coverage``, every design also reads the keyword leg's coverage of the
query where nothing stands out: the keyword leg's share of the no-standout regime is
its prior times ``1 - cov1``, renormalised over the legs (``cov1``, the share of the
query's IDF mass the keyword leg's first candidate holds, from
:mod:`research.leg_signals`: whole documents, the set's corpus statistics). A keyword
leg whose first candidate holds the whole query, as on short queries many documents
match, then leaves the order to the other legs; one that matches a part of a long query
keeps its say. The product reads the same signal itself, per chunk and with the tenant's
statistics (``FusionDefault.keyword_coverage`` and ``length_words``; recorded by
``--save-legs`` and run through the protocol by :mod:`bench.fusion_lodo`), and since
``c930ea1`` also scales the keyword leg's evidence of a standout by it; this tool keeps
the document-level, no-standout-only variant it was found with.

The product's fusion is patched for the replay only (``leg_evidence``, the regimes' shares
and the query the replay is fusing); nothing here is imported by the product.

Usage (from the repository root)::

    python -m bench.relevance --all --max-queries 1000 --modes semantic,keyword \
        --save-legs legs.jsonl
    python -m research.evidence_variants legs.jsonl --fit length:4,8,16,24
    python -m research.evidence_variants legs.jsonl --fixed length:16
    python -m research.evidence_variants legs.jsonl --keyword-coverage --fixed length:8,16
"""

from __future__ import annotations

import argparse
import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from bench import fusion_lodo
from bench.datasets import DATASETS_ROOT, load_dataset
from bench.fusion_lodo import (
    Choice,
    Fold,
    Legs,
    Table,
    default_grid,
    leave_one_out,
    measure,
    select,
)
from bench.fusion_replay import QueryLegs, Replay, read_legs, scores_alone

from hsearch.config import SearchSettings, Settings
from hsearch.search import fusion
from hsearch.types import FusionDefault, FusionMethod, Leg
from research.leg_signals import Corpus

Transform = Callable[[float, str], float]
"""(a leg's evidence, the query) -> the evidence fusion reads."""

_SIMPLICITY = fusion_lodo.simplicity
"""The protocol's own order (patched by :func:`main` to :func:`simpler` while selecting)."""

_REPLAYED: list[QueryLegs | None] = [None]
"""The query the replay is fusing (set by :func:`_replaying`)."""


def words(query: str) -> int:
    return max(1, len(query.split()))


@dataclass(frozen=True)
class Variant:
    """An ``adaptive`` design of the grid with a transform of its evidence.

    Duck-types :class:`~hsearch.types.FusionDefault` where :mod:`bench.fusion_lodo` reads
    one (``method``, ``weights``, ``k``, ``describe``): the untransformed variant is
    the simpler, so :func:`bench.fusion_lodo.simplicity` is extended by the parameter."""

    base: FusionDefault
    transform: str
    parameter: float

    @property
    def method(self) -> FusionMethod:
        return self.base.method

    @property
    def weights(self) -> object:
        return self.base.weights

    @property
    def k(self) -> int:
        return self.base.k

    @property
    def keyword_coverage(self) -> bool:
        return self.base.keyword_coverage

    def leg_weights(self) -> dict[Leg, float]:
        return self.base.leg_weights()

    @property
    def length_words(self) -> int | None:
        return self.base.length_words

    def describe(self) -> str:
        if self.transform == "none":
            return self.base.describe()
        return f"{self.base.describe()} {self.transform}={self.parameter:g}"

    def apply(self, evidence: float, query: str) -> float:
        if self.transform == "none" or evidence <= 0.0:
            return evidence
        if self.transform == "power":
            return evidence**self.parameter
        if self.transform == "length":
            return evidence ** max(1.0, words(query) / self.parameter)
        msg = f"unknown transform {self.transform!r}"
        raise ValueError(msg)


@contextlib.contextmanager
def _replaying() -> Iterator[None]:
    """The replay tells fusion which query it is fusing (:data:`_REPLAYED`)."""
    original_rank = Replay.rank

    def rank(self: Replay, q: QueryLegs, mode: str) -> list[str]:
        _REPLAYED[0] = q
        return original_rank(self, q, mode)

    with mock.patch.object(Replay, "rank", rank):
        yield


@contextlib.contextmanager
def patched(variant: Variant) -> Iterator[None]:
    """Fusion reads ``variant``'s evidence of the query being replayed."""
    original_evidence = fusion.leg_evidence

    def evidence(scores: Sequence[float]) -> float:
        q = _REPLAYED[0]
        return variant.apply(original_evidence(scores), q.query if q is not None else "")

    with _replaying(), mock.patch.object(fusion, "leg_evidence", evidence):
        yield


def first_keyword_coverage(
    queries: Sequence[QueryLegs], corpus_of: Callable[[str], Corpus]
) -> dict[tuple[str, str], float]:
    """``cov1`` of every query (0 without keyword candidates), by (dataset, query id)."""
    out = {}
    for q in queries:
        corpus = corpus_of(q.dataset)
        words = corpus.query_words(q.query)
        out[(q.dataset, q.query_id)] = corpus.first_coverage(words, q.legs.get("sparse", []))
    return out


def covered_shares(plain: dict[str, float], coverage: float) -> dict[str, float]:
    """The no-standout shares with the keyword leg's times ``1 - coverage``, the regime's
    total kept (all of it to the other legs when the keyword leg's first candidate holds
    the whole query)."""
    if "sparse" not in plain:
        return plain
    scaled = {leg: w * (1.0 - coverage) if leg == "sparse" else w for leg, w in plain.items()}
    total, kept = math.fsum(plain.values()), math.fsum(scaled.values())
    if kept <= 0.0:
        return plain
    return {leg: total * w / kept for leg, w in scaled.items()}


@contextlib.contextmanager
def keyword_coverage(coverage: dict[tuple[str, str], float]) -> Iterator[None]:
    """Fusion reads the keyword leg's coverage of the query being replayed (module
    docstring); undone on exit."""
    original_regimes = fusion._regimes

    def regimes(
        legs: Sequence[Any], reading: fusion.QueryReading = fusion.NO_READING
    ) -> tuple[dict[str, float], dict[str, float]]:
        plain, standout = original_regimes(legs, reading)
        q = _REPLAYED[0]
        covered = coverage[(q.dataset, q.query_id)] if q is not None else 0.0
        return covered_shares(plain, covered), standout

    with _replaying(), mock.patch.object(fusion, "_regimes", regimes):
        yield


def parse_family(text: str) -> tuple[str, list[float]]:
    """``length:4,8,16`` -> ("length", [4, 8, 16]); ``none`` -> ("none", [])."""
    name, _, values = text.partition(":")
    if name not in ("none", "power", "length"):
        msg = f"unknown transform {name!r} (none, power, length)"
        raise ValueError(msg)
    params = [math.inf if v in ("inf", "∞") else float(v) for v in values.split(",") if v]
    if name != "none" and not params:
        msg = f"{name} needs values: {name}:V1,V2,..."
        raise ValueError(msg)
    return name, params


def adaptive_grid() -> list[FusionDefault]:
    """The protocol's ``adaptive`` designs that read the legs' scores alone (the
    transforms here are this tool's own readings of the query)."""
    return [
        d
        for d in default_grid()
        if d.method is FusionMethod.ADAPTIVE and not d.keyword_coverage and d.length_words is None
    ]


def measure_variants(
    queries: Sequence[QueryLegs],
    variants: dict[tuple[str, float], list[Variant]],
    settings: SearchSettings,
    *,
    jobs: int,
) -> Table:
    """Every variant's hybrid nDCG@10 per dataset (the grid once per transform)."""
    hybrid: dict[object, dict[str, float]] = {}
    legs: dict[str, Legs] = {}
    for (name, parameter), group in variants.items():
        started = time.perf_counter()
        with patched(group[0]):
            table = measure(queries, [v.base for v in group], settings, jobs=jobs)
        legs = table.legs
        for v in group:
            hybrid[v] = table.hybrid[v.base]
        print(
            f"[variants] {name}={parameter:g}: {len(group)} designs in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
            flush=True,
        )
    return Table(legs=legs, hybrid=hybrid)  # type: ignore[arg-type]


def simpler(variant: Variant) -> tuple[int, float, int, float]:
    """:func:`bench.fusion_lodo.simplicity`, then no transform before one, then the
    gentler transform (a larger ``L0``, a smaller power)."""
    method, reading, k = _SIMPLICITY(variant.base)
    if variant.transform == "none":
        return method, reading, k, 0.0
    gentle = 1.0 / variant.parameter if variant.transform == "length" else variant.parameter
    return method, reading, k, 1.0 + gentle


def with_intervals(
    queries: Sequence[QueryLegs], table: Table, folds: Sequence[Fold], settings: SearchSettings
) -> list[Fold]:
    """:func:`bench.fusion_lodo.with_intervals`, each fold under its variant's evidence."""
    out = []
    for f in folds:
        with patched(f.choice.design):  # type: ignore[arg-type]  # a Variant in this table
            out += fusion_lodo.with_intervals(queries, table, [f], settings)
    return out


def render(table: Table, folds: Sequence[Fold], chosen: Choice, label: str) -> None:
    names = list(table.legs)
    print(f"\n## {label}\n")
    print(
        "| left out | queries | chosen on the other sets | hybrid | best leg | margin "
        "| 95% interval | pass |"
    )
    print("| --- | ---: | --- | ---: | ---: | ---: | :---: | :---: |")
    for f in folds:
        low, high = f.interval or (math.nan, math.nan)
        print(
            f"| {f.dataset} | {f.legs.queries} | `{f.choice.design.describe()}` | "
            f"{f.hybrid:.4f} | {f.legs.best:.4f} ({f.legs.best_leg}) | {f.margin:+.5f} | "
            f"[{low:+.4f}, {high:+.4f}] | {'✓' if f.passed else '✗'} |"
        )
    passed = sum(f.passed for f in folds)
    print(f"\n{passed} of {len(folds)} folds pass.")
    print(
        f"Chosen on all {len(names)} sets: `{chosen.design.describe()}` (worst "
        f"{chosen.worst:+.5f}, mean {chosen.mean:+.5f}; {chosen.tied} tied)"
    )
    margins = table.margins(chosen.design, names)  # type: ignore[arg-type]
    print("  " + ", ".join(f"{n} {m:+.4f}" for n, m in margins.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research.evidence_variants")
    parser.add_argument("legs", type=Path)
    parser.add_argument(
        "--fit", type=parse_family, action="append", default=[], metavar="T:V1,V2",
        help="the transform's parameter is one more dimension of the grid (with none)",
    )  # fmt: skip
    parser.add_argument(
        "--fixed", type=parse_family, action="append", default=[], metavar="T:V",
        help="the transform with this parameter is the method: the grid is priors and k",
    )  # fmt: skip
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--keyword-coverage", action="store_true",
        help="every design reads the keyword leg's coverage of the query where nothing "
        "stands out (module docstring); reads the sets' corpora",
    )  # fmt: skip
    parser.add_argument(
        "--all-methods", action="store_true",
        help="rrf, score and sum designs of bench.fusion_lodo's grid join every family",
    )  # fmt: skip
    parser.add_argument("--datasets-root", type=Path, default=DATASETS_ROOT)
    args = parser.parse_args(argv)
    queries = list(read_legs(args.legs))
    with contextlib.ExitStack() as stack:
        if args.keyword_coverage:
            corpora: dict[str, Corpus] = {}

            def corpus_of(name: str) -> Corpus:
                if name not in corpora:
                    corpora[name] = Corpus.of(load_dataset(args.datasets_root / name).corpus)
                return corpora[name]

            stack.enter_context(keyword_coverage(first_keyword_coverage(queries, corpus_of)))
        run_families(queries, args)
    return 0


def run_families(queries: Sequence[QueryLegs], args: argparse.Namespace) -> None:
    """Measure every family :func:`main` asked for, then run the protocol on each."""
    settings = scores_alone(Settings(_env_file=None).search)
    grid = adaptive_grid()
    others = [
        Variant(d, "none", math.inf)
        for d in default_grid()
        if args.all_methods and d.method is not FusionMethod.ADAPTIVE
    ]
    wanted: dict[tuple[str, float], list[Variant]] = {
        ("none", math.inf): [Variant(d, "none", math.inf) for d in grid] + others
    }
    for name, params in [*args.fit, *args.fixed]:
        for p in params:
            wanted[(name, p)] = [Variant(d, name, p) for d in grid]
    table = measure_variants(queries, wanted, settings, jobs=args.jobs)
    original = fusion_lodo.simplicity
    fusion_lodo.simplicity = simpler  # type: ignore[assignment]
    try:
        today = wanted[("none", math.inf)]
        runs: list[tuple[str, list[Variant]]] = [("none (today's method)", today)]
        for name, params in args.fit:
            pool = [v for p in params for v in wanted[(name, p)]] + today
            runs.append((f"{name} fitted over {params} and none", pool))
        for name, params in args.fixed:
            runs.extend((f"{name}={p:g} fixed", wanted[(name, p)] + others) for p in params)
        for label, pool in runs:
            sub = Table(legs=table.legs, hybrid={v: table.hybrid[v] for v in pool})  # type: ignore[index]
            folds = with_intervals(queries, sub, leave_one_out(sub), settings)
            render(sub, folds, select(sub, list(sub.legs)), label)
    finally:
        fusion_lodo.simplicity = original  # type: ignore[assignment]


if __name__ == "__main__":
    sys.exit(main())
