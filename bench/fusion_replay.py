"""Replay hybrid fusion on recorded candidate lists: seconds instead of a full benchmark.

``python -m bench.relevance --save-legs legs.jsonl`` records, for every query, the
dense and sparse candidate lists the product's own legs returned (chunk id, corpus id,
raw score). This tool fuses them again with the product's code, the weight rule of
:mod:`hsearch.search.ranking` (``leg_weights`` with ``dense_cannot_read``: what
``query_weights`` and the service apply) and :func:`hsearch.search.fusion.fuse`, and
scores the result like the benchmark does. Fusion methods and weights can then be
compared on identical candidates, and the recorded file makes ``docs/fusion.md``'s
measurements reproducible.

Usage (from the repository root)::

    python -m bench.relevance --all --modes semantic,keyword --save-legs legs.jsonl
    python -m bench.fusion_replay legs.jsonl                       # the default
    python -m bench.fusion_replay legs.jsonl --fusion rrf --weights dense=0.5,sparse=0.5
    python -m bench.fusion_replay legs.jsonl --fusion rrf --k 20
    python -m bench.fusion_replay legs.jsonl --by-prefix --json

The default is resolved as in the service
(:meth:`hsearch.config.SearchSettings.resolve_fusion`): the recording encoder's fusion
default (``EncoderInfo.fusion``; the file names the encoder, older files are the
offline encoder's), overridden by ``HSEARCH_SEARCH__*`` environment variables, then by
the options here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

from bench.metrics import evaluate_ranking
from bench.report import TOP_K, ModeRun, hybrid_check, per_query_comparison, summarise
from hsearch.config import EncoderKind, SearchSettings, Settings
from hsearch.embedding.factory import ENCODER_FUSION
from hsearch.lexical.syntax import parse_query
from hsearch.search.fusion import (
    NO_READING,
    LegHit,
    QueryReading,
    fuse_explained,
    query_word_count,
)
from hsearch.search.ranking import dense_cannot_read, leg_weights, query_reading
from hsearch.types import MAX_RRF_K, MIN_RRF_K, MODE_LEGS, FusionDefault, FusionMethod

LEGS_OF_MODE = {mode.value: tuple(leg.value for leg in legs) for mode, legs in MODE_LEGS.items()}


RECORDED_BEFORE_ENCODER = EncoderKind.OFFLINE
"""The encoder of a legs file that does not name one: files recorded before the field
existed came from the benchmark's default encoder."""


@dataclass(frozen=True)
class QueryLegs:
    """One recorded query: its text, judgements and each leg's candidates in leg order."""

    dataset: str
    query_id: str
    query: str
    qrels: dict[str, float]
    legs: dict[str, list[tuple[str, str, float]]]  # leg -> [(chunk id, corpus id, score)]
    dense_scripts: frozenset[str] | None  # the encoder's (EncoderInfo.dense_scripts)
    encoder: EncoderKind = RECORDED_BEFORE_ENCODER  # the encoder that recorded the legs
    keyword_coverage: float | None = None
    """The keyword leg's first candidate's coverage of the query, as the service read it
    (``SearchResult.keyword_coverage``); ``None`` where it read none."""
    coverage_recorded: bool = False
    """The file records the coverage (files older than the field do not)."""

    @cached_property
    def words(self) -> int:
        """The query's words as the planner counts them (the text without its syntax)."""
        return query_word_count(parse_query(self.query).text)

    @cached_property
    def hits(self) -> dict[str, list[LegHit]]:
        """Each leg's candidates as :func:`fuse` takes them (built once per query)."""
        return {
            leg: [LegHit(chunk, score) for chunk, _, score in rows]
            for leg, rows in self.legs.items()
        }

    @cached_property
    def corpus_ids(self) -> dict[str, str]:
        """Chunk id -> corpus id over every leg."""
        return {chunk: doc for rows in self.legs.values() for chunk, doc, _ in rows}


Fuser = Callable[[Mapping[str, Sequence[LegHit]], Mapping[str, float], int], list[str]]
"""(legs, weights, k) -> ids in fused order: a fusion other than the product's."""


