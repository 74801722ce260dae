"""What a query's total and facets count, and the counting itself (pure, no I/O).

A query's total and facets are independent of ``top_k`` and ``offset``: they count one
declared set of hits, its *basis*, and the response says which (``docs/search.md``,
"Totals and facets").

* **matches** (:attr:`CountScope.MATCHES`, the default): every chunk that holds a
  keyword query term under the filter (the sparse leg's matches: an inverted index finds
  them all, counted up to ``search.count_limit``), together with the dense leg's
  ``window`` nearest chunks under the filter (a dense leg ranks every chunk, so its
  basis is the window the request declares, not "everything"). A leg the plan skipped
  takes no part.
* **window** (:attr:`CountScope.WINDOW`): the fused window only, what the legs returned.
  It is the basis when ``min_score`` is set (a chunk the legs did not return has no
  fused score to compare), and the fallback when the keyword matches could not be
  counted in time.

The total counts the page's unit (documents when grouping by document, else chunks);
facets count documents unless the request asks for chunks. A total is exact when every
part of its basis was counted in full; otherwise it is a lower bound and
``exact`` is false: a leg that failed, matches beyond ``count_limit``, or, for the
window basis, a leg that filled its window (more would have followed).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hsearch.search.facets import FacetRequest, FacetResult, compute_facets
from hsearch.search.ranking import Ranked, RankingSpec
from hsearch.types import CountScope, CountUnit, Leg
from hsearch.vectorstore.protocol import StoredHit

__all__ = ["Counted", "FacetBasis", "Matches", "Totals", "count", "match_fields"]


@dataclass(frozen=True, slots=True)
class Totals:
    total: int
    """How many units the basis holds (a lower bound unless ``exact``)."""
    exact: bool
    unit: CountUnit
    scope: CountScope


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
    matches: Matches | None,
) -> Counted:
    """The total and facets of a query.

    ``legs`` holds each leg that takes part in the query (not skipped) with how many
    candidates it returned, ``None`` for a leg that failed or missed its deadline.
    ``matches`` are the keyword matches, or ``None`` when they were not counted (no
    sparse leg, or the count failed).
    """
    window = spec.window
    failed = any(n is None for n in legs.values())
    full = {leg for leg, n in legs.items() if n is not None and n >= window}
    rows: dict[str, Mapping[str, Any]] = {f.id: ranked.fields[f.id] for f in ranked.candidates}
    if spec.min_score is not None:
        scope, exact = CountScope.WINDOW, not failed and not full
    elif Leg.SPARSE.value not in full:
        # The sparse leg returned every keyword match (or takes no part): the window
        # holds the whole basis.
        scope, exact = CountScope.MATCHES, not failed
    elif matches is None:
        scope, exact = CountScope.WINDOW, False
    else:
        scope, exact = CountScope.MATCHES, not failed and matches.complete
        for hit in matches.hits:
            rows.setdefault(hit.chunk_id, hit.fields)
    unit = CountUnit.DOCUMENT if spec.group_by_document else CountUnit.CHUNK
    totals = Totals(total=_units(rows, unit), exact=exact, unit=unit, scope=scope)
    if not spec.facets:
        return Counted(totals)
    by_document = spec.facet_unit is CountUnit.DOCUMENT
    facets = compute_facets(list(rows.values()), spec.facets, group_by_document=by_document)
    basis = FacetBasis(unit=spec.facet_unit, scope=scope, exact=exact)
    return Counted(totals, tuple(facets), basis)


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
