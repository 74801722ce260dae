"""Fusion of ranked result lists ("legs") into one ranking.

Pure: no I/O, no clock, no randomness. Every function takes the legs as a mapping from a
leg name (``"dense"``, ``"sparse"``, any later signal) to that leg's candidate list, a
sequence of :class:`LegHit` in rank order (rank = position + 1, higher score = better).

Methods (:class:`hsearch.types.FusionMethod`; which one a search uses by default is
the encoder's choice, ``EncoderInfo.fusion``, see ``docs/fusion.md``)
-------------------------------------------------------------------------------------
``rrf``
    Weighted reciprocal rank fusion: ``score(d) = sum_leg w_leg / (k + rank_leg(d))``.
    Uses ranks only, so the legs' score scales never matter.
``score``
    Weighted min-max score fusion: each leg's scores are mapped to ``[0, 1]`` over its
    candidates, ``score(d) = sum_leg w_leg * (s - min) / (max - min)``.
``sum``
    Weighted sum of the raw scores: ``score(d) = sum_leg w_leg * s_leg(d)``, a leg that
    does not hold ``d`` adding 0. It assumes what only a jointly trained model gives:
    legs whose scores share one scale and where 0 means "no match" (BGE-M3's dense
    cosine and learned sparse inner product; its paper ranks by ``dense + 0.3 x
    sparse``). Invariant to scaling every leg's scores by one positive factor, not to
    changing one leg's scale.
``adaptive``
    A two-regime mixture. Each leg's scores are tested for a standout candidate against
    a noise model of the leg's own list (exponential above the lowest candidate, scale
    ``sigma`` estimated from the list; :func:`leg_evidence`). With probability ``E``
    (the strongest evidence) the query has a standout match: the legs that show one
    speak through ``p_leg = softmax(s / sigma)``, the posterior of which candidate is
    their signal, weighted by prior x evidence. Otherwise nothing stands out: every leg
    speaks through its reciprocal ranks ``1 / (k + rank)`` (RRF's weights, normalised),
    weighted by the configured prior (see :func:`adaptive_fusion` and
    :func:`adaptive_leg_weights`). What it may also read of the query itself (the
    keyword leg's coverage of it, its length) is a :class:`QueryReading`. The research
    behind it, with its measurements and limits, is ``docs/research/fusion-history.md``.

Conventions shared by every method
----------------------------------
* ``weights`` hold one finite weight ``>= 0`` per leg of ``legs`` and nothing else; at
  least one must be ``> 0``. They are normalised to sum to 1 over the *active* legs (a
  positive weight and at least one hit), so scaling every weight by the same factor
  changes nothing, and a leg with weight 0 takes no part (its hits are not returned).
* A leg that failed or found nothing is passed as an empty sequence, or left out
  together with its weight: both give the same result (degraded search keeps working
  on the remaining legs).
* Duplicate ids within one leg are **deduplicated**: the first (best-ranked) occurrence
  is kept and the ranks of the following hits close up (rank = position among distinct
  ids). Backends may repeat a chunk; that is not the caller's error.
* Scores must be finite (any sign: Milvus Lite's BM25 scores are negative).
* The output holds every id of the active legs once, sorted by fused score descending,
  ties broken by id ascending, so the order is deterministic. :attr:`FusedHit.ranks` and
  :attr:`FusedHit.scores` give the id's rank and raw score in each active leg it is in.
* Sums use :func:`math.fsum` (exactly rounded), so the result does not depend on the
  order of the legs in the mapping.

Invalid arguments raise :class:`~hsearch.errors.InvalidFusionError` with a message that
names the allowed values.
"""

from __future__ import annotations

import math
import sys
import unicodedata
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from hsearch.errors import InvalidFusionError
from hsearch.lexical.analyzer import is_cjk
from hsearch.types import DEFAULT_RRF_K, MAX_RRF_K, MIN_RRF_K, FusionMethod

