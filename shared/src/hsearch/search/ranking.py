"""Ranking after retrieval (pure, no I/O): weights, fusion, threshold, grouping, the page,
and ordering by rerank scores.

The search service hands this module what the legs answered and the plan's
:class:`RankingSpec`; every result is a function of those two, so the ranking of a
query can be reproduced (and tested) without a store, an encoder or a clock.

The weight rule (:func:`leg_weights`) is shared with the relevance benchmark's replay
(``bench.fusion_replay``), so both fuse with exactly the same weights, and with the
planner, which decides from it before retrieval which legs need not run.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, TypeVar

from hsearch.search.facets import FacetRequest
from hsearch.search.fusion import (
    FusedHit,
    LegHit,
    QueryReading,
    fuse_explained,
    script_coverage,
)
from hsearch.search.sorting import SortClause
from hsearch.types import CountUnit, FusionMethod, Leg
from hsearch.vectorstore.protocol import StoredHit

__all__ = [
    "Ranked",
    "RankingSpec",
    "dense_cannot_read",
    "group_by_document",
    "leg_weights",
    "page",
    "query_reading",
    "query_weights",
    "rank",
    "rerank",
]

_T = TypeVar("_T")

Unit = tuple[FusedHit, int]
"""One entry of the ranking: a fused hit and how many chunks it stands for (1, or the
matching chunks of its document when grouping)."""


# -- the weight rule --------------------------------------------------------------------


def dense_cannot_read(
    query: str, *, dense_scripts: Collection[str] | None, min_dense_script_coverage: float
) -> bool:
    """Whether the dense encoder does not read the query's language.

    True when the encoder declares the scripts it reads (``EncoderInfo.dense_scripts``)
    and fewer than ``min_dense_script_coverage`` of the query's words are written in
    them (e.g. an English-only model on Japanese): its ranking of the query is noise.
    A function of the query text alone, so it is decided before retrieval.
    """
    return (
        dense_scripts is not None
        and script_coverage(query, scripts=dense_scripts) < min_dense_script_coverage
    )


def leg_weights(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    configured: Mapping[str, float],
    dense_unreadable: bool,
) -> dict[str, float]:
    """The weights one query is fused with, for the legs that answered (``legs``).

    * a degraded or skipped leg is absent from ``legs`` and drops out of the weights;
      the legs that answered keep their configured weights;
    * coverage: when the dense encoder cannot read the query (``dense_unreadable``,
      :func:`dense_cannot_read`), the dense leg gets weight 0, provided the sparse leg
      found something;
    * fallback: when no leg that answered keeps a positive weight, they all get 1, so a
      query never comes back empty because of a weight.
    """
    weights = {leg: configured.get(leg, 0.0) for leg in legs}
    if dense_unreadable and legs.get(Leg.DENSE.value) and legs.get(Leg.SPARSE.value):
        # The dense encoder does not read this query's language (e.g. an English-only
        # model on Japanese): its ranking is noise, so only the sparse leg counts.
        weights[Leg.DENSE.value] = 0.0
    if not any(w > 0 for w in weights.values()):
        weights = dict.fromkeys(legs, 1.0)  # the only weighted leg degraded
    return weights


def query_weights(
    query: str,
    legs: Mapping[str, Sequence[LegHit]],
    *,
    configured: Mapping[str, float],
    dense_scripts: Collection[str] | None,
    min_dense_script_coverage: float,
) -> dict[str, float]:
    """:func:`leg_weights` for ``query`` and an encoder's ``dense_scripts``: the rule as
    the replay (``bench.fusion_replay``) applies it to recorded legs."""
    unreadable = dense_cannot_read(
        query, dense_scripts=dense_scripts, min_dense_script_coverage=min_dense_script_coverage
    )
    return leg_weights(legs, configured=configured, dense_unreadable=unreadable)


def query_reading(
    *,
    reads_coverage: bool,
    keyword_coverage: float | None,
    words: int,
    length_words: int | None,
) -> QueryReading:
    """What ``adaptive`` reads of a query: the keyword leg's coverage when the fusion
    reads it and it was read (``None``: not read), the query's words and the length at
    which a standout must be clearer. The service (:meth:`RankingSpec.reading`) and the
    relevance benchmark's replay (``bench.fusion_replay``) build it here alike."""
    coverage = (
        {Leg.SPARSE.value: keyword_coverage}
        if reads_coverage and keyword_coverage is not None
        else {}
    )
    return QueryReading(coverage=coverage, words=words, length_words=length_words)


# -- fusion and shaping -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankingSpec:
    """What ranking needs from a search plan; immutable and hashable."""

    method: FusionMethod
    weights: tuple[tuple[str, float], ...]
    """The configured (or requested) weight of every registered leg (source), in
    registration order."""
    rrf_k: int
    dense_unreadable: bool
    """:func:`dense_cannot_read` for the query and the encoder."""
    min_score: float | None
    group_by_document: bool
    facets: tuple[FacetRequest, ...]
    facet_unit: CountUnit
    window: int
    """The candidate depth of every leg: pages end at this many units of the fused
    ranking (:func:`page`), and the basis of totals holds each leg's window
    (:mod:`~hsearch.search.totals`)."""
    offset: int
    top_k: int
    sort: tuple[SortClause, ...] = ()
    """How the window is ordered (normalised: :func:`~hsearch.search.sorting.validate_sort`);
    empty: by relevance."""
    rank_only: tuple[str, ...] = ()
    """Legs whose scores are no match with the query (those seeded by the other legs'
    hits): fused by their ranks (:func:`~hsearch.search.fusion.fuse_explained`)."""
    keyword_coverage: bool = False
    """``adaptive`` reads the keyword leg's coverage of the query
    (:class:`~hsearch.search.fusion.QueryReading`; the retriever reads it only then)."""
    length_words: int | None = None
    """From how many words ``adaptive`` asks a clearer standout (``None``: never)."""
    words: int = 1
    """The query's words (:func:`~hsearch.search.fusion.query_word_count`)."""

    def configured(self) -> dict[str, float]:
        """``weights`` by leg name, as :func:`leg_weights` takes them."""
        return dict(self.weights)

    def reading(self, keyword_coverage: float | None) -> QueryReading:
        """What ``adaptive`` reads of the query, with the keyword leg's first candidate's
        coverage of it (``None``: not read)."""
        return query_reading(
            reads_coverage=self.keyword_coverage,
            keyword_coverage=keyword_coverage,
            words=self.words,
            length_words=self.length_words,
        )


