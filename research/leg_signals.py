"""Does anything the legs return tell, query by query, how much weight the keyword leg
should carry when nothing stands out?

``adaptive`` fusion reads the legs by their ranks, weighted by the prior, when no leg's
first candidate stands out (:func:`hsearch.search.fusion.leg_evidence` near 0 in every
leg). There the prior is the whole difference between designs, and the sets disagree on
it: DBpedia's natural-language questions, whose keyword leg finds nothing judged, want
the dense leg followed (prior 0.95); ADI, CF, CISI, Cranfield, LISA and XQuAD gain from
a lighter prior (0.8). A general signal, read from the query and the legs (item 2 of the
fusion issue), could move the prior query by query, if it told the two kinds apart
*within* sets: a signal that only differs between sets stands in for the set's identity.

For every query in that regime this tool replays ``adaptive`` fusion at two priors
(``--priors LOW,HIGH``, ``k`` as the default's), takes the difference of nDCG@10
(``HIGH - LOW``: positive where following the dense leg pays), and reports, per set,
the Pearson correlation of that difference with each signal:

* ``cov1``, ``cov3``: the share of the query's IDF mass held by the keyword leg's first
  candidate, and the mean over its first three (does the keyword leg match the whole
  query, or a part of it?). The mass is over the query's words (stop words left out),
  each weighing the IDF of its rarest form some document holds, or, if no document
  holds it, the IDF of a term in no document: a word the corpus lacks counts against
  every candidate;
* ``dcov1``: the same for the dense leg's first candidate (does the semantic match also
  hold the query's words?);
* ``overlap10``: the share of the first ten candidates the legs have in common;
* ``ceiling``: the keyword leg's first score over ``(k1 + 1) x Σ idf`` of the query
  terms some document holds: the score of a document holding all of them at saturation;
* ``dense_top``: the dense leg's first score (a cosine);
* ``words``: the query's distinct words (CJK bigrams), stop words left out;
* ``nqc_sparse``, ``nqc_dense``: the standard deviation of a leg's first ten scores
  over its first (normalised query commitment, a classic predictor of a ranking's
  quality);
* ``gap_sparse``, ``gap_dense``: ``(first - tenth) / first``.

The signals were chosen before the correlations were read. Corpus statistics are per
document (the service's are per tenant and chunk): close enough to rank queries.

Usage (from the repository root)::

    python -m bench.relevance --all --max-queries 1000 --modes semantic,keyword \\
        --save-legs legs.jsonl
    python -m research.leg_signals legs.jsonl
    python -m research.leg_signals legs.jsonl --priors 0.8,0.95 --regime 0.1
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.datasets import DATASETS_ROOT, load_dataset
from bench.fusion_replay import QueryLegs, Replay, read_legs, scores_alone
from bench.metrics import evaluate_ranking

from hsearch.config import Settings
from hsearch.embedding.offline import OFFLINE_FUSION
from hsearch.lexical.analyzer import analyze, analyze_query, match_terms, tokens
from hsearch.lexical.bm25 import DEFAULT_K1, bm25_idf
from hsearch.search.fusion import leg_evidence
from hsearch.search.ranking import dense_cannot_read

SIGNALS = (
    "cov1",
    "cov3",
    "dcov1",
    "overlap10",
    "ceiling",
    "dense_top",
    "words",
    "nqc_sparse",
    "nqc_dense",
    "gap_sparse",
    "gap_dense",
)
CLEAR = 0.1
"""|r| below this counts as no correlation in the sign summary."""
NO_STANDOUT = 0.1
"""The default regime: queries whose strongest evidence is below this."""


@dataclass(frozen=True)
class Corpus:
    """A set's documents as term sets, and the document frequencies of the terms."""

    terms: Mapping[str, frozenset[str]]
    frequency: Mapping[str, int]

    @classmethod
    def of(cls, documents: Sequence[Mapping[str, str]]) -> Corpus:
        terms = {
            d["_id"]: frozenset(analyze(f"{d.get('title', '')} {d.get('text', '')}"))
            for d in documents
        }
        frequency: dict[str, int] = defaultdict(int)
        for held in terms.values():
            for t in held:
                frequency[t] += 1
        return cls(terms, dict(frequency))

    def idf(self, term: str) -> float:
        return bm25_idf(self.frequency.get(term, 0), document_count=len(self.terms))

    def query_words(self, query: str) -> list[frozenset[str]]:
        """The query's distinct words, each as the terms that match it (its stem and its
        unstemmed form; a CJK bigram alone), stop words left out."""
        words: dict[frozenset[str], None] = {}
        for token in tokens(query):
            if token.cjk:
                for bigram in analyze_query(token.text):
                    words[frozenset({bigram})] = None
            elif forms := match_terms(token.text):
                words[forms] = None
        return list(words)

    def weight(self, word: frozenset[str]) -> float:
        """A word's IDF: its rarest form some document holds, or, when none does, the IDF
        of a term no document holds (the word counts, and no candidate can hold it)."""
        held = [t for t in word if self.frequency.get(t, 0) > 0]
        return max(self.idf(t) for t in held or word)

    def first_coverage(
        self, words: Sequence[frozenset[str]], rows: Sequence[tuple[str, str, float]]
    ) -> float:
        """:meth:`coverage` of a leg's first candidate (``rows`` as recorded: chunk id,
        corpus id, score); 0 when the leg found nothing."""
        return self.coverage(words, rows[0][1]) if rows else 0.0

    def coverage(self, words: Sequence[frozenset[str]], document: str) -> float:
        """The share of ``words``' IDF mass ``document`` holds (0 without words)."""
        mass = math.fsum(self.weight(w) for w in words)
        if mass <= 0:
            return 0.0
        held = self.terms.get(document, frozenset())
        return math.fsum(self.weight(w) for w in words if w & held) / mass


