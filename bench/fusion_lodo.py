"""Leave-one-dataset-out (LODO) choice of a fusion default, on recorded legs.

A default is judged on sets nobody has seen, so the question is not which design scores
best on the visible sets but whether the *way* a design is chosen generalises. LODO
answers it with the data at hand: for each dataset, choose a design on the other sets
only, then score that choice on the one left out. The selection on all sets together is
the candidate default (``EncoderInfo.fusion`` of the encoder that recorded the legs).

Designs are what the product can run: a :class:`~hsearch.types.FusionDefault` (method,
weights, ``k``) fused by :func:`hsearch.search.fusion.fuse` after the service's weight
rule, replayed and scored by :mod:`bench.fusion_replay` (the same code as
``python -m bench.fusion_replay legs.jsonl --fusion M --weights ... --k K``).

The selection objective (:func:`select`), on the margins ``hybrid nDCG@10 - the better
single leg's`` of the training sets:

1. the worst margin: the requirement is "never below the better leg", on every set,
   including unseen ones, so the design that is safest on its worst known set is the
   best guess for an unknown one; a mean would let one easy set pay for another;
2. within :data:`TOLERANCE` (0.002) of the best worst margin, the best mean margin;
3. within :data:`TOLERANCE` of that mean, the simplest design (:func:`simplicity`):
   differences this small are noise on sets of 40 to 14,000 queries, and a simpler
   design assumes less about the next set. Simplest means the simplest method
   (:data:`SIMPLICITY`) and, for the methods that read ``k``, RRF's customary
   ``k`` = 60 over a fitted one (a constant the training sets cannot tell from the
   customary value is not worth fitting); then the better worst margin, the better
   mean, the name (deterministic).

Usage (from the repository root)::

    python -m bench.relevance --all --json --save-legs legs.jsonl > relevance.jsonl
    python -m bench.fusion_lodo legs.jsonl            # the LODO table and the choice
    python -m bench.fusion_lodo legs.jsonl --json     # everything, one JSON object
    python -m bench.fusion_lodo legs.jsonl --markdown # the tables of docs/fusion.md

``HSEARCH_SEARCH__MIN_DENSE_SCRIPT_COVERAGE`` applies as in the service; the fusion
settings do not apply to the designs (every design sets method, weights and ``k``), only
to ``--markdown``'s table of the default the service runs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from bench.fusion_replay import QueryLegs, Replay, evaluate, read_legs
from bench.metrics import evaluate_ranking
from hsearch.config import SearchSettings, Settings
from hsearch.types import DEFAULT_RRF_K, FusionDefault, FusionMethod, Leg

TOLERANCE = 0.002
"""Margins closer than this are "the same" (the requirement's slack)."""

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20261128
BOOTSTRAP_LEVEL = 0.95

SIMPLICITY = {
    FusionMethod.RRF: 0,
    FusionMethod.SCORE: 1,
    FusionMethod.SUM: 2,
    FusionMethod.ADAPTIVE: 3,
}
"""Simpler first, by what a method assumes about the legs' scores: ``rrf`` reads ranks
only; ``score`` reads scores up to a per-query min-max; ``sum`` reads raw scores, so it
assumes the legs share a scale; ``adaptive`` adds a noise model of each leg's scores."""

DENSE_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
RRF_KS = (20, 60, 100)
SUM_SPARSE_WEIGHTS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.3)
ADAPTIVE_PRIORS = (0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
ADAPTIVE_KS = (20, 60, 100)
ADAPTIVE_READINGS: tuple[tuple[bool, int | None], ...] = (
    (False, None),
    (True, None),
    (True, 8),
    (True, 16),
    (True, 24),
)
"""What ``adaptive`` reads of the query (``keyword_coverage``, ``length_words``): the
scores alone, the keyword leg's coverage, and the coverage with a clearer standout asked
of queries longer than 8, 16 or 24 words. The lengths were fixed before the product's
coverage was recorded (docs/fusion.md)."""


def _weights(dense: float, sparse: float) -> dict[Leg, float]:
    return {Leg.DENSE: dense, Leg.SPARSE: sparse}


def default_grid() -> list[FusionDefault]:
    """The candidate designs.

    * ``rrf``: dense weight (sparse ``1 - w``) x ``k``;
    * ``score`` (min-max): dense weight;
    * ``sum``: dense 1 and a sparse weight (raw scores: the ratio has to bridge the
      legs' scales, e.g. cosine against BM25);
    * ``adaptive``: prior x ``k`` x what it reads of the query (:data:`ADAPTIVE_READINGS`).
    """
    designs = [
        FusionDefault.of(FusionMethod.RRF, _weights(w, round(1 - w, 2)), k)
        for w in DENSE_WEIGHTS
        for k in RRF_KS
    ]
    designs += [
        FusionDefault.of(FusionMethod.SCORE, _weights(w, round(1 - w, 2))) for w in DENSE_WEIGHTS
    ]
    designs += [FusionDefault.of(FusionMethod.SUM, _weights(1.0, s)) for s in SUM_SPARSE_WEIGHTS]
    designs += [
        FusionDefault.of(
            FusionMethod.ADAPTIVE,
            _weights(p, round(1 - p, 2)),
            k,
            keyword_coverage=coverage,
            length_words=length,
        )
        for coverage, length in ADAPTIVE_READINGS
        for p in ADAPTIVE_PRIORS
        for k in ADAPTIVE_KS
    ]
    return designs


@dataclass(frozen=True)
class Legs:
    """One dataset's single-leg nDCG@10."""

    queries: int
    dense: float
    sparse: float

    @property
    def best(self) -> float:
        return max(self.dense, self.sparse)

    @property
    def best_leg(self) -> str:
        return "dense" if self.dense >= self.sparse else "sparse"


@dataclass(frozen=True)
class Table:
    """Every design's hybrid nDCG@10 per dataset, and the datasets' single legs."""

    legs: dict[str, Legs]
    hybrid: dict[FusionDefault, dict[str, float]]

    def margins(self, design: FusionDefault, datasets: Iterable[str]) -> dict[str, float]:
        return {name: self.hybrid[design][name] - self.legs[name].best for name in datasets}


def measure(
    queries: Sequence[QueryLegs],
    designs: Sequence[FusionDefault],
    settings: SearchSettings,
    *,
    jobs: int = 1,
    progress: TextIO | None = None,
) -> Table:
    """Replay every design on ``queries`` (the single legs once).

    Designs are measured in groups of one method and ``k``, each group with one
    :attr:`Replay.memo`: a query whose dense leg the coverage rule silences fuses the
    same for every weight of the group, so it is fused once. ``jobs`` > 1 spreads the
    groups over that many processes (forked: they share the loaded legs).
    """
    legs: dict[str, Legs] = {}
    for r in evaluate(queries, Replay(settings=settings), modes=("semantic", "keyword")):
        legs[r["dataset"]] = Legs(
            r["queries"], r["modes"]["semantic"]["ndcg@10"], r["modes"]["keyword"]["ndcg@10"]
        )
    groups: dict[tuple[FusionMethod, int], list[FusionDefault]] = {}
    for design in designs:
        groups.setdefault((design.method, design.k), []).append(design)
    work = list(groups.values())
    started = time.perf_counter()
    hybrid: dict[FusionDefault, dict[str, float]] = {}

    def done(n: int, group: Sequence[FusionDefault]) -> None:
        if progress is not None:
            elapsed = time.perf_counter() - started
            print(
                f"[lodo] {n}/{len(work)} groups: {group[0].method.value} k={group[0].k} "
                f"({len(group)} designs) done at {elapsed:.0f} s",
                file=progress,
                flush=True,
            )

    if jobs <= 1 or len(work) == 1:
        for n, group in enumerate(work, 1):
            hybrid.update(_measure_group(queries, group, settings))
            done(n, group)
    else:
        global _SHARED  # noqa: PLW0603  (read by the forked workers)
        _SHARED = (queries, settings)
        try:
            context = multiprocessing.get_context("fork")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
                for n, (group, result) in enumerate(
                    zip(work, pool.map(_measure_shared, work), strict=True), 1
                ):
                    hybrid.update(result)
                    done(n, group)
        finally:
            _SHARED = None
    return Table(legs=legs, hybrid={d: hybrid[d] for d in designs})


_SHARED: tuple[Sequence[QueryLegs], SearchSettings] | None = None


def _measure_shared(group: Sequence[FusionDefault]) -> dict[FusionDefault, dict[str, float]]:
    """:func:`_measure_group` in a forked worker, on the parent's queries and settings."""
    if _SHARED is None:
        msg = "no shared queries: workers must be forked by measure()"
        raise RuntimeError(msg)
    queries, settings = _SHARED
    return _measure_group(queries, group, settings)


def _measure_group(
    queries: Sequence[QueryLegs], group: Sequence[FusionDefault], settings: SearchSettings
) -> dict[FusionDefault, dict[str, float]]:
    """Hybrid nDCG@10 per dataset of each design of ``group``, with one memo."""
    memo: dict[tuple[Any, ...], list[str]] = {}
    hybrid = {}
    for design in group:
        replay = design_replay(design, settings, memo=memo)
        results = evaluate(queries, replay, modes=("hybrid",))
        hybrid[design] = {r["dataset"]: r["modes"]["hybrid"]["ndcg@10"] for r in results}
    return hybrid


@dataclass(frozen=True)
class Choice:
    """The design :func:`select` chose on some training sets, and why."""

    design: FusionDefault
    worst: float
    mean: float
    tied: int
    """Designs within the tolerance of the best worst and mean margins (the simplest of
    them was chosen)."""


def simplicity(design: FusionDefault) -> tuple[int, float, int]:
    """Smaller is simpler: the method's rank in :data:`SIMPLICITY`; then what it reads of
    the query (nothing, 0; the keyword coverage, 1; the length as well, 2 plus
    ``1 / length_words``: a design that sharpens only longer queries is the gentler);
    then 0 for the customary ``k`` (or a method that does not read ``k``) and 1 for a
    fitted one."""
    reads_k = design.method in (FusionMethod.RRF, FusionMethod.ADAPTIVE)
    reading = float(design.keyword_coverage) + (
        1.0 + 1.0 / design.length_words if design.length_words is not None else 0.0
    )
    return SIMPLICITY[design.method], reading, int(reads_k and design.k != DEFAULT_RRF_K)


def select(
    table: Table,
    training: Sequence[str],
    designs: Sequence[FusionDefault] | None = None,
    *,
    tolerance: float = TOLERANCE,
) -> Choice:
    """The design the objective of the module docstring picks on ``training``."""
    candidates = list(table.hybrid) if designs is None else list(designs)
    worst: dict[FusionDefault, float] = {}
    mean: dict[FusionDefault, float] = {}
    for d in candidates:
        m = list(table.margins(d, training).values())
        worst[d], mean[d] = min(m), math.fsum(m) / len(m)
    safest = max(worst.values())
    safe = [d for d in candidates if worst[d] >= safest - tolerance]
    best_mean = max(mean[d] for d in safe)
    tied = [d for d in safe if mean[d] >= best_mean - tolerance]
    chosen = min(tied, key=lambda d: (simplicity(d), -worst[d], -mean[d], d.describe()))
    return Choice(chosen, worst[chosen], mean[chosen], len(tied))


@dataclass(frozen=True)
class Fold:
    """One left-out dataset: the design chosen on the others, scored on it."""

    dataset: str
    choice: Choice
    hybrid: float
    legs: Legs
    interval: tuple[float, float] | None = None
    """The margin's bootstrap interval over the set's queries (:func:`with_intervals`)."""

    @property
    def margin(self) -> float:
        return self.hybrid - self.legs.best

    @property
    def passed(self) -> bool:
        return self.margin >= -TOLERANCE


def leave_one_out(table: Table, *, tolerance: float = TOLERANCE) -> list[Fold]:
    """For every dataset: select on the others, score on it."""
    names = list(table.legs)
    if len(names) < 2:
        msg = f"leave-one-dataset-out needs at least 2 datasets, got {len(names)}"
        raise ValueError(msg)
    folds = []
    for name in names:
        choice = select(table, [n for n in names if n != name], tolerance=tolerance)
        folds.append(Fold(name, choice, table.hybrid[choice.design][name], table.legs[name]))
    return folds


def bootstrap_interval(
    differences: Sequence[float],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    level: float = BOOTSTRAP_LEVEL,
) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of per-query ``differences``.

    Queries are resampled with replacement (``resamples`` times, seeded, so a report is
    reproducible); the interval says how far the set's margin could move with another
    draw of queries of the same kind, the only uncertainty a fixed set leaves.
    """
    if not differences:
        msg = "a bootstrap interval needs at least one query"
        raise ValueError(msg)
    values = np.asarray(differences, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), size=(resamples, len(values)))].mean(axis=1)
    tail = (1.0 - level) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def design_replay(
    design: FusionDefault,
    settings: SearchSettings,
    *,
    memo: dict[tuple[Any, ...], list[str]] | None = None,
) -> Replay:
    """A replay that fuses as ``design`` (method, weights and ``k`` set, as a request's
    ``fusion``, ``weights`` and ``rrf_k`` would; what ``adaptive`` reads of the query
    as the design says, whatever the settings)."""
    return Replay(
        settings=settings.model_copy(update={"keyword_coverage": None, "length_words": None}),
        encoder=design,
        fusion=design.method.value,
        weights={leg.value: w for leg, w in design.weights},
        k=design.k,
        memo=memo,
    )


def covered(queries: Iterable[QueryLegs]) -> bool:
    """Whether the file records the keyword leg's coverage (files recorded before the
    field do not) and the service read some (an encoder whose method reads none, as
    ``sum``, records none: its designs that read it would be the others)."""
    found = [q for q in queries if q.legs.get("sparse")]
    return all(q.coverage_recorded for q in found) and any(
        q.keyword_coverage is not None for q in found
    )


def _by_set(queries: Iterable[QueryLegs]) -> dict[str, list[QueryLegs]]:
    by_set: dict[str, list[QueryLegs]] = {}
    for q in queries:
        by_set.setdefault(q.dataset, []).append(q)
    return by_set


def _per_query(
    queries: Sequence[QueryLegs], replay: Replay, best_leg: str
) -> tuple[list[float], list[float]]:
    """Per query of one set: hybrid nDCG@10 under ``replay``, and the nDCG@10 of the set's
    better leg (``best_leg``, ``dense`` or ``sparse``, the leg with the better mean)."""
    leg_mode = "semantic" if best_leg == "dense" else "keyword"
    hybrid = [evaluate_ranking(replay.rank(q, "hybrid"), q.qrels)["ndcg@10"] for q in queries]
    best = [evaluate_ranking(replay.rank(q, leg_mode), q.qrels)["ndcg@10"] for q in queries]
    return hybrid, best


def per_query_margins(
    queries: Sequence[QueryLegs], design: FusionDefault, best_leg: str, settings: SearchSettings
) -> list[float]:
    """Per query of one set: hybrid nDCG@10 under ``design`` minus the set's better leg's
    (``best_leg``, ``dense`` or ``sparse``, the leg with the better mean on the set)."""
    hybrid, best = _per_query(queries, design_replay(design, settings), best_leg)
    return [h - b for h, b in zip(hybrid, best, strict=True)]


def with_intervals(
    queries: Sequence[QueryLegs], table: Table, folds: Sequence[Fold], settings: SearchSettings
) -> list[Fold]:
    """``folds`` with the bootstrap interval of each left-out set's margin."""
    by_set = _by_set(queries)
    return [
        Fold(
            f.dataset,
            f.choice,
            f.hybrid,
            f.legs,
            bootstrap_interval(
                per_query_margins(
                    by_set[f.dataset], f.choice.design, table.legs[f.dataset].best_leg, settings
                )
            ),
        )
        for f in folds
    ]


