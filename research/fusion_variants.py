"""Alternative designs of adaptive fusion, replayed on recorded legs.

The research behind the designs table of ``docs/research/fusion-history.md``. Every
design reads each leg's scores through the same noise model (the product's
:func:`~hsearch.search.fusion.noise_confidence` ``c``, evidence ``e = max(0, 2c - 1)``,
``E = max(e)``, and :func:`~hsearch.search.fusion.signal_posterior` ``p``) and splits
the fused mass between two regimes: a *standout* share read through ``p`` and a
*plain* share (no standout) read either through ``p`` too ("posterior-only", the
previous default) or through the legs' reciprocal ranks ``1 / (k + rank)`` normalised
("ranks", the product). A weight rule decides the shares from the configured prior
``w`` and ``c``. ``default`` is the product and reproduces ``python -m
bench.fusion_replay`` exactly (a unit test checks it against ``fuse``); the others are
not in the product.

Usage (from the repository root)::

    python -m bench.relevance --all --modes semantic,keyword --save-legs legs.jsonl
    python -m research.fusion_variants legs.jsonl            # every design
    python -m research.fusion_variants legs.jsonl --design default --design posterior-only

The coverage rule, the prior and ``k`` come from the configured settings
(``HSEARCH_SEARCH__*``), as in the service. Prints, per design, hybrid's nDCG@10
margin over the better single leg on every dataset and, for datasets whose query ids
carry a prefix (``en:``, ``de:``...), the prefixes where hybrid is below the better leg.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.fusion_replay import QueryLegs, Replay, evaluate, read_legs, scores_alone

from hsearch.config import SearchSettings, Settings
from hsearch.search.fusion import LegHit, noise_confidence, signal_posterior

Shares = tuple[dict[str, float], dict[str, float]]
"""(plain share, standout share) per active leg; together they sum to 1."""

WeightRule = Callable[[Mapping[str, float], Mapping[str, float]], Shares]
"""(prior normalised over the active legs, confidence c per active leg) -> shares."""


def _evidence(confidence: Mapping[str, float]) -> dict[str, float]:
    return {leg: max(0.0, 2.0 * c - 1.0) for leg, c in confidence.items()}


def _split(
    keep: float, prior: Mapping[str, float], standout_weights: Mapping[str, float]
) -> Shares:
    """``keep * prior`` as the plain share, ``(1 - keep)`` spread by ``standout_weights``."""
    total = math.fsum(standout_weights.values())
    plain = {leg: keep * prior[leg] for leg in prior}
    standout = {
        leg: (1 - keep) * standout_weights[leg] / total if total > 0 else 0.0 for leg in prior
    }
    return plain, standout


def prior_times_evidence(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """The product: plain ``(1 - E) w``, standout ``E we / sum(we)``.

    Written term for term as :mod:`hsearch.search.fusion` computes it, so that the two
    agree to the last bit (the unit test compares orders, ties included)."""
    e = _evidence(confidence)
    strongest = max(e.values())
    support = math.fsum(prior[leg] * e[leg] for leg in sorted(prior))
    plain = {leg: (1.0 - strongest) * prior[leg] for leg in prior}
    standout = {
        leg: strongest * prior[leg] * e[leg] / support if support > 0 else 0.0 for leg in prior
    }
    return plain, standout


def evidence_share(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """Plain ``(1 - E) w``, standout ``E e / sum(e)`` (the prior has no say there)."""
    e = _evidence(confidence)
    return _split(1 - max(e.values()), prior, e)


def independent_indicators(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """Each leg's standout is real with probability ``e``, independently; the legs whose
    standout is real share the standout mass by prior, and when none is, all legs share
    the plain mass by prior."""
    e = _evidence(confidence)
    legs = sorted(prior)
    plain, standout = dict.fromkeys(legs, 0.0), dict.fromkeys(legs, 0.0)
    for real in itertools.product((False, True), repeat=len(legs)):
        p = math.prod(e[leg] if r else 1 - e[leg] for leg, r in zip(legs, real, strict=True))
        trusted = [leg for leg, r in zip(legs, real, strict=True) if r]
        share = standout if trusted else plain
        total = math.fsum(prior[leg] for leg in trusted or legs)
        for leg in trusted or legs:
            share[leg] += p * prior[leg] / total
    return plain, standout


def prior_share_squared(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """The plain share shrinks as ``(1 - E)^2``; the rest by prior x evidence."""
    e = _evidence(confidence)
    return _split((1 - max(e.values())) ** 2, prior, {leg: prior[leg] * e[leg] for leg in prior})


def winner_take_all(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """Once any leg has evidence, the legs without any take no part (discontinuous)."""
    e = _evidence(confidence)
    if max(e.values()) == 0:
        return dict(prior), dict.fromkeys(prior, 0.0)
    kept = {leg: prior[leg] if e[leg] > 0 else 0.0 for leg in prior}
    total = math.fsum(kept.values())
    return evidence_share({leg: w / total for leg, w in kept.items()}, confidence)


def prior_times_confidence(prior: Mapping[str, float], confidence: Mapping[str, float]) -> Shares:
    """The plain share reweighs the prior by each leg's confidence ``c``."""
    total = math.fsum(prior[leg] * confidence[leg] for leg in prior)
    updated = {leg: prior[leg] * confidence[leg] / total for leg in prior} if total > 0 else prior
    return evidence_share(updated, confidence)