__all__ = [
    "DEFAULT_RRF_K",
    "MAX_RRF_K",
    "MIN_RRF_K",
    "NO_READING",
    "FusedHit",
    "LegHit",
    "QueryReading",
    "adaptive_fusion",
    "adaptive_leg_weights",
    "fuse",
    "fuse_explained",
    "leg_evidence",
    "min_max_score_fusion",
    "noise_confidence",
    "normalise_weights",
    "query_word_count",
    "reciprocal_rank_fusion",
    "script_coverage",
    "signal_posterior",
    "weighted_score_sum",
]


@dataclass(frozen=True, slots=True)
class LegHit:
    """One candidate of a leg: its id and the leg's score (higher is better)."""

    id: str
    score: float


@dataclass(frozen=True, slots=True)
class FusedHit:
    """One fused result.

    ``score`` is the fused score of the method; ``ranks`` and ``scores`` hold, for every
    active leg that returned the id, its rank (1-based, after deduplication) and its raw
    score in that leg.
    """

    id: str
    score: float
    ranks: dict[str, int]
    scores: dict[str, float]


@dataclass(frozen=True, slots=True)
class _Leg:
    """A validated, deduplicated, active leg with its normalised weight."""

    name: str
    weight: float
    ids: tuple[str, ...]
    scores: tuple[float, ...]
    rank_only: bool = False
    """Its scores do not measure a match with the query (the graph leg's closeness to
    the other legs' hits): ``adaptive`` reads no evidence in them, ``sum`` reads them
    rescaled to ``[0, 1]``."""


# -- weights and validation -------------------------------------------------------------


def _check_weight(leg: str, weight: object) -> float:
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        msg = f"weights: weight of leg {leg!r} must be a number >= 0 (got {weight!r})"
        raise InvalidFusionError(msg)
    value = float(weight)
    if not math.isfinite(value) or value < 0:
        msg = f"weights: weight of leg {leg!r} must be a finite number >= 0 (got {weight!r})"
        raise InvalidFusionError(msg)
    return value


def _check_weights(weights: Mapping[str, float]) -> dict[str, float]:
    checked = {leg: _check_weight(leg, w) for leg, w in weights.items()}
    if not math.fsum(checked.values()) > 0:
        msg = "weights: at least one weight must be > 0 (each must be a finite number >= 0)"
        raise InvalidFusionError(msg)
    return checked


def normalise_weights(weights: Mapping[str, float]) -> dict[str, float]:
    """Return ``weights`` scaled to sum to 1 (zero weights stay 0).

    Every weight must be a finite number ``>= 0`` and at least one must be ``> 0``.
    """
    checked = _check_weights(weights)
    total = math.fsum(checked.values())
    return {leg: w / total for leg, w in checked.items()}


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or not MIN_RRF_K <= k <= MAX_RRF_K:
        msg = f"k: must be an integer between {MIN_RRF_K} and {MAX_RRF_K} (got {k!r})"
        raise InvalidFusionError(msg)
    return k


def _names(legs: Iterable[str]) -> str:
    return ", ".join(sorted(legs)) or "(none)"