@dataclass(frozen=True)
class DefaultRow:
    """One set under the recording encoder's current default (the service's fusion)."""

    dataset: str
    design: str
    hybrid: float
    legs: Legs
    interval: tuple[float, float]

    @property
    def margin(self) -> float:
        return self.hybrid - self.legs.best


def current_default(
    queries: Sequence[QueryLegs], table: Table, settings: SearchSettings
) -> list[DefaultRow]:
    """Per set: the default the service runs today (no override, as a search that names
    no fusion), its nDCG@10, margin over the better leg and the margin's interval."""
    replay = Replay(settings=settings)
    rows = []
    for name, items in _by_set(queries).items():
        hybrid, best = _per_query(items, replay, table.legs[name].best_leg)
        rows.append(
            DefaultRow(
                name,
                replay.resolved(items[0]).describe(),
                math.fsum(hybrid) / len(hybrid),
                table.legs[name],
                bootstrap_interval([h - b for h, b in zip(hybrid, best, strict=True)]),
            )
        )
    return rows


# -- output -----------------------------------------------------------------------------


def report(table: Table, folds: Sequence[Fold], chosen: Choice) -> dict[str, Any]:
    """Everything as one JSON-ready object."""
    names = list(table.legs)
    return {
        "objective": "max worst training margin; then mean within "
        f"{TOLERANCE}; then the simplest method within {TOLERANCE}",
        "folds": [
            {
                "dataset": f.dataset,
                "queries": f.legs.queries,
                "design": f.choice.design.describe(),
                "training_worst_margin": f.choice.worst,
                "training_mean_margin": f.choice.mean,
                "hybrid": f.hybrid,
                "dense": f.legs.dense,
                "sparse": f.legs.sparse,
                "best_leg": f.legs.best_leg,
                "margin": f.margin,
                "margin_interval": list(f.interval) if f.interval is not None else None,
                "pass": f.passed,
            }
            for f in folds
        ],
        "default": {
            "design": chosen.design.describe(),
            "method": chosen.design.method.value,
            "weights": {leg.value: w for leg, w in chosen.design.weights},
            "k": chosen.design.k,
            "keyword_coverage": chosen.design.keyword_coverage,
            "length_words": chosen.design.length_words,
            "worst_margin": chosen.worst,
            "mean_margin": chosen.mean,
            "tied": chosen.tied,
            "margins": table.margins(chosen.design, names),
        },
        "designs": [
            {"design": d.describe(), "hybrid": scores, "margins": table.margins(d, names)}
            for d, scores in table.hybrid.items()
        ],
    }