@dataclass(frozen=True)
class Design:
    """A weight rule and how the plain (no-standout) share reads a leg."""

    rule: WeightRule
    plain_reads_ranks: bool


DESIGNS: dict[str, Design] = {
    "default": Design(prior_times_evidence, plain_reads_ranks=True),
    "ranks, evidence-share": Design(evidence_share, plain_reads_ranks=True),
    "posterior-only": Design(evidence_share, plain_reads_ranks=False),
    "posterior-only, prior-x-evidence": Design(prior_times_evidence, plain_reads_ranks=False),
    "posterior-only, independent-indicators": Design(
        independent_indicators, plain_reads_ranks=False
    ),
    "posterior-only, prior-share-squared": Design(prior_share_squared, plain_reads_ranks=False),
    "posterior-only, winner-take-all": Design(winner_take_all, plain_reads_ranks=False),
    "posterior-only, prior-x-confidence": Design(prior_times_confidence, plain_reads_ranks=False),
}


def rank_distribution(scores: Sequence[float], k: int) -> list[float]:
    """``1 / (k + rank)`` normalised; rank = 1 + the number of strictly higher scores."""
    ascending = sorted(scores)
    raw = [1.0 / (k + 1 + len(ascending) - bisect.bisect_right(ascending, s)) for s in scores]
    total = math.fsum(raw)
    return [r / total for r in raw]


def fuse_with(
    design: Design, legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float], k: int
) -> list[str]:
    """Ids in fused order, ties by id.

    Legs and weights as :func:`hsearch.search.fusion.fuse` takes them: the active legs
    (positive weight, at least one hit) share the normalised prior; duplicate ids within
    a leg keep their first occurrence.
    """
    active: dict[str, list[LegHit]] = {}
    for leg, rows in legs.items():
        if weights.get(leg, 0.0) > 0 and rows:
            first: dict[str, LegHit] = {}
            for hit in rows:
                first.setdefault(hit.id, hit)
            active[leg] = list(first.values())
    if not active:
        return []
    total = math.fsum(weights[leg] for leg in active)
    prior = {leg: weights[leg] / total for leg in active}
    confidence = {leg: noise_confidence([h.score for h in rows]) for leg, rows in active.items()}
    plain, standout = design.rule(prior, confidence)
    terms: dict[str, list[float]] = {}
    for leg, rows in sorted(active.items()):
        values = [h.score for h in rows]
        posterior = signal_posterior(values)
        reading = rank_distribution(values, k) if design.plain_reads_ranks else posterior
        for hit, p, r in zip(rows, posterior, reading, strict=True):
            terms.setdefault(hit.id, []).extend((plain[leg] * r, standout[leg] * p))
    scores = {doc: math.fsum(parts) for doc, parts in terms.items()}
    return sorted(scores, key=lambda doc: (-scores[doc], doc))


def margins(
    queries: Sequence[QueryLegs], design: Design, settings: SearchSettings
) -> dict[str, float]:
    """Hybrid nDCG@10 minus the better single leg's, per dataset and per ``dataset/prefix``.

    Scored by the replay (:func:`bench.fusion_replay.evaluate`) with ``design`` as its
    fuser, so queries, weights and metrics are the benchmark's.
    """

    def fuser(
        legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float], k: int
    ) -> list[str]:
        return fuse_with(design, legs, weights, k)

    replay = Replay(settings=settings, fusion="adaptive", fuser=fuser)
    result: dict[str, float] = {}
    for r in evaluate(queries, replay, by_prefix=True):
        groups = r["by_prefix"] if len(r["by_prefix"]) > 1 else {}
        for key, modes in [(r["dataset"], r["modes"])] + [
            (f"{r['dataset']}/{prefix}", g["modes"]) for prefix, g in groups.items()
        ]:
            ndcg = {mode: m["ndcg@10"] for mode, m in modes.items()}
            result[key] = ndcg["hybrid"] - max(ndcg["semantic"], ndcg["keyword"])
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m research.fusion_variants", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file of bench.relevance")
    parser.add_argument(
        "--design", action="append", choices=list(DESIGNS), help="repeatable (default: all)"
    )
    parser.add_argument("--markdown", action="store_true", help="one Markdown table")
    options = parser.parse_args(argv)
    queries = list(read_legs(options.legs))
    settings = scores_alone(Settings().search)
    for n, name in enumerate(options.design or list(DESIGNS)):
        result = margins(queries, DESIGNS[name], settings)
        sets = {k: v for k, v in result.items() if "/" not in k}
        below = [f"{k.split('/', 1)[1]} {v:+.3f}" for k, v in result.items() if "/" in k and v < 0]
        if not options.markdown:
            cells = "  ".join(f"{k} {v:+.5f}" for k, v in sets.items())
            print(f"{name:<40} {cells}  | prefixes below: {len(below)} {', '.join(below)}")
            continue
        if n == 0:
            print("| design | " + " | ".join(sets) + " | prefixes below the better leg |")
            print("| --- | " + " | ".join("---:" for _ in sets) + " | --- |")
        cells = " | ".join(f"{v:+.5f}" for v in sets.values())
        print(f"| {name} | {cells} | {', '.join(below) or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