def _prepare(legs: Mapping[str, Sequence[LegHit]], weights: Mapping[str, float]) -> list[_Leg]:
    """Validate the arguments; return the active legs sorted by name, weights normalised."""
    for name in legs:
        if not isinstance(name, str) or not name:
            msg = f"legs: leg names must be non-empty strings (got {name!r})"
            raise InvalidFusionError(msg)
    unknown = [name for name in weights if name not in legs]
    if unknown:
        msg = f"weights: unknown leg(s) {_names(map(str, unknown))}; allowed legs: {_names(legs)}"
        raise InvalidFusionError(msg)
    unweighted = [name for name in legs if name not in weights]
    if unweighted:
        msg = (
            f"weights: no weight for leg(s) {_names(unweighted)}; "
            f"give one weight >= 0 for each leg: {_names(legs)}"
        )
        raise InvalidFusionError(msg)
    checked = _check_weights(weights)  # every weight finite and >= 0, one > 0

    deduped: list[tuple[str, float, tuple[str, ...], tuple[float, ...]]] = []
    for name in sorted(legs):
        ids: list[str] = []
        scores: list[float] = []
        seen: set[str] = set()
        for hit in legs[name]:
            if not isinstance(hit, LegHit):
                msg = f"legs: leg {name!r} must hold LegHit items (got {type(hit).__name__})"
                raise InvalidFusionError(msg)
            score = hit.score
            if isinstance(score, bool) or not isinstance(score, int | float):
                msg = f"legs: hit {hit.id!r} of leg {name!r} has a non-numeric score {score!r}"
                raise InvalidFusionError(msg)
            if not math.isfinite(score):
                msg = (
                    f"legs: hit {hit.id!r} of leg {name!r} has score {score!r}; "
                    "scores must be finite numbers"
                )
                raise InvalidFusionError(msg)
            if hit.id in seen:
                continue  # keep the best-ranked occurrence (documented in the module)
            seen.add(hit.id)
            ids.append(hit.id)
            scores.append(float(score))
        if ids and checked[name] > 0:
            deduped.append((name, checked[name], tuple(ids), tuple(scores)))

    total = math.fsum(w for _, w, _, _ in deduped)
    return [_Leg(name, w / total, ids, scores) for name, w, ids, scores in deduped]


def _assemble(legs: Sequence[_Leg], fused: Mapping[str, float]) -> list[FusedHit]:
    """Build the hits with per-leg ranks/scores, sorted by score desc then id asc."""
    ranks: dict[str, dict[str, int]] = {doc: {} for doc in fused}
    raw: dict[str, dict[str, float]] = {doc: {} for doc in fused}
    for leg in legs:
        for position, (doc, score) in enumerate(zip(leg.ids, leg.scores, strict=True)):
            ranks[doc][leg.name] = position + 1
            raw[doc][leg.name] = score
    hits = [FusedHit(doc, score, ranks[doc], raw[doc]) for doc, score in fused.items()]
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits


def _combine(legs: Sequence[_Leg], per_leg: Callable[[_Leg], Sequence[float]]) -> list[FusedHit]:
    """``score(d) = fsum_leg(weight_leg * value_leg(d))`` over the legs that hold ``d``."""
    terms: dict[str, list[float]] = {}
    for leg in legs:
        for doc, value in zip(leg.ids, per_leg(leg), strict=True):
            terms.setdefault(doc, []).append(leg.weight * value)
    return _assemble(legs, {doc: math.fsum(parts) for doc, parts in terms.items()})


# -- rank fusion ------------------------------------------------------------------------


def reciprocal_rank_fusion(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float],
    k: int = DEFAULT_RRF_K,
) -> list[FusedHit]:
    """Weighted reciprocal rank fusion.

    ``score(d) = sum over active legs holding d of w_leg / (k + rank_leg(d))`` with the
    weights normalised over the active legs; ``k`` (1..1000, default 60) damps the
    advantage of the very first ranks. Scores are ignored, only ranks count; one leg
    alone keeps its order.
    """
    return _rrf(_prepare(legs, weights), _check_k(k))


def _rrf(active: Sequence[_Leg], k: int) -> list[FusedHit]:
    return _combine(active, lambda leg: [1.0 / (k + r) for r in range(1, len(leg.ids) + 1)])


# -- score fusion -----------------------------------------------------------------------


def _min_max(scores: Sequence[float]) -> list[float]:
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)  # every candidate ties for the leg's best
    # Differences of finite floats may overflow; scaling by the larger magnitude first
    # keeps them finite and leaves the ratio unchanged.
    scale = max(abs(low), abs(high))
    lo, hi = low / scale, high / scale
    return [min(1.0, max(0.0, (s / scale - lo) / (hi - lo))) for s in scores]


