"""The planner: a request validated once into an immutable, hashable plan that says
which legs run, how deep, for how long, and how the result is ranked."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from hsearch.config import SearchSettings
from hsearch.embedding.protocol import EncoderInfo, SparseKind
from hsearch.errors import InvalidFusionError, InvalidRequestError
from hsearch.search.facets import FacetRange, FacetRequest
from hsearch.search.models import SearchQuery
from hsearch.search.planner import LegPlan, LegRole, QueryPlanner, SearchPlan
from hsearch.search.sorting import SCORE, SortClause, SortOrder
from hsearch.search.sources import Level, Need, SourceQuery, store_sources
from hsearch.types import CountUnit, FusionDefault, FusionMethod, Leg, SearchMode, TotalTracking
from hsearch.vectorstore.filters import And, parse_filter
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch.vectorstore.protocol import StoredHit

MULTILINGUAL = EncoderInfo("enc", 8, "1", SparseKind.TERM_FREQUENCY)
LATIN_ONLY = dataclasses.replace(MULTILINGUAL, dense_scripts=frozenset({"LATIN"}))
BASE: dict[str, Any] = {"tenant_id": "t", "query": "rivers and the sea"}


class Tuned:
    """A source that takes parameters (as the graph leg does), checked at planning."""

    name = "tuned"
    needs = frozenset({Need.HITS})
    level = Level.DOCUMENT
    modes = frozenset(SearchMode)
    default_weight = 0.0

    def parse_params(self, raw: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
        if raw and set(raw) - {"k"}:
            raise InvalidRequestError(f"tuned.{sorted(set(raw) - {'k'})[0]}: unknown field")
        return tuple(sorted((raw or {}).items()))

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        return []


SOURCES = store_sources(InMemoryVectorStore())
TUNED = store_sources(InMemoryVectorStore(), Tuned())


def planner(encoder: EncoderInfo = MULTILINGUAL, **settings: Any) -> QueryPlanner:
    return QueryPlanner(
        SearchSettings(**settings), encoder=encoder, can_rerank=True, sources=SOURCES
    )


def tuned(**query: Any) -> SearchPlan:
    """The plan of ``query`` by a planner whose sources take parameters (:class:`Tuned`)."""
    planning = QueryPlanner(SearchSettings(), encoder=MULTILINGUAL, can_rerank=True, sources=TUNED)
    return planning.plan(SearchQuery(**query))


def plan(encoder: EncoderInfo = MULTILINGUAL, **query: Any) -> SearchPlan:
    return planner(encoder).plan(SearchQuery(**{**BASE, **query}))


def containers(value: object) -> list[type]:
    """The mutable containers anywhere inside ``value`` (a plan must hold none)."""
    if isinstance(value, list | dict | set | bytearray):
        return [type(value)]
    if isinstance(value, tuple | frozenset):
        return [t for item in value for t in containers(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [t for f in dataclasses.fields(value) for t in containers(getattr(value, f.name))]
    return []


FULL: dict[str, Any] = {
    **BASE,
    "top_k": 5,
    "offset": 5,
    "mode": SearchMode.HYBRID,
    "fusion": FusionMethod.RRF,
    "rrf_k": 30,
    "weights": {Leg.DENSE: 0.6, Leg.SPARSE: 0.4},
    "filter": {"and": [{"source": {"in": ["a", "b"]}}, {"metadata.year": {"gte": 2000}}]},
    "candidates": 50,
    "leg_timeout_s": 0.5,
    "min_score": 0.01,
    "group_by_document": True,
    "facets": (FacetRequest("source"), FacetRequest("metadata.year", ranges=(FacetRange(to=1),))),
    "facet_unit": CountUnit.CHUNK,
    "highlight": False,
    "track_total": TotalTracking.WINDOW,
    "rerank": True,
    "typo_tolerance": False,
    "prefix": True,
    "required_filter": parse_filter({"tags": {"contains": "team-a"}}),
    "sort": (SortClause("metadata.year", SortOrder.DESC), SortClause(SCORE, SortOrder.DESC)),
    "leg_params": {"tuned": {"k": 1}},
    "include_linked": True,
}


def test_equal_queries_give_equal_plans_with_equal_hashes() -> None:
    first, second = tuned(**FULL), tuned(**FULL)
    assert first == second
    assert hash(first) == hash(second)
    assert first is not second
    assert containers(first) == [], "a plan holds tuples and frozen values only"
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.query = "other"  # type: ignore[misc]  # frozen: the assignment must fail


CHANGES: list[tuple[str, object]] = [
    ("tenant_id", "other"),
    ("query", "mountains"),
    ("top_k", 6),
    ("offset", 0),
    ("mode", SearchMode.KEYWORD),
    ("fusion", FusionMethod.SCORE),
    ("rrf_k", 31),
    ("weights", {Leg.DENSE: 0.6, Leg.SPARSE: 0.5}),
    ("filter", {"source": {"in": ["a"]}}),
    ("candidates", 51),
    ("leg_timeout_s", 0.6),
    ("min_score", 0.02),
    ("group_by_document", False),
    ("facets", (FacetRequest("source", size=3),)),
    ("facet_unit", CountUnit.DOCUMENT),
    ("highlight", True),
    ("track_total", TotalTracking.EXACT),
    ("rerank", False),
    ("typo_tolerance", True),
    ("prefix", False),
    ("required_filter", parse_filter({"tags": {"contains": "team-b"}})),
    ("sort", (SortClause("metadata.year", SortOrder.ASC), SortClause(SCORE, SortOrder.DESC))),
    ("leg_params", {"tuned": {"k": 2}}),
    ("include_linked", False),
]
VALIDATION_ONLY = {"max_top_k"}  # refuses a request, never changes a result


# The service resolves a cursor into the offset (or a kept page) before planning.
RESOLVED_BEFORE_PLANNING = {"cursor"}


def test_every_field_of_a_query_is_probed() -> None:
    fields = {f.name for f in dataclasses.fields(SearchQuery)}
    fields -= VALIDATION_ONLY | RESOLVED_BEFORE_PLANNING
    assert fields == {f for f, _ in CHANGES} == set(FULL)


def test_a_sources_parameters_are_checked_by_it_and_unknown_legs_refused() -> None:
    with pytest.raises(InvalidRequestError, match=r"tuned\.depth: unknown field"):
        tuned(**BASE, leg_params={"tuned": {"depth": 2}})
    with pytest.raises(InvalidRequestError, match="dense: no such leg on this server takes"):
        tuned(**BASE, leg_params={"dense": {"k": 2}})
    with pytest.raises(InvalidRequestError, match="graph: no such leg"):
        tuned(**BASE, leg_params={"graph": {}})
    assert tuned(**BASE, leg_params={"tuned": {"k": 3}}).params_of("tuned") == (("k", 3),)
    assert tuned(**BASE).params_of("tuned") is None


def test_a_required_filter_is_anded_with_the_request_filter() -> None:
    required = parse_filter({"tags": {"contains": "team-a"}})
    asked = {"or": [{"source": {"eq": "a"}}, {"tags": {"contains": "team-b"}}]}
    asked_tree = parse_filter(asked)
    assert required is not None
    assert asked_tree is not None
    assert plan(required_filter=required, filter=asked).filter == And((required, asked_tree))
    assert plan(required_filter=required).filter == required


def test_a_token_limit_on_top_k_refuses_larger_pages() -> None:
    assert plan(top_k=5, max_top_k=5).ranking.top_k == 5
    with pytest.raises(InvalidRequestError, match="at most 5"):
        plan(top_k=6, max_top_k=5)


@pytest.mark.parametrize(("field", "value"), CHANGES)
def test_every_field_that_changes_the_result_changes_the_plan(field: str, value: object) -> None:
    assert FULL[field] != value
    changed = tuned(**{**FULL, field: value})
    assert changed != tuned(**FULL)
    assert hash(changed) != hash(tuned(**FULL))


def test_requests_with_the_same_result_give_the_same_plan() -> None:
    # An omitted weight is 0; the default weights spelt out are the defaults.
    assert plan(weights={Leg.DENSE: 1.0}) == plan(weights={Leg.DENSE: 1.0, Leg.SPARSE: 0.0})
    defaults = SearchSettings().resolve_fusion(MULTILINGUAL.fusion)
    assert plan(weights=defaults.leg_weights()) == plan()
    assert plan(fusion=defaults.method) == plan()  # the encoder's default
    assert plan(rrf_k=defaults.k) == plan()


DECLARING = dataclasses.replace(
    MULTILINGUAL, fusion=FusionDefault.of("adaptive", {"dense": 0.9, "sparse": 0.1}, k=40)
)


def test_the_plan_fuses_as_the_encoder_declares() -> None:
    ranking = plan(DECLARING).ranking
    assert ranking.method is FusionMethod.ADAPTIVE
    assert ranking.configured() == {"dense": 0.9, "sparse": 0.1}
    assert ranking.rrf_k == 40
    # A request's method other than the encoder's: that method's fallbacks, not the
    # encoder's weights and k.
    rrf = plan(DECLARING, fusion=FusionMethod.RRF).ranking
    assert (rrf.configured(), rrf.rrf_k) == ({"dense": 0.7, "sparse": 0.3}, 60)
    # A request's weights and k come first.
    mine = plan(DECLARING, weights={Leg.SPARSE: 1.0}, rrf_k=5).ranking
    assert (mine.configured(), mine.rrf_k) == ({"dense": 0.0, "sparse": 1.0}, 5)


def test_the_operators_settings_override_the_encoder() -> None:
    query = SearchQuery(**BASE)
    ranking = planner(DECLARING, fusion="score").plan(query).ranking
    assert ranking.method is FusionMethod.SCORE
    assert ranking.configured() == {"dense": 0.7, "sparse": 0.3}
    ranking = planner(DECLARING, adaptive_weights={"dense": 0.5, "sparse": 0.5}).plan(query).ranking
    assert (ranking.method, ranking.configured()) == ("adaptive", {"dense": 0.5, "sparse": 0.5})
    assert planner(DECLARING, rrf_k=7).plan(query).ranking.rrf_k == 7
    # The planner resolves exactly as the settings do (the one place).
    settings = SearchSettings(rrf_weights={"dense": 0.2, "sparse": 0.8})
    for method in (None, *FusionMethod):
        expected = settings.resolve_fusion(DECLARING.fusion, method)
        got = QueryPlanner(settings, encoder=DECLARING, can_rerank=False, sources=SOURCES).plan(
            SearchQuery(**BASE, fusion=method)
        )
        assert (got.ranking.method, got.ranking.rrf_k) == (expected.method, expected.k)
        assert got.ranking.weights == expected.weights


@pytest.mark.parametrize("top_k", [1, 10, 49, 50, 100])
def test_the_window_depends_on_neither_top_k_nor_the_offset(top_k: int) -> None:
    first = plan(top_k=top_k)
    for offset in (1, 7, 99):
        later = plan(top_k=top_k, offset=offset)
        assert later.candidates == first.candidates
        assert later.legs == first.legs
        assert later.counting_key() == first.counting_key()
        assert dataclasses.replace(later.ranking, offset=0) == first.ranking
    assert first.candidates == first.ranking.window == SearchSettings().candidates
    assert plan(top_k=10).counting_key() == plan(top_k=top_k).counting_key()


@pytest.mark.parametrize(("candidates", "offset"), [(None, 100), (None, 10_000), (50, 50)])
def test_a_page_past_the_window_is_refused_naming_the_bound(
    candidates: int | None, offset: int
) -> None:
    window = candidates or SearchSettings().candidates
    with pytest.raises(InvalidRequestError) as caught:
        plan(candidates=candidates, offset=offset)
    assert caught.value.message.startswith("offset: ")
    assert f"window of {window} results" in caught.value.message
    assert str(SearchSettings().max_candidates) in caught.value.message


def test_the_counting_key_keeps_what_changes_the_count() -> None:
    assert plan(query="a").counting_key() != plan(query="b").counting_key()
    assert plan(candidates=50).counting_key() != plan().counting_key()
    assert plan(rerank=True, highlight=False).counting_key() == plan().counting_key()
    modes = {plan(track_total=tracking).counting_key() for tracking in TotalTracking}
    assert len(modes) == len(TotalTracking)
    assert plan().track_total is TotalTracking.BOUND
    # The order of the window changes no count: every order of a query shares them.
    newest = (SortClause("metadata.year", SortOrder.DESC),)
    assert plan(sort=newest).counting_key() == plan().counting_key()


def test_the_plan_holds_the_sort_normalised() -> None:
    year = SortClause("metadata.year", SortOrder.DESC)
    assert plan(sort=(year,)).ranking.sort == (year, SortClause(SCORE, SortOrder.DESC))
    assert plan(sort=(SortClause(SCORE, SortOrder.DESC),)) == plan()
    with pytest.raises(InvalidRequestError, match=r"^sort\[0\]\.field: field 'text'"):
        plan(sort=(SortClause("text", SortOrder.ASC),))


def test_the_plan_carries_the_time_budget() -> None:
    assert plan().budget_s == SearchSettings().leg_timeout_s
    assert plan(leg_timeout_s=0.25).budget_s == 0.25


def roles(p: SearchPlan) -> dict[str, str]:
    return {lp.leg: lp.role.value for lp in p.legs}


@pytest.mark.parametrize(
    ("mode", "weights", "expected"),
    [
        (SearchMode.HYBRID, None, {"dense": "primary", "sparse": "primary"}),
        (SearchMode.SEMANTIC, None, {"dense": "primary"}),
        (SearchMode.KEYWORD, None, {"sparse": "primary"}),
        (SearchMode.HYBRID, {Leg.DENSE: 1.0}, {"dense": "primary", "sparse": "if_none_answered"}),
        (SearchMode.HYBRID, {Leg.SPARSE: 1.0}, {"dense": "if_none_answered", "sparse": "primary"}),
        (SearchMode.KEYWORD, {Leg.DENSE: 0.5, Leg.SPARSE: 0.5}, {"sparse": "primary"}),
    ],
)
def test_a_leg_with_weight_0_is_held_back(
    mode: SearchMode, weights: dict[Leg, float] | None, expected: dict[str, str]
) -> None:
    assert roles(plan(mode=mode, weights=weights)) == expected


def test_a_dense_leg_that_cannot_read_the_query_is_held_back() -> None:
    japanese = {"query": "日本の首都"}
    assert roles(plan(LATIN_ONLY, **japanese)) == {"dense": "if_no_hits", "sparse": "primary"}
    assert plan(LATIN_ONLY, **japanese).ranking.dense_unreadable
    # English, or an encoder that reads every script: both legs run.
    assert roles(plan(LATIN_ONLY)) == {"dense": "primary", "sparse": "primary"}
    assert roles(plan(MULTILINGUAL, **japanese)) == {"dense": "primary", "sparse": "primary"}
    # A semantic search has no sparse leg to fall back on: the dense leg runs.
    assert roles(plan(LATIN_ONLY, mode=SearchMode.SEMANTIC, **japanese)) == {"dense": "primary"}
    # With sparse weight 0 the rule gives both legs weight 1 when both find something.
    dense_only = {Leg.DENSE: 1.0}
    assert roles(plan(LATIN_ONLY, weights=dense_only, **japanese)) == {
        "dense": "primary",
        "sparse": "primary",
    }
    sparse_only = {Leg.SPARSE: 1.0}
    assert roles(plan(LATIN_ONLY, weights=sparse_only, **japanese)) == {
        "dense": "if_none_answered",
        "sparse": "primary",
    }


def test_when_a_held_back_leg_is_due() -> None:
    failed, empty, found = None, (), ("hit",)
    assert not LegRole.IF_NONE_ANSWERED.due([empty])
    assert not LegRole.IF_NONE_ANSWERED.due([failed, found])
    assert LegRole.IF_NONE_ANSWERED.due([failed])
    assert LegRole.IF_NONE_ANSWERED.due([failed, failed])
    assert not LegRole.IF_NO_HITS.due([found])
    assert LegRole.IF_NO_HITS.due([empty])
    assert LegRole.IF_NO_HITS.due([failed])
    assert LegRole.PRIMARY.due([found])
    assert plan().legs_in(LegRole.PRIMARY) == (Leg.DENSE, Leg.SPARSE)
    assert plan().legs == (
        LegPlan(Leg.DENSE, LegRole.PRIMARY),
        LegPlan(Leg.SPARSE, LegRole.PRIMARY),
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"min_score": math.nan}, "min_score"),
        ({"min_score": math.inf}, "min_score"),
        ({"leg_timeout_s": math.nan}, "leg_timeout_ms"),
        ({"weights": {Leg.DENSE: math.nan}}, "weights.dense"),
        ({"weights": {"graph": 1.0}}, "weights: unknown leg 'graph'; allowed: 'dense', 'sparse'"),
        ({"offset": -1}, "offset"),
        ({"facets": (FacetRequest("nowhere"),)}, "facets[0].field"),
    ],
)
def test_invalid_queries_are_refused_naming_the_field(query: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidRequestError, match=field.replace("[", r"\[").replace("]", r"\]")):
        plan(**query)


def test_rrf_k_and_rerank_are_checked_before_any_work() -> None:
    with pytest.raises(InvalidFusionError, match="rrf_k: must be an integer between 1 and 1000"):
        plan(rrf_k=1001)
    no_reranker = QueryPlanner(
        SearchSettings(), encoder=MULTILINGUAL, can_rerank=False, sources=SOURCES
    )
    with pytest.raises(InvalidRequestError, match="rerank: no reranker is configured"):
        no_reranker.plan(SearchQuery(**BASE, rerank=True))


class Seeded:
    """A source that reads the first round's candidates."""

    name = "seeded"
    needs = frozenset({Need.HITS})
    level = Level.DOCUMENT
    modes = frozenset({SearchMode.HYBRID})
    default_weight = 0.0

    async def search(self, query: SourceQuery, *, timeout: float) -> list[StoredHit]:
        return []


