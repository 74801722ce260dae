"""Alternative per-query weight rules for adaptive fusion, replayed on recorded legs.

The research behind ``docs/fusion.md``'s "Weight rules that were measured" table: each
rule below maps the configured prior ``w`` (normalised over the active legs) and each
leg's :func:`~hsearch.search.fusion.noise_confidence` ``c`` (evidence ``e = max(0,
2c - 1)``, ``E = max(e)``) to per-query leg weights ``pi``; the fused score is the
product's mixture ``sum_leg pi_leg * signal_posterior_leg(d)``. ``default`` is the
product's rule (:func:`hsearch.search.fusion.adaptive_leg_weights`) and reproduces
``python -m bench.fusion_replay`` exactly; the others are not in the product.

Usage (from the repository root)::

    python -m bench.relevance --all --modes semantic,keyword --save-legs legs.jsonl
    python -m bench.fusion_variants legs.jsonl            # every rule
    python -m bench.fusion_variants legs.jsonl --rule default --rule winner-take-all

The coverage rule and the prior come from the configured settings
(``HSEARCH_SEARCH__*``), as in the service. Prints, per rule, hybrid's nDCG@10 margin
over the better single leg on every dataset and, for datasets whose query ids carry a
prefix (``en:``, ``de:``...), the prefixes where hybrid is below the better leg.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bench.fusion_replay import QueryLegs, read_legs
from bench.metrics import evaluate_ranking
from bench.relevance import TOP_K
from hsearch.config import SearchSettings, Settings
from hsearch.search.fusion import LegHit, noise_confidence, signal_posterior
from hsearch.search.service import query_weights

WeightRule = Callable[[Mapping[str, float], Mapping[str, float]], dict[str, float]]
"""(prior normalised over the active legs, confidence c per active leg) -> pi."""


def _evidence(confidence: Mapping[str, float]) -> dict[str, float]:
    return {leg: max(0.0, 2.0 * c - 1.0) for leg, c in confidence.items()}


def default_rule(prior: Mapping[str, float], confidence: Mapping[str, float]) -> dict[str, float]:
    """The product: ``pi = (1 - E) w + E e / sum(e)``."""
    e = _evidence(confidence)
    strongest, total = max(e.values()), math.fsum(e.values())
    return {
        leg: (1 - strongest) * prior[leg] + (strongest * e[leg] / total if total > 0 else 0.0)
        for leg in prior
    }


def prior_times_evidence(
    prior: Mapping[str, float], confidence: Mapping[str, float]
) -> dict[str, float]:
    """The evidence regime weighs legs by prior x evidence: ``(1 - E) w + E we / sum(we)``."""
    e = _evidence(confidence)
    strongest = max(e.values())
    total = math.fsum(prior[leg] * e[leg] for leg in prior)
    return {
        leg: (1 - strongest) * prior[leg]
        + (strongest * prior[leg] * e[leg] / total if total > 0 else 0.0)
        for leg in prior
    }


def independent_indicators(
    prior: Mapping[str, float], confidence: Mapping[str, float]
) -> dict[str, float]:
    """Each leg's standout is real with probability ``e``, independently; the legs whose
    standout is real share the weight by prior (all legs by prior when none is)."""
    e = _evidence(confidence)
    legs = sorted(prior)
    pi = dict.fromkeys(legs, 0.0)
    for real in itertools.product((False, True), repeat=len(legs)):
        p = math.prod(e[leg] if r else 1 - e[leg] for leg, r in zip(legs, real, strict=True))
        trusted = [leg for leg, r in zip(legs, real, strict=True) if r] or legs
        total = math.fsum(prior[leg] for leg in trusted)
        for leg in trusted:
            pi[leg] += p * prior[leg] / total
    return pi


def prior_share_squared(
    prior: Mapping[str, float], confidence: Mapping[str, float]
) -> dict[str, float]:
    """The prior regime's share shrinks as ``(1 - E)^2``; the rest by prior x evidence."""
    e = _evidence(confidence)
    keep = (1 - max(e.values())) ** 2
    total = math.fsum(prior[leg] * e[leg] for leg in prior)
    return {
        leg: keep * prior[leg] + ((1 - keep) * prior[leg] * e[leg] / total if total else 0.0)
        for leg in prior
    }