def _commitment(scores: Sequence[float]) -> float:
    head = scores[:10]
    if len(head) < 2 or head[0] <= 0:
        return 0.0
    return statistics.pstdev(head) / head[0]


def _gap(scores: Sequence[float]) -> float:
    if not scores or scores[0] <= 0:
        return 0.0
    return (scores[0] - scores[min(9, len(scores) - 1)]) / scores[0]


def signals(q: QueryLegs, corpus: Corpus) -> dict[str, float]:
    """Every signal of one query (module docstring)."""
    dense = q.legs.get("dense", [])
    sparse = q.legs.get("sparse", [])
    d_docs, s_docs = [r[1] for r in dense], [r[1] for r in sparse]
    d_scores, s_scores = [r[2] for r in dense], [r[2] for r in sparse]
    words = corpus.query_words(q.query)
    matchable = [t for w in words for t in w if corpus.frequency.get(t, 0) > 0]
    ceiling = (DEFAULT_K1 + 1.0) * math.fsum(corpus.idf(t) for t in set(matchable))
    return {
        "cov1": corpus.first_coverage(words, sparse),
        "cov3": (
            statistics.fmean(corpus.coverage(words, d) for d in s_docs[:3]) if s_docs else 0.0
        ),
        "dcov1": corpus.first_coverage(words, dense),
        "overlap10": len(set(d_docs[:10]) & set(s_docs[:10])) / 10,
        "ceiling": s_scores[0] / ceiling if s_scores and ceiling > 0 else 0.0,
        "dense_top": d_scores[0] if d_scores else 0.0,
        "words": float(len(words)),
        "nqc_sparse": _commitment(s_scores),
        "nqc_dense": _commitment(d_scores),
        "gap_sparse": _gap(s_scores),
        "gap_dense": _gap(d_scores),
    }


def strongest_evidence(q: QueryLegs) -> float:
    """``E``: the strongest standout evidence over the legs (0: nothing stands out)."""
    return max(
        (leg_evidence([r[2] for r in rows]) for rows in q.legs.values() if rows), default=0.0
    )


@dataclass(frozen=True)
class Row:
    dataset: str
    query_id: str
    difference: float
    """nDCG@10 at the high prior minus at the low one."""
    legs: float
    """nDCG@10 of the dense leg minus the keyword leg's."""
    signals: dict[str, float]


def rows(
    queries: Sequence[QueryLegs],
    corpus_of: Callable[[str], Corpus],
    *,
    priors: tuple[float, float],
    k: int,
    regime: float,
) -> list[Row]:
    """One row per query whose strongest evidence is below ``regime`` and where both legs
    take part: each found something and the coverage rule keeps the dense leg (a leg
    that takes no part makes every prior alike)."""
    settings = scores_alone(Settings(_env_file=None).search)
    low, high = (
        Replay(settings, fusion="adaptive", weights={"dense": p, "sparse": 1.0 - p}, k=k)
        for p in priors
    )
    out = []
    for q in queries:
        if (
            not (q.legs.get("dense") and q.legs.get("sparse"))
            or strongest_evidence(q) >= regime
            or dense_cannot_read(
                q.query,
                dense_scripts=q.dense_scripts,
                min_dense_script_coverage=settings.min_dense_script_coverage,
            )
        ):
            continue

        def ndcg(replay: Replay, mode: str, q: QueryLegs = q) -> float:
            return evaluate_ranking(replay.rank(q, mode), q.qrels)["ndcg@10"]

        out.append(
            Row(
                q.dataset,
                q.query_id,
                ndcg(high, "hybrid") - ndcg(low, "hybrid"),
                ndcg(low, "semantic") - ndcg(low, "keyword"),
                signals(q, corpus_of(q.dataset)),
            )
        )
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson's r; NaN when either side is constant or has fewer than 3 values."""
    if len(x) < 3 or statistics.pstdev(x) == 0 or statistics.pstdev(y) == 0:
        return math.nan
    return statistics.correlation(x, y)


