"""Totals and facets count a declared basis, never the page (pure: hsearch.search.totals).

The default tracking is exact when the windows hold every match and otherwise a lower
bound from what is known; an exact count is there on request."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from hypothesis import given
from hypothesis import strategies as st

from hsearch.search.facets import FacetRequest
from hsearch.search.ranking import RankingSpec, rank
from hsearch.search.totals import Counted, Matches, count, match_fields
from hsearch.types import CountScope, CountUnit, FusionMethod, Leg, TotalRelation, TotalTracking
from hsearch.vectorstore.protocol import StoredHit

WINDOW = 4


def stored(chunk: str, score: float, *, doc: str, source: str = "wiki") -> StoredHit:
    return StoredHit(chunk, score, {"document_id": doc, "source": source, "text": chunk})


SPEC = RankingSpec(
    method=FusionMethod.RRF,
    weights=((Leg.DENSE, 0.5), (Leg.SPARSE, 0.5)),
    rrf_k=60,
    dense_unreadable=False,
    min_score=None,
    group_by_document=False,
    facets=(FacetRequest("source"),),
    facet_unit=CountUnit.CHUNK,
    window=WINDOW,
    offset=0,
    top_k=2,
)
# Dense: its window of four nearest chunks. Sparse: the best four of nine keyword matches
# (chunks k0..k8 of documents d0..d2, three chunks each), so its window is full.
DENSE = [stored(f"n{i}", 1 - i / 10, doc=f"e{i % 2}", source="news") for i in range(WINDOW)]
KEYWORD = [stored(f"k{i}", 9 - i, doc=f"d{i // 3}", source="wiki") for i in range(9)]
LEGS: dict[str, list[StoredHit]] = {Leg.DENSE: DENSE, Leg.SPARSE: KEYWORD[:WINDOW]}
# As the store returns matches: the chunk id and the fields counting needs, no text.
MATCHED = tuple(
    StoredHit(h.chunk_id, h.score, {k: h.fields[k] for k in match_fields(SPEC.facets)})
    for h in KEYWORD
)
ALL_MATCHES = Matches(MATCHED, limit=100)
TRUE_TOTAL = len(KEYWORD) + WINDOW  # every keyword match and the dense window, disjoint


def counted(
    spec: RankingSpec = SPEC,
    legs: Mapping[str, Sequence[StoredHit]] = LEGS,
    *,
    matches: Matches | None = ALL_MATCHES,
    failed: Collection[str] = (),
    tracking: TotalTracking = TotalTracking.EXACT,
    known: int = 0,
) -> Counted:
    ranked = rank(spec, {leg: hits for leg, hits in legs.items() if leg not in failed})
    taking = {leg: (None if leg in failed else len(hits)) for leg, hits in legs.items()}
    return count(spec, ranked, legs=taking, tracking=tracking, matches=matches, known_matches=known)


def buckets(result: Counted) -> dict[object, int]:
    (facet,) = result.facets
    return {b.value: b.count for b in facet.buckets}


def test_keyword_matches_past_the_window_are_counted_when_asked() -> None:
    result = counted()
    # Nine keyword matches and the dense leg's four nearest chunks.
    assert result.totals.total == TRUE_TOTAL == 13
    assert result.totals.exact
    assert result.totals.relation is TotalRelation.EQ
    assert result.totals.scope is CountScope.MATCHES
    assert buckets(result) == {"wiki": 9, "news": 4}
    assert result.facet_basis is not None
    assert result.facet_basis.exact


@given(
    offset=st.integers(0, WINDOW - 1),
    top_k=st.integers(1, WINDOW),
    group=st.booleans(),
    unit=st.sampled_from(CountUnit),
)
def test_the_page_changes_nothing_counted(
    offset: int, top_k: int, group: bool, unit: CountUnit
) -> None:
    base = dataclasses.replace(SPEC, group_by_document=group, facet_unit=unit)
    paged = dataclasses.replace(base, offset=offset, top_k=top_k)
    assert counted(paged) == counted(base)


def test_documents_are_counted_once() -> None:
    grouped = counted(
        dataclasses.replace(SPEC, group_by_document=True, facet_unit=CountUnit.DOCUMENT)
    )
    assert grouped.totals.unit is CountUnit.DOCUMENT
    assert grouped.totals.total == 3 + 2  # d0..d2 and e0, e1
    assert buckets(grouped) == {"wiki": 3, "news": 2}
    assert grouped.facet_basis is not None
    assert grouped.facet_basis.unit is CountUnit.DOCUMENT


def test_more_matches_than_the_count_limit_give_a_lower_bound() -> None:
    result = counted(matches=Matches(MATCHED[:6], limit=6))
    assert result.totals.total == 6 + WINDOW
    assert not result.totals.exact
    assert result.totals.relation is TotalRelation.GTE
    assert result.facet_basis is not None
    assert not result.facet_basis.exact
    # The statistics may know of more than the count limit let through.
    assert counted(matches=Matches(MATCHED[:6], limit=6), known=12).totals.total == 12


def test_an_exact_count_that_failed_falls_back_to_the_default_bound() -> None:
    result = counted(matches=None, known=9)
    assert result.fallback, "never reused: the next page counts again"
    assert result.totals.scope is CountScope.MATCHES
    assert (result.totals.total, result.totals.relation) == (9, TotalRelation.GTE)
    assert result.facet_basis is not None
    assert result.facet_basis.scope is CountScope.WINDOW
    assert result == dataclasses.replace(
        counted(matches=None, known=9, tracking=TotalTracking.BOUND), fallback=True
    )


def test_the_default_with_matches_past_the_window_gives_a_lower_bound() -> None:
    result = counted(matches=None, tracking=TotalTracking.BOUND)
    assert not result.fallback
    # What the legs returned: four keyword matches of nine, the dense leg's four.
    assert result.totals.total == 2 * WINDOW < TRUE_TOTAL
    assert result.totals.relation is TotalRelation.GTE
    assert not result.totals.exact
    assert result.totals.scope is CountScope.MATCHES  # what it bounds
    # The facets count the window, and say so.
    assert buckets(result) == {"wiki": WINDOW, "news": WINDOW}
    assert result.facet_basis is not None
    assert result.facet_basis.scope is CountScope.WINDOW
    assert not result.facet_basis.exact


def test_the_default_is_exact_when_the_windows_hold_every_match() -> None:
    legs: dict[str, list[StoredHit]] = {Leg.DENSE: DENSE, Leg.SPARSE: KEYWORD[:3]}
    result = counted(legs=legs, matches=None, tracking=TotalTracking.BOUND, known=3)
    assert (result.totals.total, result.totals.relation) == (3 + WINDOW, TotalRelation.EQ)
    assert result.totals.exact
    assert result.facet_basis is not None
    assert (result.facet_basis.scope, result.facet_basis.exact) == (CountScope.MATCHES, True)
    # And as the exact count gives it, without counting anything more.
    assert result == counted(legs=legs, matches=None)


def test_the_term_statistics_raise_the_default_bound() -> None:
    # Nine chunks hold the query's commonest term: more than the window's four of them.
    result = counted(matches=None, tracking=TotalTracking.BOUND, known=9)
    assert (result.totals.total, result.totals.relation) == (9, TotalRelation.GTE)
    assert 2 * WINDOW <= result.totals.total <= TRUE_TOTAL
    assert buckets(result) == {"wiki": WINDOW, "news": WINDOW}, "facets stay the window's"
    # A frequency below what the window holds changes nothing.
    low = counted(matches=None, tracking=TotalTracking.BOUND, known=2)
    assert low.totals.total == 2 * WINDOW


def test_documents_are_bounded_by_the_window_only() -> None:
    """A term's document frequency counts chunks: one document may hold many of them,
    so it says nothing of how many documents match."""
    spec = dataclasses.replace(SPEC, group_by_document=True, facet_unit=CountUnit.DOCUMENT)
    result = counted(spec, matches=None, tracking=TotalTracking.BOUND, known=9)
    assert result.totals.unit is CountUnit.DOCUMENT
    # d0, d1 (the sparse leg's k0..k3) and e0, e1: at most the five documents that match.
    assert (result.totals.total, result.totals.relation) == (4, TotalRelation.GTE)
    assert counted(spec).totals.total == 5


@given(
    known=st.integers(0, len(KEYWORD)),
    sparse=st.integers(0, len(KEYWORD)),
    window=st.integers(1, len(KEYWORD) + 1),
    group=st.booleans(),
)
def test_the_default_bound_lies_between_the_window_and_the_count(
    known: int, sparse: int, window: int, group: bool
) -> None:
    """Whatever the legs returned and the statistics know (at most the true number of
    keyword matches), the default total is at least the window's units and at most the
    exact count, and it is exact exactly when the sparse leg came back short."""
    known = min(known, sparse)  # the statistics count matches that exist
    spec = dataclasses.replace(SPEC, window=window, group_by_document=group)
    legs: dict[str, list[StoredHit]] = {
        Leg.DENSE: DENSE[:window],
        Leg.SPARSE: KEYWORD[: min(sparse, window)],
    }
    matches = Matches(MATCHED[:sparse], limit=100)
    exact = counted(spec, legs, matches=matches)
    bound = counted(spec, legs, matches=None, tracking=TotalTracking.BOUND, known=known)
    window_only = counted(spec, legs, matches=None, tracking=TotalTracking.WINDOW)
    assert exact.totals.exact
    assert window_only.totals.total <= bound.totals.total <= exact.totals.total
    assert bound.totals.exact is (sparse < window)
    if bound.totals.exact:
        assert bound == exact


def test_window_tracking_counts_the_window_only() -> None:
    result = counted(matches=None, tracking=TotalTracking.WINDOW, known=9)
    assert result.totals.scope is CountScope.WINDOW
    assert (result.totals.total, result.totals.relation) == (2 * WINDOW, TotalRelation.GTE)
    assert not result.fallback


def test_a_sparse_leg_short_of_its_window_returned_every_match() -> None:
    legs: dict[str, list[StoredHit]] = {Leg.DENSE: DENSE, Leg.SPARSE: KEYWORD[:3]}
    result = counted(legs=legs, matches=None)
    assert result.totals.scope is CountScope.MATCHES
    assert result.totals.exact
    assert result.totals.total == 3 + WINDOW


def test_semantic_counts_its_declared_window() -> None:
    result = counted(legs={Leg.DENSE: DENSE}, matches=None)
    assert (result.totals.total, result.totals.exact) == (WINDOW, True)
    assert result.totals.scope is CountScope.MATCHES


def test_a_failed_leg_makes_the_total_a_lower_bound() -> None:
    result = counted(failed=[Leg.DENSE])
    assert result.totals.total == 9
    assert not result.totals.exact


def test_min_score_counts_the_window_above_it() -> None:
    # RRF, weights 0.5: every hit at rank r of one leg scores 0.5 / (60 + r).
    spec = dataclasses.replace(SPEC, min_score=0.5 / 61.5)
    result = counted(spec)
    assert result.totals.scope is CountScope.WINDOW
    assert result.totals.total == 2  # n0 and k0, ranked first by their legs
    assert not result.totals.exact  # both windows were full: more could pass
    short: dict[str, list[StoredHit]] = {Leg.DENSE: DENSE[:2], Leg.SPARSE: KEYWORD[:2]}
    assert counted(spec, short).totals.exact


def test_no_facets_asked_for_none_counted() -> None:
    result = counted(dataclasses.replace(SPEC, facets=()))
    assert result.facets == ()
    assert result.facet_basis is None


def test_match_fields_are_the_document_and_the_facets_top_fields() -> None:
    facets = (FacetRequest("source"), FacetRequest("metadata.year"), FacetRequest("metadata.a"))
    assert match_fields(facets) == ("document_id", "source", "metadata")
    assert match_fields(()) == ("document_id",)