def min_max_score_fusion(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float],
) -> list[FusedHit]:
    """Weighted min-max score fusion.

    Each active leg maps its candidates' scores to ``(s - min) / (max - min)`` (all 1.0
    when they are equal); ``score(d) = sum_leg w_leg * norm_leg(d)`` with the weights
    normalised over the active legs, and a leg that does not hold ``d`` adds 0. Fused
    scores lie in ``[0, 1]``.
    """
    return _combine(_prepare(legs, weights), lambda leg: _min_max(leg.scores))


def weighted_score_sum(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float],
) -> list[FusedHit]:
    """Weighted sum of the raw scores.

    ``score(d) = sum_leg w_leg * s_leg(d)`` with the weights normalised over the active
    legs; a leg that does not hold ``d`` adds 0, so a missing document counts as a score
    of 0 ("no match"). Fused scores lie between the lowest and the highest raw score
    (and 0). For legs on one scale only (see the module docstring).
    """
    return _sum(_prepare(legs, weights))


def _bounded_fsum(parts: Sequence[float]) -> float:
    """``fsum(parts)`` for a convex combination, which cannot leave the float range but
    whose rounded terms can overflow an intermediate sum: then the halves, doubled and
    clamped."""
    try:
        return math.fsum(parts)
    except OverflowError:
        half = math.fsum(p / 2 for p in parts)
        return math.copysign(min(2 * abs(half), sys.float_info.max), half)


def _sum(active: Sequence[_Leg]) -> list[FusedHit]:
    terms: dict[str, list[float]] = {}
    for leg in active:
        for doc, score in zip(leg.ids, leg.scores, strict=True):
            terms.setdefault(doc, []).append(leg.weight * score)
    return _assemble(active, {doc: _bounded_fsum(parts) for doc, parts in terms.items()})


# -- adaptive fusion --------------------------------------------------------------------


def _scaled(scores: Sequence[float]) -> list[float]:
    """Scores divided by their largest magnitude: keeps later arithmetic finite.

    The noise scale, the posteriors and :func:`leg_evidence` are invariant to a positive
    scale factor.
    """
    scale = max(abs(s) for s in scores)
    return [s / scale for s in scores] if scale > 0 else [0.0] * len(scores)


def _noise_scale(values: Sequence[float]) -> float:
    """The scale ``sigma`` of the exponential noise model over a leg's (scaled) scores.

    The mean excess over the lowest candidate of the candidates other than the best and
    the lowest (the best may be the signal; the lowest is the reference); with fewer
    than 3 candidates, the mean excess of all of them. 0 when nothing but (at most) the
    best rises above the lowest.
    """
    n = len(values)
    low = min(values)
    excess = math.fsum(v - low for v in values)
    if n < 3:
        return excess / max(n - 1, 1)
    return max(0.0, (excess - (max(values) - low)) / (n - 2))


def signal_posterior(scores: Sequence[float]) -> list[float]:
    """Which of a leg's candidates is its signal: ``softmax((s - s_max) / sigma)``.

    Under the noise model of :func:`noise_confidence` (candidate scores exponential with
    scale ``sigma`` above the lowest one) and one signal candidate with a flat score
    density, the likelihood that candidate ``i`` is the signal is proportional to
    ``exp(s_i / sigma)``; with a uniform prior over the candidates that is the
    posterior. The same ``sigma`` as the evidence, so one model explains both. A leg
    whose scores all tie gives a uniform distribution; one whose only rise above a flat
    list is its best gives that best all the mass; no scores give an empty list.
    """
    if not scores:
        return []
    values = _scaled(scores)
    n = len(values)
    top = max(values)
    if top == min(values):
        return [1.0 / n] * n
    sigma = _noise_scale(values)
    if sigma == 0:  # one candidate above a flat list (two at the top would give sigma > 0)
        return [1.0 if v == top else 0.0 for v in values]
    exps = [math.exp((v - top) / sigma) for v in values]
    total = math.fsum(exps)
    return [e / total for e in exps]