@dataclass
class Replay:
    """What to fuse with: the search settings' resolution of the encoder's default
    (:meth:`SearchSettings.resolve_fusion`), optionally overridden.

    ``encoder`` replaces the recording encoder's fusion default; ``fusion``, ``weights``
    and ``k`` override the resolved method, weights and ``k`` as a request's
    ``fusion``, ``weights`` and ``rrf_k`` do. ``fuser`` replaces the product's
    :func:`fuse` for two-leg modes (designs that are not the product's, measured on the
    same legs); the weight rule stays the service's (:func:`leg_weights` with
    :func:`dense_cannot_read`, which :func:`query_weights` combines).

    ``memo``, a dict shared by several replays of the same queries, keeps each fused
    ranking under what :func:`fuse` depends on, so a design that fuses a query exactly
    as an earlier one did (e.g. one leg silenced by the coverage rule) is not fused
    again; ``fuse_ms_mean`` then counts only the queries fused.
    """

    settings: SearchSettings
    fusion: str | None = None
    weights: dict[str, float] | None = None
    k: int | None = None
    encoder: FusionDefault | None = None
    fuser: Fuser | None = None
    memo: dict[tuple[Any, ...], list[str]] | None = None
    fuse_seconds: float = 0.0  # time spent in fuse() for queries with two legs
    fused_queries: int = 0
    _resolved: dict[EncoderKind, FusionDefault] = field(default_factory=dict, repr=False)
    _unreadable: dict[tuple[str, str], bool] = field(default_factory=dict, repr=False)

    def resolved(self, q: QueryLegs) -> FusionDefault:
        """The fusion ``q`` is replayed with: method, weights and ``k`` after every
        override (as a search with the same request fields would run)."""
        if q.encoder not in self._resolved:
            encoder = self.encoder or ENCODER_FUSION[q.encoder]
            base = self.settings.resolve_fusion(encoder, self.fusion)
            self._resolved[q.encoder] = FusionDefault.of(
                base.method,
                self.weights or base.leg_weights(),
                self.k or base.k,
                keyword_coverage=base.keyword_coverage,
                length_words=base.length_words,
            )
        return self._resolved[q.encoder]

    def rank(self, q: QueryLegs, mode: str) -> list[str]:
        """Corpus ids of the first TOP_K hits ``mode`` returns for ``q``."""
        legs = {leg: q.hits[leg] for leg in LEGS_OF_MODE[mode] if q.hits.get(leg)}
        if not legs:
            return []
        fusion = self.resolved(q)
        weights = leg_weights(
            legs,
            configured={leg.value: w for leg, w in fusion.weights},
            dense_unreadable=self._dense_unreadable(q),
        )
        key: tuple[Any, ...] | None = None
        if self.memo is not None and self.fuser is None:
            # What fuse() depends on: the legs, the method, k and the weights normalised
            # over the active legs (a design that differs only in the weight of a leg
            # the coverage rule silenced fuses alike).
            active = {leg: w for leg, w in weights.items() if w > 0}
            total = math.fsum(active.values())
            shares = tuple(sorted((leg, w / total) for leg, w in active.items()))
            reads = (fusion.keyword_coverage, fusion.length_words)
            key = (q.dataset, q.query_id, mode, fusion.method, fusion.k, shares, reads)
            if key in self.memo:
                return self.memo[key]
        started = time.perf_counter()
        if self.fuser is not None and len(legs) > 1:
            ids = self.fuser(legs, weights, fusion.k)
        else:
            fused, _ = fuse_explained(
                legs,
                method=fusion.method,
                weights=weights,
                k=fusion.k,
                reading=self.reading(q, fusion) if len(legs) > 1 else NO_READING,
            )
            ids = [hit.id for hit in fused]
        if len(legs) > 1:
            self.fuse_seconds += time.perf_counter() - started
            self.fused_queries += 1
        corpus_id = q.corpus_ids
        ranking = [corpus_id[doc] for doc in ids[:TOP_K]]
        if key is not None and self.memo is not None:
            self.memo[key] = ranking
        return ranking

    @staticmethod
    def reading(q: QueryLegs, fusion: FusionDefault) -> QueryReading:
        """What ``adaptive`` reads of ``q`` under ``fusion``, as the service's
        :meth:`~hsearch.search.ranking.RankingSpec.reading` gives it. A design that reads
        the keyword coverage of a query recorded without it (a file older than the
        field) cannot be replayed: :class:`ValueError`; one the service read none for (a
        failed read) replays without it, as the service fused it."""
        if fusion.keyword_coverage and not q.coverage_recorded and q.legs.get("sparse"):
            msg = (
                f"{fusion.describe()} reads the keyword coverage, which query "
                f"{q.query_id} of {q.dataset} was recorded without: record the legs again"
            )
            raise ValueError(msg)
        return query_reading(
            reads_coverage=fusion.keyword_coverage,
            keyword_coverage=q.keyword_coverage,
            words=q.words,
            length_words=fusion.length_words,
        )

    def _dense_unreadable(self, q: QueryLegs) -> bool:
        """:func:`dense_cannot_read` for ``q`` (the weight rule's input), once per query."""
        key = (q.dataset, q.query_id)
        if key not in self._unreadable:
            self._unreadable[key] = dense_cannot_read(
                q.query,
                dense_scripts=q.dense_scripts,
                min_dense_script_coverage=self.settings.min_dense_script_coverage,
            )
        return self._unreadable[key]