def _interval(fold: Fold) -> str:
    if fold.interval is None:
        return "-"
    low, high = fold.interval
    return f"[{low:+.4f}, {high:+.4f}]"


def render(table: Table, folds: Sequence[Fold], chosen: Choice, out: TextIO, top: int) -> None:
    names = list(table.legs)
    print(
        "Leave one dataset out: the design chosen on the other sets, scored on this one "
        "(nDCG@10)\n",
        file=out,
    )
    print(
        f"{'left out':<24}{'chosen on the others':<40}{'hybrid':>8}{'dense':>8}{'sparse':>8}"
        f"{'margin':>10}{'95% interval':>20}  pass",
        file=out,
    )
    for f in folds:
        print(
            f"{f.dataset:<24}{f.choice.design.describe():<40}{f.hybrid:>8.4f}"
            f"{f.legs.dense:>8.4f}{f.legs.sparse:>8.4f}{f.margin:>+10.5f}{_interval(f):>20}  "
            f"{'yes' if f.passed else 'NO'} ({f.legs.best_leg})",
            file=out,
        )
    print(
        f"\nChosen on all {len(names)} sets (the candidate default): "
        f"{chosen.design.describe()} (worst margin {chosen.worst:+.5f}, mean "
        f"{chosen.mean:+.5f}; {chosen.tied} design(s) within {TOLERANCE})",
        file=out,
    )
    for name, m in table.margins(chosen.design, names).items():
        print(f"  {name:<24}{table.hybrid[chosen.design][name]:>8.4f}{m:>+10.5f}", file=out)
    ranked = sorted(
        table.hybrid,
        key=lambda d: (-min(table.margins(d, names).values()), d.describe()),
    )
    print(f"\nThe {top} designs with the best worst margin on all sets:", file=out)
    print(f"{'design':<40}" + "".join(f"{n[:14]:>15}" for n in names), file=out)
    for d in ranked[:top]:
        cells = "".join(f"{m:>+15.5f}" for m in table.margins(d, names).values())
        print(f"{d.describe():<40}{cells}", file=out)


