"""What a query's total and facets count, and the counting itself (pure, no I/O).

A query's total and facets are independent of ``top_k`` and ``offset``: they count one
declared set of hits, its *basis*, and the response says which (``docs/search.md``,
"Totals" and "Facets").

* **matches** (:attr:`CountScope.MATCHES`): every chunk that holds a keyword query term
  under the filter (the sparse leg's matches: an inverted index finds them all),
  together with the dense leg's ``window`` nearest chunks under the filter (a dense leg
  ranks every chunk, so its basis is the window the request declares, not
  "everything"). A leg the plan skipped takes no part.
* **window** (:attr:`CountScope.WINDOW`): the fused window only, what the legs returned.
  It is the basis when ``min_score`` is set (a chunk the legs did not return has no
  fused score to compare), and with :attr:`TotalTracking.WINDOW`.

How the matches are counted depends on the request's :class:`TotalTracking`:

* :attr:`~TotalTracking.BOUND` (the default) counts what the legs returned. When the
  sparse leg came back short of its window it returned every keyword match, the window
  holds the whole basis and the total is exact; otherwise the total is a **lower
  bound** (relation ``gte``): the larger of the window's units and, for chunks without
  a filter, the largest document frequency among the query's terms in the tenant's
  statistics (at least that many chunks hold one of them). A filter (or a grouping by
  document: a term's frequency counts chunks, and one document may hold many of them)
  leaves only the window known. The facets count the window.
* :attr:`~TotalTracking.EXACT` counts every keyword match, up to ``search.count_limit``,
  with one more store request (:class:`Matches`) when the sparse leg filled its window;
  total and facets count them all. If that request fails or misses the deadline the
  answer falls back to the default's bound (:attr:`Counted.fallback`).

The total counts the page's unit (documents when grouping by document, else chunks);
facets count documents unless the request asks for chunks. A total is exact (relation
``eq``) when every part of its basis was counted in full; otherwise it is a lower bound
and ``exact`` is false: a leg that failed, matches beyond what was counted, or, for the
window basis, a leg that filled its window (more would have followed).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsearch.search.facets import FacetRequest, FacetResult, compute_facets
from hsearch.search.ranking import Ranked, RankingSpec
from hsearch.types import CountScope, CountUnit, Leg, TotalRelation, TotalTracking
from hsearch.vectorstore.protocol import StoredHit

__all__ = ["Counted", "FacetBasis", "Matches", "Totals", "count", "match_fields"]


@dataclass(frozen=True, slots=True)
class Totals:
    total: int
    """How many units the basis holds (a lower bound unless ``exact``)."""
    exact: bool
    unit: CountUnit
    scope: CountScope

    @property
    def relation(self) -> TotalRelation:
        """``eq`` when :attr:`total` is the count, ``gte`` when it is a lower bound."""
        return TotalRelation.EQ if self.exact else TotalRelation.GTE


@dataclass(frozen=True, slots=True)
class FacetBasis:
    """What the facets of a response counted."""

    unit: CountUnit
    scope: CountScope
    exact: bool
    """False when the counts are lower bounds (the same cases as the total's)."""


@dataclass(frozen=True, slots=True)
class Counted:
    """A query's total and facets: a function of its plan and the data, not of the page."""

    totals: Totals
    facets: tuple[FacetResult, ...] = ()
    facet_basis: FacetBasis | None = None
    """``None`` when no facet was asked for."""
    fallback: bool = False
    """An exact count was asked for and could not be made (the count request failed or
    missed the deadline): the total is the default's bound. Never reused."""


@dataclass(frozen=True, slots=True)
class Matches:
    """The keyword matches of a query, as the store's ``match_sparse`` returned them."""

    hits: tuple[StoredHit, ...]
    limit: int
    """The most the store was asked for: as many hits means there may be more."""

    @property
    def complete(self) -> bool:
        return len(self.hits) < self.limit


def match_fields(facets: Sequence[FacetRequest]) -> tuple[str, ...]:
    """The stored fields counting needs of each match: the document id, and the top
    field of every facet (``metadata`` for ``metadata.year``)."""
    roots = dict.fromkeys(["document_id", *(f.field.split(".", 1)[0] for f in facets)])
    return tuple(roots)


def count(
    spec: RankingSpec,
    ranked: Ranked,
    *,
    legs: Mapping[str, int | None],
    tracking: TotalTracking = TotalTracking.BOUND,
    matches: Matches | None = None,
    known_matches: int = 0,
) -> Counted:
    """The total and facets of a query.

    ``legs`` holds each leg that takes part in the query (not skipped) with how many
    candidates it returned, ``None`` for a leg that failed or missed its deadline.
    ``matches`` are the keyword matches, counted for :attr:`TotalTracking.EXACT` (``None``
    when they were not: another tracking, no sparse leg, or the count failed).
    ``known_matches`` is how many chunks hold a query term at the least, as known
    without counting them (the tenant's term statistics; 0 when unknown): it may raise
    a lower bound of the chunk total under no filter, never make one exact. The caller
    passes 0 when a filter applies.
    """
    window = spec.window
    failed = any(n is None for n in legs.values())
    full = {leg for leg, n in legs.items() if n is not None and n >= window}
    rows: dict[str, Mapping[str, Any]] = {f.id: ranked.fields[f.id] for f in ranked.candidates}
    unit = CountUnit.DOCUMENT if spec.group_by_document else CountUnit.CHUNK
    # ``counted`` is what the rows stand for (the facets' basis); the total may bound more.
    fallback = False
    if spec.min_score is not None:
        scope, exact = CountScope.WINDOW, not failed and not full
        counted = scope
    elif Leg.SPARSE.value not in full:
        # The sparse leg returned every keyword match (or takes no part): the window
        # holds the whole basis.
        scope, exact = CountScope.MATCHES, not failed
        counted = scope
    elif tracking is TotalTracking.WINDOW:
        scope, exact = CountScope.WINDOW, False
        counted = scope
    elif matches is not None:
        scope, exact = CountScope.MATCHES, not failed and matches.complete
        counted = scope
        for hit in matches.hits:
            rows.setdefault(hit.chunk_id, hit.fields)
    else:
        # Matches past the window, not counted: the total bounds them from what is known.
        scope, exact, counted = CountScope.MATCHES, False, CountScope.WINDOW
        fallback = tracking is TotalTracking.EXACT
    total = _units(rows, unit)
    if scope is CountScope.MATCHES and not exact and unit is CountUnit.CHUNK:
        # Matches were left out (past the window or the count limit, or a failed leg's).
        total = max(total, known_matches)
    totals = Totals(total=total, exact=exact, unit=unit, scope=scope)
    if not spec.facets:
        return Counted(totals, fallback=fallback)
    by_document = spec.facet_unit is CountUnit.DOCUMENT
    facets = compute_facets(list(rows.values()), spec.facets, group_by_document=by_document)
    basis = FacetBasis(unit=spec.facet_unit, scope=counted, exact=exact)
    return Counted(totals, tuple(facets), basis, fallback=fallback)


def _units(rows: Mapping[str, Mapping[str, Any]], unit: CountUnit) -> int:
    if unit is CountUnit.CHUNK:
        return len(rows)
    return len({str(fields.get("document_id", chunk)) for chunk, fields in rows.items()})


def taking_part(
    answered: Mapping[str, Sequence[object]], failed: Collection[str]
) -> dict[str, int | None]:
    """``legs`` for :func:`count`: each leg that answered with its candidate count, each
    leg that failed with ``None``."""
    return {**{leg: len(hits) for leg, hits in answered.items()}, **dict.fromkeys(failed)}