def scores_alone(settings: SearchSettings) -> SearchSettings:
    """``settings`` with ``adaptive`` reading nothing of the query (the legs' scores
    alone), whatever the encoder declares: for tools that study the scores."""
    return settings.model_copy(update={"keyword_coverage": False, "length_words": 0})


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
                encoder=EncoderKind(r.get("encoder") or RECORDED_BEFORE_ENCODER),
                keyword_coverage=r.get("keyword_coverage"),
                coverage_recorded="keyword_coverage" in r,
            )


def evaluate(
    queries: Sequence[QueryLegs],
    replay: Replay,
    *,
    by_prefix: bool = False,
    modes: Sequence[str] = tuple(LEGS_OF_MODE),
) -> list[dict[str, Any]]:
    """One result per dataset, in the shape ``bench.relevance --json`` prints.

    ``modes`` limits the work to some modes (``("hybrid",)`` to compare fusions whose
    single-leg modes are known): the check against the better leg then needs all three.
    """
    datasets: dict[str, list[QueryLegs]] = {}
    for q in queries:
        datasets.setdefault(q.dataset, []).append(q)
    results = []
    for name, items in datasets.items():
        seconds, fused = replay.fuse_seconds, replay.fused_queries
        per_mode = {
            mode: [evaluate_ranking(replay.rank(q, mode), q.qrels) for q in items] for mode in modes
        }
        summary, groups = summarise(
            {mode: ModeRun(per_query=rows) for mode, rows in per_mode.items()},
            [q.query_id for q in items],
        )
        fusion = replay.resolved(items[0])
        result: dict[str, Any] = {
            "dataset": name,
            "queries": len(items),
            "fusion": fusion.method.value,
            "fusion_setting": fusion.describe(),
            "modes": summary,
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
        "--fusion", choices=[m.value for m in FusionMethod],
        help="default: the encoder's, or HSEARCH_SEARCH__FUSION",
    )  # fmt: skip
    parser.add_argument(
        "--weights", type=_parse_weights, metavar="dense=W,sparse=W",
        help="leg weights (default: the resolved ones for the method)",
    )  # fmt: skip
    parser.add_argument(
        "--k", type=int, metavar="K",
        help=f"k of rrf and adaptive, {MIN_RRF_K}..{MAX_RRF_K} (default: the resolved one)",
    )  # fmt: skip
    parser.add_argument(
        "--encoder", choices=[k.value for k in ENCODER_FUSION],
        help="fuse with this encoder's default (default: the encoder the file names)",
    )  # fmt: skip
    parser.add_argument(
        "--by-prefix", action="store_true", help="also per query-id prefix (XQuAD languages)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per dataset")
    args = parser.parse_args(argv)
    if not args.legs.is_file():
        parser.error(f"{args.legs}: no such file")
    if args.k is not None and not MIN_RRF_K <= args.k <= MAX_RRF_K:
        parser.error(f"--k: must be between {MIN_RRF_K} and {MAX_RRF_K}")
    replay = Replay(
        settings=Settings(_env_file=None).search,
        fusion=args.fusion,
        weights=args.weights,
        k=args.k,
        encoder=None if args.encoder is None else ENCODER_FUSION[EncoderKind(args.encoder)],
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