NOTABLE = (
    FusionDefault.of(
        FusionMethod.ADAPTIVE, _weights(0.7, 0.3), 20, keyword_coverage=True, length_words=24
    ),
    FusionDefault.of(FusionMethod.ADAPTIVE, _weights(0.9, 0.1), 100),
    FusionDefault.of(FusionMethod.ADAPTIVE, _weights(0.7, 0.3), 20),
    FusionDefault.of(FusionMethod.ADAPTIVE, _weights(0.95, 0.05), 60),
    FusionDefault.of(FusionMethod.RRF, _weights(0.7, 0.3), 60),
    FusionDefault.of(FusionMethod.RRF, _weights(0.5, 0.5), 60),
    FusionDefault.of(FusionMethod.SCORE, _weights(0.5, 0.5)),
    FusionDefault.of(FusionMethod.SUM, _weights(1.0, 0.3)),
)
"""Designs the Markdown report always compares with the choice: earlier offline
defaults (prior 0.7/0.3 with ``k`` 20 reading the coverage and the length, ``L0`` 24, for
part of 2026-11-29, replayed with the coverage as the fusion reads it today; prior 0.9/0.1
with ``k`` 100, until then; prior 0.95/0.05 with ``k`` 60),
the choice's prior and ``k`` reading nothing of the query, weighted and unweighted RRF,
min-max at equal weights, BGE-M3's rule."""