def winner_take_all(
    prior: Mapping[str, float], confidence: Mapping[str, float]
) -> dict[str, float]:
    """Once any leg has evidence, the legs without any take no part (discontinuous)."""
    e = _evidence(confidence)
    if max(e.values()) == 0:
        return dict(prior)
    kept = {leg: prior[leg] for leg in prior if e[leg] > 0}
    total = math.fsum(kept.values())
    return default_rule({leg: kept.get(leg, 0.0) / total for leg in prior}, confidence)


def prior_times_confidence(
    prior: Mapping[str, float], confidence: Mapping[str, float]
) -> dict[str, float]:
    """The prior regime reweighs the prior by each leg's confidence ``c``."""
    total = math.fsum(prior[leg] * confidence[leg] for leg in prior)
    updated = {leg: prior[leg] * confidence[leg] / total for leg in prior} if total > 0 else prior
    return default_rule(updated, confidence)


RULES: dict[str, WeightRule] = {
    "default": default_rule,
    "prior-x-evidence": prior_times_evidence,
    "independent-indicators": independent_indicators,
    "prior-share-squared": prior_share_squared,
    "winner-take-all": winner_take_all,
    "prior-x-confidence": prior_times_confidence,
}


def fuse_with(
    rule: WeightRule, legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float]
) -> list[str]:
    """Ids in fused order: ``sum_leg pi_leg * signal_posterior_leg``, ties by id.

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
    pi = rule(prior, confidence)
    terms: dict[str, list[float]] = {}
    for leg, rows in sorted(active.items()):
        posterior = signal_posterior([h.score for h in rows])
        for hit, p in zip(rows, posterior, strict=True):
            terms.setdefault(hit.id, []).append(pi[leg] * p)
    scores = {doc: math.fsum(parts) for doc, parts in terms.items()}
    return sorted(scores, key=lambda doc: (-scores[doc], doc))


def margins(
    queries: Sequence[QueryLegs], rule: WeightRule, settings: SearchSettings
) -> dict[str, float]:
    """Hybrid nDCG@10 minus the better single leg's, per dataset and per ``dataset/prefix``."""
    s = settings
    sums: dict[str, list[float]] = {}  # key -> [queries, dense, sparse, hybrid]
    for q in queries:
        if not any(g > 0 for g in q.qrels.values()):
            continue  # as the benchmark: queries without a positive are skipped
        legs = {leg: [LegHit(c, sc) for c, _, sc in rows] for leg, rows in q.legs.items() if rows}
        corpus = {c: d for rows in q.legs.values() for c, d, _ in rows}

        def ndcg(ids: Sequence[str], q: QueryLegs = q, corpus: dict[str, str] = corpus) -> float:
            return evaluate_ranking([corpus[i] for i in ids[:TOP_K]], q.qrels)["ndcg@10"]

        row = [
            1.0,
            ndcg([c for c, _, _ in q.legs.get("dense", [])]),
            ndcg([c for c, _, _ in q.legs.get("sparse", [])]),
            0.0,
        ]
        if legs:
            weights = query_weights(
                q.query,
                legs,
                configured=s.default_weights("adaptive"),
                dense_scripts=q.dense_scripts,
                min_dense_script_coverage=s.min_dense_script_coverage,
            )
            row[3] = ndcg(fuse_with(rule, legs, weights))
        keys = [q.dataset]
        if ":" in q.query_id:
            keys.append(f"{q.dataset}/{q.query_id.split(':', 1)[0]}")
        for key in keys:
            acc = sums.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            for i, value in enumerate(row):
                acc[i] += value
    return {key: (h - max(d, sp)) / n for key, (n, d, sp, h) in sums.items()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.fusion_variants", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file of bench.relevance")
    parser.add_argument(
        "--rule", action="append", choices=sorted(RULES), help="repeatable (default: all)"
    )
    options = parser.parse_args(argv)
    queries = list(read_legs(options.legs))
    settings = Settings().search
    for name in options.rule or list(RULES):
        result = margins(queries, RULES[name], settings)
        sets = {k: v for k, v in result.items() if "/" not in k}
        below = [f"{k.split('/', 1)[1]} {v:+.3f}" for k, v in result.items() if "/" in k and v < 0]
        cells = "  ".join(f"{k} {v:+.5f}" for k, v in sets.items())
        print(f"{name:<24} {cells}  | prefixes below: {len(below)} {', '.join(below)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