def noise_confidence(scores: Sequence[float]) -> float:
    """The confidence ``c`` in ``[0, 1]`` that a leg's best candidate is not noise.

    Noise model: the candidates are the top ``n`` of a population whose upper tail is
    exponential (the classic score-distribution model for non-relevant documents). Then
    the excesses over the lowest candidate, ``x_i = s_i - s_min``, behave like ``n - 1``
    independent exponentials; their scale ``sigma`` is estimated from the candidates
    other than the best and the lowest. ``c`` is the probability that the largest of
    ``n - 1`` such draws stays below the best candidate's excess::

        c = (1 - exp(-x_max / sigma)) ** (n - 1)

    Under the noise model ``c`` is uniform on ``[0, 1]`` (one minus a p-value), so 0.5
    is chance level. Invariant to a positive affine change of the scores. Fewer than 3
    candidates, or all scores equal, give 0; a best candidate alone above an otherwise
    flat list gives 1.
    """
    n = len(scores)
    if n < 3:
        return 0.0
    values = _scaled(scores)
    spread = max(values) - min(values)
    if spread <= 0:
        return 0.0
    sigma = _noise_scale(values)
    if sigma == 0:
        return 1.0  # the best stands alone above a flat list
    return (-math.expm1(-spread / sigma)) ** (n - 1)


def leg_evidence(scores: Sequence[float]) -> float:
    """How clearly a leg's best candidate stands out from its candidate list, in ``[0, 1]``.

    The confidence above chance of :func:`noise_confidence`, rescaled::

        evidence = max(0, 2c - 1)

    It uses the scores only (not their order), no constants, and is invariant to a
    positive affine change of the scores, so legs on different scales compare. Fewer
    than 3 candidates, or all scores equal, carry no evidence (0). It measures one
    standout match: a query with many equally relevant documents gives little evidence
    in every leg, and :func:`adaptive_fusion` then reads the legs by their ranks, with
    the configured weights.
    """
    return max(0.0, 2.0 * noise_confidence(scores) - 1.0)


def _rank_distribution(scores: Sequence[float], k: int) -> list[float]:
    """``1 / (k + rank)`` normalised to sum to 1, rank = 1 + number of higher scores.

    The reciprocal-rank weights of RRF as a distribution over the leg's candidates. Ranks
    come from the scores (tied scores share the better rank), so the result does not
    depend on the order of tied candidates.
    """
    ordered = sorted(scores, reverse=True)
    first_position: dict[float, int] = {}
    for position, score in enumerate(ordered):
        first_position.setdefault(score, position)
    raw = [1.0 / (k + 1 + first_position[s]) for s in scores]
    total = math.fsum(raw)
    return [r / total for r in raw]


