"""The first stage of the query path: a request validated once into an immutable plan.

A :class:`SearchPlan` holds everything the later stages need (which legs run and when,
the candidate depth, the time budget, the parsed filter, the ranking parameters) as
frozen, hashable values, so two requests that must give the same result give equal
plans with equal hashes, and any field that changes the result changes the plan. Every
invalid request is refused here, before any work is done, with an
:class:`~hsearch.errors.InvalidRequestError` (422) naming the field.

Which legs run
--------------
A leg whose weight is 0 for this query takes no part in fusion, so it is not run
(reported ``skipped``), unless the weight rule (:func:`~hsearch.search.ranking.leg_weights`)
could still give it weight once the other legs have answered. Its :class:`LegRole`
says when that is:

* a leg with weight 0 (configured or requested) is :attr:`LegRole.IF_NONE_ANSWERED`:
  it runs only when every leg that ran failed, since the rule then gives every leg that
  answered weight 1;
* a dense leg whose encoder cannot read the query's script
  (:func:`~hsearch.search.ranking.dense_cannot_read`, decided from the query text) in a
  hybrid search with a weighted sparse leg is :attr:`LegRole.IF_NO_HITS`: the rule
  silences it whenever the sparse leg finds something, so it runs only when the sparse
  leg found nothing (failed or returned no candidate);
* every other leg of the mode is :attr:`LegRole.PRIMARY` and runs first. (When the
  dense encoder cannot read the query and the sparse leg has weight 0, both legs run:
  the rule then gives both weight 1 when both find something.)

The fused result is the same as if every leg of the mode had run, as long as the legs
that ran answered within the budget: a fallback leg runs on what is left of it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from hsearch.config import SearchSettings
from hsearch.embedding.protocol import EncoderInfo
from hsearch.errors import InvalidFusionError, InvalidRequestError
from hsearch.lexical.syntax import ParsedQuery, parse_query
from hsearch.search.facets import validate_facet_requests
from hsearch.search.fusion import MAX_RRF_K, MIN_RRF_K, query_word_count
from hsearch.search.models import SearchQuery
from hsearch.search.ranking import RankingSpec, dense_cannot_read
from hsearch.search.sorting import validate_sort
from hsearch.search.sources import Need, ParameterisedSource, SourceRegistry
from hsearch.types import Leg, SearchMode, TotalTracking
from hsearch.vectorstore.filters import And, FilterNode, parse_filter

__all__ = ["MAX_QUERY_CHARS", "LegPlan", "LegRole", "QueryPlanner", "SearchPlan"]


class LegRole(StrEnum):
    """When a leg of the mode runs (see the module docstring)."""

    PRIMARY = "primary"
    """Runs first, in parallel with the other primary legs."""
    IF_NONE_ANSWERED = "if_none_answered"
    """Weight 0: runs only when every primary leg failed."""
    IF_NO_HITS = "if_no_hits"
    """Silenced by the script-coverage rule: runs only when the primary legs found
    nothing (failed, or answered without a candidate)."""
    SEEDED = "seeded"
    """Reads the primary legs' candidates (:attr:`Need.HITS`): runs after them, when
    at least one of them answered."""

    def due(self, primary: Sequence[Sequence[object] | None]) -> bool:
        """Whether a leg of this role must run, given what the primary legs answered
        (``None`` for a leg that failed or timed out, else its candidates)."""
        if self is LegRole.IF_NONE_ANSWERED:
            return all(hits is None for hits in primary)
        if self is LegRole.IF_NO_HITS:
            return not any(primary)
        if self is LegRole.SEEDED:
            return any(hits is not None for hits in primary)
        return True


CONSTRAINED_DEPTH: Final = 3
"""With phrases or exclusions each leg fetches this many times the window (within
``max_candidates``): the conditions drop candidates, and the window should stay full."""

MAX_QUERY_CHARS: Final = 4096
"""The longest query text a search takes (the API's schema says the same); longer text
is refused rather than cut, so that what is searched is what was sent."""


@dataclass(frozen=True, slots=True)
class LegPlan:
    leg: str
    """The source's name."""
    role: LegRole


@dataclass(frozen=True, slots=True)
class SearchPlan:
    """One validated search: immutable and hashable (a result cache can key on it).

    ``offset`` (in :attr:`ranking`) cuts the page from the fused list; it changes
    nothing else, in particular not :attr:`candidates`, so every page of a query is cut
    from the same fused list.
    """

    tenant_id: str
    query: str
    mode: SearchMode
    legs: tuple[LegPlan, ...]
    """The mode's legs (sources) in registration order, each with its role."""
    candidates: int
    """The depth of every leg (the window): the request's or the configured one, never
    derived from ``top_k`` or ``offset``."""
    budget_s: float
    """The time encoding and the legs share, from the start of the request; each leg
    gets what is left of it when it starts."""
    filter: FilterNode | None
    ranking: RankingSpec
    rerank: bool
    highlight: bool
    track_total: TotalTracking = TotalTracking.BOUND
    """How the total and the facets are counted (:class:`SearchQuery`)."""
    syntax: ParsedQuery | None = None
    """The query's syntax (:mod:`hsearch.lexical.syntax`); ``None``: plain words."""
    typo_tolerance: bool = True
    prefix: bool = False
    depth: int = 0
    """How many candidates each leg fetches: :attr:`candidates`, or more when the
    syntax's conditions will drop some (0: :attr:`candidates`)."""
    leg_params: tuple[tuple[str, object], ...] = ()
    """What the request asks of particular sources, as each source checked it
    (:meth:`~hsearch.search.sources.ParameterisedSource.parse_params`), by name."""
    include_linked: bool = False
    """Each hit lists the documents it links to and from."""

    def params_of(self, leg: str) -> object:
        """The request's parameters of ``leg`` (``None``: its defaults)."""
        return dict(self.leg_params).get(leg)

    @property
    def text(self) -> str:
        """What the legs search: the query without its syntax."""
        return self.query if self.syntax is None else self.syntax.text

    @property
    def constrained(self) -> bool:
        """Whether the syntax sets conditions every hit must meet."""
        return self.syntax is not None and self.syntax.constrained

    @property
    def fetched(self) -> int:
        return self.depth or self.candidates

    @property
    def counts_matches(self) -> bool:
        """Whether the keyword matches beyond the window are counted (an exact total
        asked for): the one tracking that may cost a store request."""
        return self.track_total is TotalTracking.EXACT

    def legs_in(self, role: LegRole) -> tuple[str, ...]:
        return tuple(p.leg for p in self.legs if p.role is role)

    def counting_key(self) -> SearchPlan:
        """The plan with what cannot change its total and facets left out (the page,
        the sort, reranking, snippets): the key under which they are reused by its other
        pages and orders."""
        ranking = replace(self.ranking, offset=0, top_k=1, sort=())
        return replace(self, ranking=ranking, budget_s=0.0, rerank=False, highlight=False)


class QueryPlanner:
    """Turns a :class:`SearchQuery` into a :class:`SearchPlan` for one server: its
    search settings, its encoder (which scripts the dense side reads, and the fusion
    default it declares, which the settings resolve: :meth:`SearchSettings.resolve_fusion`)
    and whether a reranker is configured."""

    def __init__(
        self,
        settings: SearchSettings,
        *,
        encoder: EncoderInfo,
        can_rerank: bool,
        sources: SourceRegistry,
    ) -> None:
        self._settings = settings
        self._dense_scripts = encoder.dense_scripts
        self._fusion = encoder.fusion
        self._can_rerank = can_rerank
        self._sources = sources

    def plan(self, query: SearchQuery) -> SearchPlan:
        """Validate ``query``; raises :class:`InvalidRequestError` naming the field."""
        s = self._settings
        _check_text_and_page(query, max_top_k=s.max_top_k)
        # The candidate depth (the window) depends on neither top_k nor offset: every
        # page of a query is cut from the same fused list, so pages neither repeat nor
        # skip hits, and totals and facets count the same set whatever the page.
        candidates = query.candidates or s.candidates
        if not query.top_k <= candidates <= s.max_candidates:
            raise InvalidRequestError(
                f"candidates: must be between top_k ({query.top_k}) and {s.max_candidates}"
            )
        self._check_offset(query.offset, candidates)
        budget = query.leg_timeout_s or s.leg_timeout_s
        if not 0 < budget <= s.max_leg_timeout_s:
            raise InvalidRequestError(
                f"leg_timeout_ms: must be in (0, {int(s.max_leg_timeout_s * 1000)}]"
            )
        if query.min_score is not None and not math.isfinite(query.min_score):
            raise InvalidRequestError("min_score: must be a finite number")
        # Parsed once here; every leg gets the tree. InvalidFilterError names the part.
        filter = parse_filter(query.filter)
        if query.required_filter is not None:
            # A token's filter is ANDed in, never ORed: no request can widen it.
            filter = (
                query.required_filter if filter is None else And((query.required_filter, filter))
            )
        validate_facet_requests(query.facets)
        sort = validate_sort(query.sort)
        if query.rerank and not self._can_rerank:
            msg = "rerank: no reranker is configured on this server (HSEARCH_RERANK__MODEL_PATH)"
            raise InvalidRequestError(msg)
        fusion = s.resolve_fusion(self._fusion, query.fusion)
        method = fusion.method
        names = self._sources.names
        if query.weights:
            weights = _weights(query.weights, names=names)
        else:
            encoder = {leg.value: weight for leg, weight in fusion.leg_weights().items()}
            defaults = {**self._sources.default_weights(), **encoder}
            weights = {name: defaults.get(name, 0.0) for name in names}
        mode_legs = self._sources.legs_of(query.mode)
        if not any(weights[leg] > 0 for leg in mode_legs):
            raise InvalidRequestError(
                f"weights: at least one leg of mode {query.mode.value!r} needs a weight above 0"
            )
        seeded = [leg for leg in mode_legs if Need.HITS in self._sources[leg].needs]
        seeding = [leg for leg in mode_legs if leg not in seeded]
        if not any(weights[leg] > 0 for leg in seeding):
            raise InvalidRequestError(
                f"weights: {', '.join(map(repr, seeded))} start from the other legs' hits: "
                f"weigh at least one of {', '.join(map(repr, seeding))} above 0"
            )
        # A leg seeded by the others and not weighed takes no part: it is not planned
        # (were every other leg to fail, it would have nothing to start from).
        mode_legs = tuple(leg for leg in mode_legs if leg in seeding or weights[leg] > 0)
        rrf_k = query.rrf_k or fusion.k
        if not MIN_RRF_K <= rrf_k <= MAX_RRF_K:
            msg = f"rrf_k: must be an integer between {MIN_RRF_K} and {MAX_RRF_K} (got {rrf_k})"
            raise InvalidFusionError(msg)
        unreadable = dense_cannot_read(
            query.query,
            dense_scripts=self._dense_scripts,
            min_dense_script_coverage=s.min_dense_script_coverage,
        )
        syntax = parse_query(query.query)
        depth = (
            min(s.max_candidates, candidates * CONSTRAINED_DEPTH)
            if syntax.constrained
            else candidates
        )
        return SearchPlan(
            tenant_id=query.tenant_id,
            query=query.query,
            mode=query.mode,
            legs=_leg_plans(
                mode_legs, weights=weights, dense_unreadable=unreadable, sources=self._sources
            ),
            candidates=candidates,
            budget_s=budget,
            filter=filter,
            ranking=RankingSpec(
                method=method,
                weights=tuple(weights.items()),
                rrf_k=rrf_k,
                dense_unreadable=unreadable,
                min_score=query.min_score,
                group_by_document=query.group_by_document,
                facets=tuple(query.facets),
                facet_unit=query.facet_unit,
                window=candidates,
                offset=query.offset,
                top_k=query.top_k,
                sort=sort,
                rank_only=tuple(seeded),
                keyword_coverage=fusion.keyword_coverage,
                length_words=fusion.length_words,
                words=query_word_count(syntax.text),
            ),
            rerank=query.rerank,
            highlight=query.highlight,
            track_total=query.track_total,
            syntax=syntax if syntax.text != query.query or syntax.constrained else None,
            typo_tolerance=(
                s.typo_tolerance if query.typo_tolerance is None else query.typo_tolerance
            ),
            prefix=query.prefix,
            depth=depth,
            leg_params=self._leg_params(query),
            include_linked=query.include_linked,
        )

    def _leg_params(self, query: SearchQuery) -> tuple[tuple[str, object], ...]:
        """Each named source's parameters, checked by the source (a 422 naming them)."""
        checked: list[tuple[str, object]] = []
        for name, raw in sorted((query.leg_params or {}).items()):
            source = self._sources.get(name)
            if not isinstance(source, ParameterisedSource):
                raise InvalidRequestError(f"{name}: no such leg on this server takes parameters")
            checked.append((name, source.parse_params(raw)))
        return tuple(checked)

    def at_offset(self, plan: SearchPlan, offset: int) -> SearchPlan:
        """``plan`` with its page starting at ``offset`` (a cursor's), validated as
        :meth:`plan` validates a request's; nothing else changes."""
        if offset < 0:
            raise InvalidRequestError("offset: must be >= 0")
        self._check_offset(offset, plan.candidates)
        return replace(plan, ranking=replace(plan.ranking, offset=offset))

    def _check_offset(self, offset: int, candidates: int) -> None:
        if offset >= candidates:
            # Past the window the fused order is not defined: say so, never an empty page.
            raise InvalidRequestError(
                f"offset: pages end at the window of {candidates} results (offset at most "
                f"{candidates - 1}); to page deeper ask for more candidates "
                f"(at most {self._settings.max_candidates})"
            )


def _weights(given: Mapping[str, float], *, names: Sequence[str]) -> dict[str, float]:
    """Every source's weight in registration order (0 for one not given), validated."""
    by_leg: dict[str, float] = {}
    for name, weight in given.items():
        if name not in names:
            allowed = ", ".join(repr(n) for n in names)
            raise InvalidRequestError(f"weights: unknown leg {name!r}; allowed: {allowed}")
        if not (math.isfinite(weight) and 0.0 <= weight <= 1.0):
            raise InvalidRequestError(f"weights.{name}: must be between 0 and 1")
        by_leg[str(name)] = float(weight)
    return {name: by_leg.get(name, 0.0) for name in names}


def _leg_plans(
    legs: Sequence[str],
    *,
    weights: Mapping[str, float],
    dense_unreadable: bool,
    sources: SourceRegistry,
) -> tuple[LegPlan, ...]:
    """Each leg of the mode with its role (the rules are in the module docstring)."""
    weighted = {leg for leg in legs if weights[leg] > 0}
    roles = {leg: LegRole.PRIMARY if leg in weighted else LegRole.IF_NONE_ANSWERED for leg in legs}
    for leg in weighted:
        if Need.HITS in sources[leg].needs:
            roles[leg] = LegRole.SEEDED
    dense, sparse = Leg.DENSE.value, Leg.SPARSE.value
    if dense_unreadable and {dense, sparse} <= set(legs) and dense in weighted:
        if sparse in weighted:
            roles[dense] = LegRole.IF_NO_HITS
        else:
            roles[sparse] = LegRole.PRIMARY
    return tuple(LegPlan(leg, roles[leg]) for leg in legs)


def _check_text_and_page(query: SearchQuery, *, max_top_k: int) -> None:
    """The query text and the page's size and start; raises InvalidRequestError."""
    if not query.query.strip():
        raise InvalidRequestError("query: must not be empty")
    if len(query.query) > MAX_QUERY_CHARS:
        msg = f"query: at most {MAX_QUERY_CHARS} characters, got {len(query.query)}"
        raise InvalidRequestError(msg)
    if not 1 <= query.top_k <= max_top_k:
        raise InvalidRequestError(f"top_k: must be between 1 and {max_top_k}")
    if query.max_top_k is not None and query.top_k > query.max_top_k:
        msg = f"top_k: this search token allows at most {query.max_top_k}"
        raise InvalidRequestError(msg)
    if query.offset < 0:
        raise InvalidRequestError("offset: must be >= 0")