def test_a_source_reading_the_first_rounds_hits_runs_after_it_when_weighted() -> None:
    sources = store_sources(InMemoryVectorStore(), Seeded())
    p = QueryPlanner(SearchSettings(), encoder=MULTILINGUAL, can_rerank=False, sources=sources)
    weighted = p.plan(SearchQuery(**BASE, weights={"dense": 0.5, "seeded": 0.5}))
    assert roles(weighted) == {
        "dense": "primary",
        "sparse": "if_none_answered",
        "seeded": "seeded",
    }
    # Not weighed, it is not planned: it would have nothing to start from were it run
    # because every other leg failed.
    assert "seeded" not in roles(p.plan(SearchQuery(**BASE)))
    with pytest.raises(InvalidRequestError, match="weigh at least one of 'dense', 'sparse'"):
        p.plan(SearchQuery(**BASE, weights={"seeded": 1.0}))
    assert [lp.leg for lp in p.plan(SearchQuery(**BASE, mode=SearchMode.KEYWORD)).legs] == [
        "sparse"
    ]
    assert LegRole.SEEDED.due([None, ()])
    assert not LegRole.SEEDED.due([None, None])


def test_a_cursors_offset_is_checked_as_a_requests() -> None:
    p = planner()
    first = p.plan(SearchQuery(**BASE, candidates=20))
    assert p.at_offset(first, 10) == p.plan(SearchQuery(**BASE, candidates=20, offset=10))
    with pytest.raises(InvalidRequestError, match="offset: pages end at the window of 20"):
        p.at_offset(first, 20)
    with pytest.raises(InvalidRequestError, match="offset: must be >= 0"):
        p.at_offset(first, -1)