@dataclass(frozen=True, slots=True)
class QueryReading:
    """What ``adaptive`` reads of the query beyond the legs' scores (docs/fusion.md).

    Both readings are off by default (the fusion of the legs' scores alone).
    """

    coverage: Mapping[str, float] = field(default_factory=dict)
    """Per leg, the share of the query its first candidate holds, in ``[0, 1]``
    (the keyword leg's: :func:`hsearch.lexical.coverage.query_coverage`). It moves both
    regimes. Where nothing stands out, the leg's share of that regime is its prior times
    ``1 - coverage``, renormalised over the legs: a leg whose first candidate holds the
    whole query (as many candidates of a short query do) leaves the order to the others.
    The leg's evidence of a standout is multiplied by its coverage: a first candidate
    that stands out while holding a part of the query (a few rare words of a long
    question) is a standout on that part, not a match of the query."""
    words: int = 1
    """The query's words (:func:`query_word_count`)."""
    length_words: int | None = None
    """From how many words a standout must be clearer: each leg's evidence is raised
    to the power ``max(1, words / length_words)`` (a long query's standout, made of
    many generic terms, says less). ``None``: never."""

    def __post_init__(self) -> None:
        for leg, share in self.coverage.items():
            if isinstance(share, bool) or not isinstance(share, int | float):
                msg = f"coverage: the share of leg {leg!r} must be a number (got {share!r})"
                raise InvalidFusionError(msg)
            if not 0.0 <= share <= 1.0:
                msg = f"coverage: the share of leg {leg!r} must be in [0, 1] (got {share!r})"
                raise InvalidFusionError(msg)
        if isinstance(self.words, bool) or not isinstance(self.words, int) or self.words < 1:
            msg = f"words: must be an integer >= 1 (got {self.words!r})"
            raise InvalidFusionError(msg)
        if self.length_words is not None and (
            isinstance(self.length_words, bool)
            or not isinstance(self.length_words, int)
            or self.length_words < 1
        ):
            msg = f"length_words: must be an integer >= 1 or None (got {self.length_words!r})"
            raise InvalidFusionError(msg)

    def evidence(self, value: float, leg: str | None = None) -> float:
        """A leg's :func:`leg_evidence` as this query reads it: sharpened by the length,
        then times the leg's coverage (when the reading holds one for ``leg``)."""
        if value <= 0.0:
            return value
        if self.length_words is not None:
            value = float(value ** max(1.0, self.words / self.length_words))
        if leg is not None and leg in self.coverage:
            value *= self.coverage[leg]
        return value


NO_READING = QueryReading()
"""The legs' scores alone."""


def query_word_count(text: str) -> int:
    """The query's words as white space separates them, at least 1 (a Japanese question
    without spaces is one word, so the length reading never sharpens it)."""
    return max(1, len(text.split()))


def _covered(plain: dict[str, float], coverage: Mapping[str, float]) -> dict[str, float]:
    """The no-standout shares, each leg's times ``1 - coverage``, the regime's total
    kept (when every leg's first candidate holds the whole query, unchanged)."""
    scaled = {leg: w * (1.0 - coverage.get(leg, 0.0)) for leg, w in plain.items()}
    kept = math.fsum(scaled.values())
    if kept <= 0.0:
        return plain
    total = math.fsum(plain.values())
    return {leg: total * w / kept for leg, w in scaled.items()}


def _regimes(
    legs: Sequence[_Leg], reading: QueryReading = NO_READING
) -> tuple[dict[str, float], dict[str, float]]:
    """Each leg's share of the no-standout regime and of the standout regime.

    ``plain = (1 - E) * w`` and ``standout = E * w * e / sum(w * e)``, with ``e`` the
    legs' evidence (as ``reading`` reads it: its length and, when more than one leg is
    active, the legs' coverage) and ``E = max(e)``; ``plain`` then moved by the legs'
    coverage (:class:`QueryReading`). Together they sum to 1.
    """
    # The coverage weighs legs against each other: a leg fused alone keeps its scores.
    between = len(legs) > 1
    evidence = {
        leg.name: 0.0
        if leg.rank_only
        else reading.evidence(leg_evidence(leg.scores), leg.name if between else None)
        for leg in legs
    }
    strongest = max(evidence.values(), default=0.0)
    support = math.fsum(leg.weight * evidence[leg.name] for leg in legs)
    plain = {leg.name: (1.0 - strongest) * leg.weight for leg in legs}
    standout = {
        leg.name: strongest * leg.weight * evidence[leg.name] / support if support > 0 else 0.0
        for leg in legs
    }
    if reading.coverage:
        plain = _covered(plain, reading.coverage)
    return plain, standout


