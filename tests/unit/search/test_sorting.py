"""Sorting the window by fields (pure): parsing and validating sort clauses, their
normal form, and the order of values (kinds, missing values last, lists, ties)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import InvalidRequestError
from hsearch.search.sorting import (
    MAX_SORT_CLAUSES,
    SCORE,
    SortClause,
    SortOrder,
    parse_sort,
    sort_window,
    validate_sort,
)

ASC, DESC = SortOrder.ASC, SortOrder.DESC
BY_SCORE = SortClause(SCORE, DESC)

Row = dict[str, Any]


def fields(row: Row) -> Mapping[str, object]:
    return row


def ids(rows: list[Row]) -> list[str]:
    return [row["id"] for row in rows]


def ordered(rows: list[Row], *clauses: SortClause) -> list[str]:
    return ids(sort_window(rows, validate_sort(clauses), fields=fields))


def doc(name: str, **metadata: Any) -> Row:
    return {"id": name, "metadata": metadata}


# --------------------------------------------------------------------------- parsing


def test_clauses_as_objects_strings_and_fields_with_an_order() -> None:
    assert parse_sort(
        [{"field": "metadata.year", "order": "desc"}, "source", "lang:desc", "_score"]
    ) == (
        SortClause("metadata.year", DESC),
        SortClause("source", ASC),
        SortClause("lang", DESC),
        BY_SCORE,
    )


def test_default_orders_score_descending_fields_ascending() -> None:
    assert parse_sort([{"field": "title"}]) == (SortClause("title", ASC), BY_SCORE)
    assert parse_sort(["_score:asc"]) == (SortClause(SCORE, ASC),)
    assert parse_sort([{"field": "title", "order": None}]) == (SortClause("title", ASC), BY_SCORE)


def test_relevance_alone_is_the_empty_sort() -> None:
    for raw in (None, [], ["_score"], ["_score:desc"], [{"field": "_score"}]):
        assert parse_sort(raw) == ()


def test_the_normal_form_ends_at_the_first_score_clause() -> None:
    assert parse_sort(["metadata.year:desc"]) == (SortClause("metadata.year", DESC), BY_SCORE)
    assert parse_sort(["_score:asc", "title"]) == (SortClause(SCORE, ASC),)
    assert parse_sort(["source", "_score", "title"]) == (SortClause("source", ASC), BY_SCORE)


def test_every_sortable_field_is_accepted() -> None:
    for field in ("external_id", "title", "source", "lang", "created_at", "metadata.a.b-c_1"):
        assert parse_sort([field]) == (SortClause(field, ASC), BY_SCORE)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("metadata.year", "sort: expected a list of sort clauses"),
        ([42], "sort[0]: expected a field"),
        (["nope"], "sort[0].field: field 'nope' is not sortable; sortable: _score, external_id, "),
        (["tags"], "sort[0].field: field 'tags' is not sortable"),
        (["tenant_id"], "sort[0].field: field 'tenant_id' is not sortable"),
        (["text"], "sort[0].field: field 'text' is not sortable"),
        (["title", "metadata"], "sort[1].field: field 'metadata' is a JSON object"),
        (["metadata.a b"], "sort[0].field: key 'a b' is not allowed in a metadata path"),
        (["title:up"], "sort[0]: unknown order 'up'; allowed: 'asc', 'desc'"),
        (["title:"], "sort[0]: unknown order ''"),
        ([{"field": "title", "order": "DESC"}], "sort[0].order: unknown order 'DESC'"),
        ([{"field": "title", "order": 1}], "sort[0].order: unknown order 1"),
        ([{"order": "asc"}], "sort[0].field: required; sortable: _score"),
        ([{"field": 3}], "sort[0].field: expected a field path, got a number"),
        ([{"field": "title", "by": "x"}], "sort[0]: unknown key 'by'; allowed: field, order"),
        (["title", "title:desc"], "sort[1].field: 'title' is sorted on already"),
        (["_score", "nope"], "sort[1].field: field 'nope' is not sortable"),
        (["title"] * (MAX_SORT_CLAUSES + 1), f"sort: at most {MAX_SORT_CLAUSES} sort clauses"),
    ],
)
def test_invalid_clauses_are_refused_naming_the_clause(raw: object, message: str) -> None:
    with pytest.raises(InvalidRequestError) as refused:
        parse_sort(raw)
    assert str(refused.value).startswith(message), str(refused.value)
    assert type(refused.value) is InvalidRequestError  # 422 invalid_request


def test_an_unparsed_clause_is_validated_too() -> None:
    with pytest.raises(InvalidRequestError, match=r"^sort\[0\]\.order: unknown order 'desc'"):
        validate_sort([SortClause("title", "desc")])  # type: ignore[arg-type]  # a plain str
    with pytest.raises(InvalidRequestError, match=r"^sort\[0\]\.field: field 'body'"):
        validate_sort([SortClause("body", ASC)])


# --------------------------------------------------------------------------- ordering


def test_numbers_sort_by_value_in_either_order() -> None:
    rows = [doc("a", year=2001), doc("b", year=1999.5), doc("c", year=2024), doc("d", year=-3)]
    assert ordered(rows, SortClause("metadata.year", ASC)) == ["d", "b", "a", "c"]
    assert ordered(rows, SortClause("metadata.year", DESC)) == ["c", "a", "b", "d"]


def test_a_unit_without_the_field_sorts_last_in_either_order() -> None:
    rows = [
        doc("none"),
        doc("mid", year=2000),
        doc("null", year=None),
        doc("old", year=1990),
        doc("empty", year=""),
        doc("object", year={"y": 1}),
        doc("nan", year=float("nan")),
        doc("list", year=[]),
        {"id": "no-metadata"},
        doc("new", year=2020),
    ]
    missing = ["none", "null", "empty", "object", "nan", "list", "no-metadata"]
    assert ordered(rows, SortClause("metadata.year", ASC)) == ["old", "mid", "new", *missing]
    assert ordered(rows, SortClause("metadata.year", DESC)) == ["new", "mid", "old", *missing]


def test_iso_dates_sort_as_written() -> None:
    rows = [
        doc("may", published="2024-05-01"),
        doc("jan-late", published="2024-01-31T23:59:59Z"),
        doc("last-year", published="2023-12-31"),
        doc("jan", published="2024-01-31"),
    ]
    newest = ordered(rows, SortClause("metadata.published", DESC))
    assert newest == ["may", "jan-late", "jan", "last-year"]
    assert ordered(rows, SortClause("metadata.published", ASC)) == newest[::-1]


def test_strings_sort_case_insensitively_then_by_code_point() -> None:
    rows = [{"id": t, "title": t} for t in ("banana", "Apple", "apple", "Cherry", "éclair")]
    assert ordered(rows, SortClause("title", ASC)) == [
        "Apple",
        "apple",
        "banana",
        "Cherry",
        "éclair",
    ]
    assert ordered(rows, SortClause("title", DESC)) == [
        "éclair",
        "Cherry",
        "banana",
        "apple",
        "Apple",
    ]


def test_mixed_kinds_numbers_then_strings_then_booleans_and_desc_is_the_reverse() -> None:
    rows = [doc("t", v=True), doc("s", v="x"), doc("n", v=3), doc("f", v=False), doc("m", v=1.5)]
    assert ordered(rows, SortClause("metadata.v", ASC)) == ["m", "n", "s", "f", "t"]
    assert ordered(rows, SortClause("metadata.v", DESC)) == ["t", "f", "s", "n", "m"]


def test_a_list_sorts_by_its_smallest_ascending_and_its_largest_descending() -> None:
    rows = [doc("wide", y=[1, 9]), doc("low", y=[2, 3]), doc("high", y=[8, None, {"z": 0}])]
    assert ordered(rows, SortClause("metadata.y", ASC)) == ["wide", "low", "high"]
    assert ordered(rows, SortClause("metadata.y", DESC)) == ["wide", "high", "low"]


def test_nested_metadata_paths() -> None:
    rows = [doc("b", author={"name": "Bo"}), doc("a", author={"name": "Al"}), doc("x", author=1)]
    assert ordered(rows, SortClause("metadata.author.name", ASC)) == ["a", "b", "x"]


def test_ties_keep_the_relevance_order_and_later_clauses_break_them() -> None:
    rows = [
        doc("r1", year=2000, rank=2),
        doc("r2", year=2010, rank=1),
        doc("r3", year=2000, rank=1),
        doc("r4", year=2010, rank=1),
        doc("r5", year=2000, rank=2),
    ]
    assert ordered(rows, SortClause("metadata.year", DESC)) == ["r2", "r4", "r1", "r3", "r5"]
    by_both = ordered(rows, SortClause("metadata.year", ASC), SortClause("metadata.rank", ASC))
    assert by_both == ["r3", "r1", "r5", "r2", "r4"]
    # A missing value sorts last, and ties among the missing keep their order too.
    rows = [doc("m1"), doc("y", year=1), doc("m2")]
    assert ordered(rows, SortClause("metadata.year", DESC)) == ["y", "m1", "m2"]


def test_score_sorts_by_the_relevance_order() -> None:
    rows = [doc(f"r{i}", group=i % 2) for i in range(5)]
    assert ordered(rows, SortClause(SCORE, ASC)) == ["r4", "r3", "r2", "r1", "r0"]
    assert ordered(rows, SortClause(SCORE, DESC)) == ids(rows)
    # Within each group, worst first: _score ascending as the second clause.
    by_group = ordered(rows, SortClause("metadata.group", ASC), SortClause(SCORE, ASC))
    assert by_group == ["r4", "r2", "r0", "r3", "r1"]


def test_no_clause_keeps_the_order() -> None:
    rows = [doc("b", y=2), doc("a", y=1)]
    assert ids(sort_window(rows, (), fields=fields)) == ["b", "a"]


def test_units_are_sorted_as_they_are_given_not_copied() -> None:
    units = [(object(), 1), (object(), 2)]
    table = {id(units[0][0]): {"source": "z"}, id(units[1][0]): {"source": "a"}}
    out = sort_window(
        units, validate_sort([SortClause("source", ASC)]), fields=lambda u: table[id(u[0])]
    )
    assert out[0] is units[1]
    assert out[1] is units[0]


values = st.one_of(
    st.none(),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.text(max_size=3),
    st.booleans(),
    st.lists(st.integers(-5, 5), max_size=3),
)


@given(
    rows=st.lists(values, max_size=25),
    order=st.sampled_from(list(SortOrder)),
)
def test_any_values_give_a_permutation_with_the_missing_last(
    rows: list[object], order: SortOrder
) -> None:
    window = [doc(f"r{i}", v=v) for i, v in enumerate(rows)]
    out = sort_window(window, validate_sort([SortClause("metadata.v", order)]), fields=fields)
    assert sorted(ids(out)) == sorted(ids(window))
    has_value = [
        not (
            r["metadata"]["v"] is None
            or r["metadata"]["v"] == ""
            or r["metadata"]["v"] == []
            or r["metadata"]["v"] != r["metadata"]["v"]  # NaN
        )
        for r in out
    ]
    assert has_value == sorted(has_value, reverse=True)  # every missing one after the rest
    again = sort_window(out, validate_sort([SortClause("metadata.v", order)]), fields=fields)
    assert ids(again) == ids(out)  # sorting a sorted window changes nothing
