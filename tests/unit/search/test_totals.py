"""Totals and facets count a declared basis, never the page (pure: hsearch.search.totals)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from hypothesis import given
from hypothesis import strategies as st

from hsearch.search.facets import FacetRequest
from hsearch.search.ranking import RankingSpec, rank
from hsearch.search.totals import Counted, Matches, count, match_fields
from hsearch.types import CountScope, CountUnit, FusionMethod, Leg
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


def counted(
    spec: RankingSpec = SPEC,
    legs: Mapping[str, Sequence[StoredHit]] = LEGS,
    *,
    matches: Matches | None = ALL_MATCHES,
    failed: Collection[str] = (),
) -> Counted:
    ranked = rank(spec, {leg: hits for leg, hits in legs.items() if leg not in failed})
    taking = {leg: (None if leg in failed else len(hits)) for leg, hits in legs.items()}
    return count(spec, ranked, legs=taking, matches=matches)


def buckets(result: Counted) -> dict[object, int]:
    (facet,) = result.facets
    return {b.value: b.count for b in facet.buckets}


def test_keyword_matches_past_the_window_are_counted() -> None:
    result = counted()
    # Nine keyword matches and the dense leg's four nearest chunks.
    assert result.totals.total == 13
    assert result.totals.exact
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
    assert result.facet_basis is not None
    assert not result.facet_basis.exact


def test_matches_not_counted_fall_back_to_the_window() -> None:
    result = counted(matches=None)
    assert result.totals.scope is CountScope.WINDOW
    assert result.totals.total == 2 * WINDOW
    assert not result.totals.exact


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