def adaptive_leg_weights(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float],
    reading: QueryReading = NO_READING,
) -> dict[str, float]:
    """The share ``pi`` of the fused mass each active leg carries in :func:`adaptive_fusion`.

    With ``w`` the configured weights normalised over the active legs, ``e`` each leg's
    :func:`leg_evidence` and ``E = max(e)`` the strongest evidence of the query::

        pi_leg = (1 - E) * w_leg + E * w_leg * e_leg / sum(w * e)

    The first term is the leg's share of the no-standout regime, the second its share of
    the standout regime (the prior times the evidence, normalised). When no leg's best
    candidate stands out (``E = 0``) the configured weights hold unchanged; the stronger
    the clearest standout, the more the weights move to the legs that show one. The
    weights sum to 1. Exposed so that a ranking explanation can show why a query leaned
    on one leg. ``reading`` moves both terms as :class:`QueryReading` says: ``e`` is then
    the evidence as it reads it (sharpened by the length, times the leg's coverage).
    """
    plain, standout = _regimes(_prepare(legs, weights), reading)
    return {leg: plain[leg] + standout[leg] for leg in plain}


def adaptive_fusion(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    weights: Mapping[str, float],
    k: int = DEFAULT_RRF_K,
    reading: QueryReading = NO_READING,
) -> list[FusedHit]:
    """Two-regime mixture of per-leg distributions.

    A query either has a standout match or it does not, and the legs' scores are read
    accordingly. For each active leg:

    * ``p_leg = softmax((s - s_max) / sigma)`` (:func:`signal_posterior`): which
      candidate is the leg's one signal, under the noise model :func:`leg_evidence`
      tests. The reading when a candidate stands out.
    * ``r_leg = (1 / (k + rank)) / sum``: the reciprocal-rank weights of RRF as a
      distribution. The reading when nothing stands out: relevant documents, if any, are
      many and their scores say little beyond their order.

    Both are 0 for documents the leg does not hold. With the regime shares of
    :func:`adaptive_leg_weights`::

        score(d) = sum_leg (1 - E) * w_leg * r_leg(d) + E * v_leg * p_leg(d)
        v_leg = w_leg * e_leg / sum(w * e)

    Fused scores are in ``[0, 1]`` and sum to 1 over the returned hits. The result
    depends on scores only (ranks are computed from them; tied scores share a rank), is
    invariant to a positive affine change of any leg's scores, and one leg alone is
    ordered by score. ``weights`` are the prior, ``k`` (1..1000, default 60, as for
    ``rrf``) damps the first ranks in the no-standout regime; see ``docs/fusion.md`` for
    the measured defaults and for a leg whose encoder cannot read the query (use
    :func:`script_coverage` to set its weight to 0). ``reading`` (:class:`QueryReading`)
    adds what the query itself says: its length and how much of it a leg's first
    candidate holds.
    """
    return _adaptive(_prepare(legs, weights), _check_k(k), reading)[0]


def _adaptive(
    active: Sequence[_Leg], k: int, reading: QueryReading = NO_READING
) -> tuple[list[FusedHit], dict[str, float]]:
    plain, standout = _regimes(active, reading)
    terms: dict[str, list[float]] = {}
    for leg in active:
        posterior = signal_posterior(leg.scores)
        ranked = _rank_distribution(leg.scores, k)
        for doc, p, r in zip(leg.ids, posterior, ranked, strict=True):
            terms.setdefault(doc, []).extend((plain[leg.name] * r, standout[leg.name] * p))
    fused = {doc: math.fsum(parts) for doc, parts in terms.items()}
    applied = {leg.name: plain[leg.name] + standout[leg.name] for leg in active}
    return _assemble(active, fused), applied


# -- dispatcher -------------------------------------------------------------------------


def fuse(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    method: FusionMethod | str,
    weights: Mapping[str, float],
    k: int = DEFAULT_RRF_K,
) -> list[FusedHit]:
    """Fuse ``legs`` with ``method`` (a :class:`FusionMethod` or its value).

    ``k`` is validated for every method (1..1000) and used by ``rrf`` and ``adaptive``.
    """
    return fuse_explained(legs, method=method, weights=weights, k=k)[0]