def _agreement(defaults: Sequence[DefaultRow], chosen: Choice) -> str:
    """Whether the default the service runs is the rule's choice (empty without one)."""
    if not defaults:
        return ""
    if defaults[0].design == chosen.design.describe():
        return " The default is the rule's choice."
    return f" **The default (`{defaults[0].design}`) is not the rule's choice.**"


def render_markdown(
    table: Table,
    folds: Sequence[Fold],
    chosen: Choice,
    out: TextIO,
    defaults: Sequence[DefaultRow] = (),
) -> None:
    """The tables of docs/fusion.md."""
    names = list(table.legs)
    if defaults:
        print(
            f"The default today (`{defaults[0].design}`) on each set:\n\n"
            "| set | queries | dense | sparse | default | margin | 95% interval | pass |\n"
            "| --- | ---: | ---: | ---: | ---: | ---: | :---: | :---: |",
            file=out,
        )
        for row in defaults:
            leg = {"dense": row.legs.dense, "sparse": row.legs.sparse}
            cells = " | ".join(
                f"**{v:.4f}**" if n == row.legs.best_leg else f"{v:.4f}" for n, v in leg.items()
            )
            low, high = row.interval
            print(
                f"| {row.dataset} | {row.legs.queries} | {cells} | {row.hybrid:.4f} | "
                f"{row.margin:+.5f} | [{low:+.4f}, {high:+.4f}] | "
                f"{'✓' if row.margin >= -TOLERANCE else '✗'} |",
                file=out,
            )
        print(file=out)
    print(
        "| left out | queries | chosen on the other sets | hybrid | dense | sparse | margin "
        "| 95% interval | pass |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | :---: | :---: |",
        file=out,
    )
    for f in folds:
        leg = {"dense": f.legs.dense, "sparse": f.legs.sparse}
        cells = " | ".join(
            f"**{v:.4f}**" if name == f.legs.best_leg else f"{v:.4f}" for name, v in leg.items()
        )
        print(
            f"| {f.dataset} | {f.legs.queries} | `{f.choice.design.describe()}` | "
            f"{f.hybrid:.4f} | {cells} | {f.margin:+.5f} | {_interval(f)} | "
            f"{'✓' if f.passed else '✗'} |",
            file=out,
        )
    print(
        f"\nChosen on all {len(names)} sets: `{chosen.design.describe()}` (worst margin "
        f"{chosen.worst:+.5f}, mean {chosen.mean:+.5f}; {chosen.tied} design(s) within "
        f"{TOLERANCE}).{_agreement(defaults, chosen)}\n",
        file=out,
    )
    designs = [chosen.design, *(d for d in NOTABLE if d != chosen.design and d in table.hybrid)]
    print("| design | " + " | ".join(names) + " | worst |", file=out)
    print("| --- |" + " ---: |" * (len(names) + 1), file=out)
    for d in designs:
        m = table.margins(d, names)
        label = f"**`{d.describe()}`**" if d == chosen.design else f"`{d.describe()}`"
        print(
            f"| {label} | "
            + " | ".join(f"{table.hybrid[d][n]:.4f} ({v:+.4f})" for n, v in m.items())
            + f" | {min(m.values()):+.4f} |",
            file=out,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fusion_lodo",
        description="Choose a fusion default by leave-one-dataset-out on recorded legs "
        "(bench.relevance --save-legs) and report how each choice scores on the set "
        "left out.",
    )
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="one JSON object with everything")
    output.add_argument("--markdown", action="store_true", help="the tables of docs/fusion.md")
    parser.add_argument(
        "--top", type=int, default=15, metavar="N", help="designs listed after the tables"
    )
    parser.add_argument(
        "--dataset", action="append", metavar="NAME",
        help="only this dataset of the file (repeatable; default: every one)",
    )  # fmt: skip
    parser.add_argument(
        "--jobs", type=int, default=1, metavar="N",
        help="processes measuring designs in parallel (default 1)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    if not args.legs.is_file():
        parser.error(f"{args.legs}: no such file")
    queries = list(read_legs(args.legs))
    if args.dataset:
        unknown = set(args.dataset) - {q.dataset for q in queries}
        if unknown:
            parser.error(f"--dataset: not in {args.legs}: {', '.join(sorted(unknown))}")
        queries = [q for q in queries if q.dataset in args.dataset]
    if len({q.dataset for q in queries}) < 2:
        parser.error(f"{args.legs}: leave-one-dataset-out needs at least 2 datasets")
    settings = Settings(_env_file=None).search
    designs = default_grid()
    if not covered(queries):
        designs = [d for d in designs if not d.keyword_coverage]
        print(
            f"[lodo] {args.legs} holds no keyword coverage the service read: the designs "
            "that read it are left out (record the legs again, with adaptive fusion)",
            file=sys.stderr,
        )
    started = time.perf_counter()
    table = measure(
        queries,
        designs,
        settings,
        jobs=args.jobs,
        progress=None if args.quiet else sys.stderr,
    )
    if not args.quiet:
        print(
            f"[lodo] {len(table.hybrid)} designs x {len(queries)} queries in "
            f"{time.perf_counter() - started:.0f} s",
            file=sys.stderr,
        )
    folds = with_intervals(queries, table, leave_one_out(table), settings)
    chosen = select(table, list(table.legs))
    if args.json:
        print(json.dumps(report(table, folds, chosen), ensure_ascii=False))
    elif args.markdown:
        today = Replay(settings=settings).resolved(queries[0])
        readable = covered(queries) or not today.keyword_coverage
        if not readable:
            print(
                f"[lodo] the default ({today.describe()}) reads the keyword coverage, which "
                f"{args.legs} was recorded without: its table is left out",
                file=sys.stderr,
            )
        defaults = current_default(queries, table, settings) if readable else []
        render_markdown(table, folds, chosen, sys.stdout, defaults)
    else:
        render(table, folds, chosen, sys.stdout, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