@dataclass(frozen=True, slots=True)
class Ranked:
    """The fused ranking of one query, before the page is cut."""

    candidates: tuple[FusedHit, ...]
    """The fused hits above ``min_score``: the fused window, which totals and facets
    count (:mod:`~hsearch.search.totals`)."""
    units: tuple[Unit, ...]
    """The ranking: one entry per hit, or per document when grouping, best first."""
    fields: Mapping[str, Mapping[str, Any]]
    """The stored fields of every chunk a leg returned, by chunk id."""
    weights: dict[str, float]
    """Per leg that answered, the weight the query was fused with; 0 for a skipped leg."""
    applied_weights: dict[str, float]
    """Per active leg, the share it carried in the fusion (sums to 1)."""


def rank(
    spec: RankingSpec,
    answered: Mapping[str, Sequence[StoredHit]],
    *,
    skipped: Collection[str] = (),
    keyword_coverage: float | None = None,
) -> Ranked:
    """Fuse the legs that answered and shape the result: weights (:func:`leg_weights`),
    fusion, the ``min_score`` threshold (on the fused score), grouping by document.

    ``skipped`` are the legs the plan did not run (weight 0 for this query): they are
    reported with weight 0 and take no part, as a leg with weight 0 would not.
    ``keyword_coverage`` is the keyword leg's first candidate's coverage of the query
    (:attr:`~hsearch.search.retrieval.Retrieval.keyword_coverage`), read by ``adaptive``
    when the spec says so.
    """
    fields: dict[str, Mapping[str, Any]] = {}
    for hits in answered.values():
        for h in hits:
            fields.setdefault(h.chunk_id, h.fields)
    leg_hits = {
        str(leg): [LegHit(h.chunk_id, h.score) for h in hits] for leg, hits in answered.items()
    }
    weights = leg_weights(
        leg_hits, configured=spec.configured(), dense_unreadable=spec.dense_unreadable
    )
    fused, applied = fuse_explained(
        leg_hits,
        method=spec.method,
        weights=weights,
        k=spec.rrf_k,
        rank_only=spec.rank_only,
        reading=spec.reading(keyword_coverage),
    )
    if spec.min_score is not None:
        threshold = spec.min_score
        fused = [f for f in fused if f.score >= threshold]
    units = (
        group_by_document(fused, fields=fields)
        if spec.group_by_document
        else [(f, 1) for f in fused]
    )
    reported = {**{str(leg): 0.0 for leg in skipped}, **weights}
    return Ranked(
        candidates=tuple(fused),
        units=tuple(units),
        fields=fields,
        weights={leg: reported[leg] for leg, _ in spec.weights if leg in reported},
        applied_weights=dict(applied),
    )


def group_by_document(
    fused: Sequence[FusedHit], *, fields: Mapping[str, Mapping[str, Any]]
) -> list[Unit]:
    """One entry per document: its best chunk (fused order) and how many matched."""
    best: dict[str, FusedHit] = {}
    counts: dict[str, int] = {}
    for hit in fused:
        doc = str(fields[hit.id].get("document_id", hit.id))
        best.setdefault(doc, hit)
        counts[doc] = counts.get(doc, 0) + 1
    return [(hit, counts[doc]) for doc, hit in best.items()]


def page(units: Sequence[_T], *, spec: RankingSpec) -> Sequence[_T]:
    """The entries of the requested page: ``top_k`` from ``offset``, within the first
    ``window`` units (past the legs' depth the fused order is no longer reliable: a
    chunk both legs rank just below their windows could belong above)."""
    end = min(spec.offset + spec.top_k, spec.window)
    return units[spec.offset : end]


# -- reranking --------------------------------------------------------------------------


def rerank(hits: Sequence[_T], scores: Sequence[float]) -> list[tuple[_T, float]]:
    """Pair each hit with its score, best first; equal scores keep the hits' original order.

    ``scores[i]`` belongs to ``hits[i]`` (they come from a
    :class:`~hsearch.rerank.protocol.Reranker`). Raises :class:`ValueError` when the
    lengths differ or a score is NaN (which has no place in an order).
    """
    if len(hits) != len(scores):
        msg = f"rerank needs one score per hit: got {len(scores)} scores for {len(hits)} hits"
        raise ValueError(msg)
    values = [float(score) for score in scores]
    if any(math.isnan(value) for value in values):
        msg = "rerank scores must be numbers (finite or infinite), not NaN"
        raise ValueError(msg)
    # sorted() is stable, also with reverse=True: ties stay in their original order.
    return sorted(zip(hits, values, strict=True), key=itemgetter(1), reverse=True)