def fuse_explained(
    legs: Mapping[str, Sequence[LegHit]],
    *,
    method: FusionMethod | str,
    weights: Mapping[str, float],
    k: int = DEFAULT_RRF_K,
    rank_only: Collection[str] = (),
    reading: QueryReading = NO_READING,
) -> tuple[list[FusedHit], dict[str, float]]:
    """:func:`fuse`, and the weight each active leg carried for this query.

    The weights sum to 1 over the active legs: ``weights`` normalised for ``rrf``,
    ``score`` and ``sum``, the per-query mixture weights of :func:`adaptive_leg_weights` for
    ``adaptive``. A ranking explanation shows them next to the configured weights.

    ``rank_only`` names legs whose scores are no match with the query (a leg seeded by
    the others' hits ranks by closeness to them): ``adaptive`` finds no standout in them
    (they speak through their ranks, in the no-standout regime only), and ``sum`` adds
    them rescaled to ``[0, 1]`` (their scale is not the query legs'); ``rrf`` and
    ``score`` read them as any leg. ``reading`` is read by ``adaptive`` only.
    """
    try:
        chosen = FusionMethod(method)
    except ValueError:
        allowed = ", ".join(m.value for m in FusionMethod)
        msg = f"method: must be one of {allowed} (got {method!r})"
        raise InvalidFusionError(msg) from None
    k = _check_k(k)
    active = [
        replace(
            leg,
            rank_only=True,
            scores=leg.scores if chosen is not FusionMethod.SUM else tuple(_min_max(leg.scores)),
        )
        if leg.name in rank_only
        else leg
        for leg in _prepare(legs, weights)
    ]
    if chosen is FusionMethod.ADAPTIVE:
        return _adaptive(active, k, reading)
    applied = {leg.name: leg.weight for leg in active}
    if chosen is FusionMethod.RRF:
        return _rrf(active, k), applied
    if chosen is FusionMethod.SUM:
        return _sum(active), applied
    return _combine(active, lambda leg: _min_max(leg.scores)), applied


# -- query language coverage ------------------------------------------------------------


def _script(char: str) -> str:
    """The first word of the character's Unicode name: LATIN, CJK, HIRAGANA, CYRILLIC..."""
    return unicodedata.name(char, "").split(" ", 1)[0]


def _word_scripts(text: str) -> list[str]:
    """The script of each word of ``text`` (after NFKC).

    A word is a run of letters of one script (combining marks continue it); in Han, kana
    and Hangul every character counts as a word, as BERT-style tokenizers split them.
    """
    scripts: list[str] = []
    current: str | None = None  # the script of the word being read, if any
    for char in unicodedata.normalize("NFKC", text):
        if unicodedata.category(char).startswith("M"):
            continue  # a combining mark belongs to the letter before it
        if not char.isalpha():
            current = None
            continue
        script = _script(char)
        if is_cjk(char):  # written without spaces: each character is a word
            scripts.append(script)
            current = None
        elif script != current:
            scripts.append(script)
            current = script
    return scripts


def script_coverage(text: str, *, scripts: Collection[str]) -> float:
    """Share of the words of ``text`` (after NFKC) written in one of ``scripts``.

    Scripts are named by the first word of the Unicode character name (``"LATIN"``,
    ``"CJK"``, ``"HIRAGANA"``, ``"KATAKANA"``, ``"HANGUL"``, ``"CYRILLIC"``, ``"GREEK"``,
    ``"ARABIC"``, ``"DEVANAGARI"``, ``"THAI"``...), case-insensitive. A word is a run of
    letters in one script; in Han, kana and Hangul, which are written without spaces
    between words, each character counts as one. Words, not letters, because a word is
    what an encoder reads or misses: counted in letters, "RIAIは何の略？" would be half
    Latin although only one of its five units is. A text without letters has coverage 1.0.

    Score distributions cannot tell an encoder that does not read the query's language
    from one that does (docs/fusion.md): the caller sets that leg's weight to 0 when the
    coverage is low (e.g. an English-only dense encoder on a mostly Japanese query).
    """
    wanted = {s.upper() for s in scripts}
    words = _word_scripts(text)
    if not words:
        return 1.0
    return sum(1 for script in words if script in wanted) / len(words)