def render(table: Sequence[Row], priors: tuple[float, float], regime: float) -> str:
    """Per set: the queries, mean Δ, the legs' mean difference and each signal's r with Δ,
    then each signal's mean; last, how many sets correlate each way."""
    low, high = priors
    if not table:
        return f"No query with E < {regime:g} where both legs take part."
    by_set: dict[str, list[Row]] = defaultdict(list)
    for row in table:
        by_set[row.dataset].append(row)
    groups = [*by_set.items(), ("all sets pooled", list(table))]
    header = " | ".join(SIGNALS)
    lines = [
        f"Queries with E < {regime:g}; Δ = nDCG@10 at prior {high:g} - at {low:g}; "
        "r = Pearson correlation of each signal with Δ within the set.",
        "",
        f"| set | queries | mean Δ | dense - keyword | {header} |",
        "| --- | ---: | ---: | ---: |" + " ---: |" * len(SIGNALS),
    ]
    signs: dict[str, list[int]] = {s: [0, 0] for s in SIGNALS}
    for name, items in groups:
        difference = [row.difference for row in items]
        cells = []
        for s in SIGNALS:
            r = pearson([row.signals[s] for row in items], difference)
            cells.append("-" if math.isnan(r) else f"{r:+.2f}")
            if name != "all sets pooled" and not math.isnan(r) and abs(r) >= CLEAR:
                signs[s][r < 0] += 1
        lines.append(
            f"| {name} | {len(items)} | {statistics.fmean(difference):+.4f} | "
            f"{statistics.fmean(row.legs for row in items):+.4f} | " + " | ".join(cells) + " |"
        )
    lines += [
        "",
        f"Sets where r ≥ +{CLEAR:g} / ≤ -{CLEAR:g}: "
        + ", ".join(f"{s} {up}/{down}" for s, (up, down) in signs.items()),
        "",
        "Each signal's mean:",
        "",
        f"| set | {header} |",
        "| --- |" + " ---: |" * len(SIGNALS),
    ]
    for name, items in groups:
        means = (statistics.fmean(row.signals[s] for row in items) for s in SIGNALS)
        lines.append(f"| {name} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return "\n".join(lines)


def _priors(text: str) -> tuple[float, float]:
    low, high = (float(v) for v in text.split(","))
    if not 0.0 < low < high < 1.0:
        msg = f"--priors: want LOW,HIGH with 0 < LOW < HIGH < 1, got {text!r}"
        raise argparse.ArgumentTypeError(msg)
    return low, high


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m research.leg_signals")
    parser.add_argument("legs", type=Path, help="a --save-legs JSONL file")
    parser.add_argument(
        "--priors", type=_priors, default=(0.8, 0.95), metavar="LOW,HIGH",
        help="the two dense priors compared (default 0.8,0.95)",
    )  # fmt: skip
    parser.add_argument("--k", type=int, default=OFFLINE_FUSION.k, help="k of both designs")
    parser.add_argument(
        "--regime", type=float, default=NO_STANDOUT, metavar="E",
        help="queries whose strongest evidence is below E (default 0.1)",
    )  # fmt: skip
    parser.add_argument("--datasets-root", type=Path, default=DATASETS_ROOT)
    args = parser.parse_args(argv)
    corpora: dict[str, Corpus] = {}

    def corpus_of(name: str) -> Corpus:
        if name not in corpora:
            corpora[name] = Corpus.of(load_dataset(args.datasets_root / name).corpus)
        return corpora[name]

    table = rows(
        list(read_legs(args.legs)), corpus_of, priors=args.priors, k=args.k, regime=args.regime
    )
    print(render(table, args.priors, args.regime))
    return 0


if __name__ == "__main__":
    sys.exit(main())
