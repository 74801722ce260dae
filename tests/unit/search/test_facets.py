"""Facet counting: terms and ranges, per hit or per document, validation."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import HsearchError, InvalidFilterError, InvalidRequestError
from hsearch.search.facets import (
    MAX_FACET_SIZE,
    MAX_FACETS,
    MAX_RANGES,
    FacetBucket,
    FacetRange,
    FacetRequest,
    FacetResult,
    compute_facets,
    parse_facet_requests,
    validate_facet_requests,
)


def hit(document_id: str, **fields: Any) -> dict[str, Any]:
    return {"chunk_id": f"{document_id}-{len(fields)}", "document_id": document_id, **fields}


HITS = [
    hit(
        "d1",
        source="wiki",
        lang="en",
        tags=["a", "b"],
        created_at=10,
        metadata={"year": 2000, "author": {"name": "Ada"}},
    ),
    hit(
        "d1",
        source="wiki",
        lang="en",
        tags=["b", "c", "b"],
        created_at=10,
        metadata={"year": 2000.0},
    ),
    hit(
        "d2",
        source="blog",
        lang="ja",
        tags=[],
        created_at=25,
        metadata={"year": "2000", "author": {"name": "Grace"}},
    ),
    hit(
        "d3",
        source="wiki",
        lang="en",
        tags=["a"],
        created_at=40,
        metadata={"year": None, "flag": True},
    ),
    hit("d4", source="news", lang="de", tags=["c"], created_at=99, metadata={}),
]


def one(
    request: FacetRequest, *, group: bool = False, hits: list[dict[str, Any]] = HITS
) -> FacetResult:
    (result,) = compute_facets(hits, [request], group_by_document=group)
    return result


def terms(result: FacetResult) -> list[tuple[Any, int]]:
    return [(b.value, b.count) for b in result.buckets]


# --------------------------------------------------------------------------- terms


def test_terms_per_hit_sorted_by_count_then_value() -> None:
    result = one(FacetRequest("source"))
    assert result == FacetResult(
        field="source",
        buckets=(FacetBucket("wiki", 3), FacetBucket("blog", 1), FacetBucket("news", 1)),
        missing=0,
        other=0,
    )


def test_terms_per_document_count_each_document_once() -> None:
    assert terms(one(FacetRequest("source"), group=True)) == [("wiki", 2), ("blog", 1), ("news", 1)]
    assert terms(one(FacetRequest("lang"), group=True)) == [("en", 2), ("de", 1), ("ja", 1)]


def test_an_empty_string_is_missing_not_a_bucket() -> None:
    # A document sent without a language is stored with lang "" (the column has no null).
    hits = [*HITS, hit("d5", source="", lang="", tags=["", "a"], created_at=1, metadata={})]
    result = one(FacetRequest("lang"), hits=hits)
    assert "" not in [b.value for b in result.buckets]
    assert (terms(result), result.missing) == ([("en", 3), ("de", 1), ("ja", 1)], 1)
    assert one(FacetRequest("source"), hits=hits).missing == 1
    assert ("", 1) not in terms(one(FacetRequest("tags"), hits=hits))
    grouped = one(FacetRequest("lang"), hits=hits, group=True)
    assert (terms(grouped), grouped.missing) == ([("en", 2), ("de", 1), ("ja", 1)], 1)


def test_array_elements_count_once_per_unit() -> None:
    # per hit: a in 2 hits, b in 2 hits (once in hit 2 despite the duplicate), c in 2 hits
    result = one(FacetRequest("tags"))
    assert terms(result) == [("a", 2), ("b", 2), ("c", 2)]
    assert result.missing == 1  # the empty array
    # per document: d1 holds a, b, c (union of its chunks), d3 a, d4 c
    result = one(FacetRequest("tags"), group=True)
    assert terms(result) == [("a", 2), ("c", 2), ("b", 1)]
    assert result.missing == 1


def test_size_cuts_and_reports_other() -> None:
    result = one(FacetRequest("source", size=1))
    assert terms(result) == [("wiki", 3)]
    assert result.other == 2
    result = one(FacetRequest("tags", size=2))
    assert terms(result) == [("a", 2), ("b", 2)]
    assert result.other == 2


def test_integer_field_terms() -> None:
    assert terms(one(FacetRequest("created_at"), group=True)) == [
        (10, 1),
        (25, 1),
        (40, 1),
        (99, 1),
    ]
    assert terms(one(FacetRequest("created_at"))) == [(10, 2), (25, 1), (40, 1), (99, 1)]


def test_metadata_path_terms_keep_types_apart() -> None:
    # 2000 and 2000.0 are one number; "2000" is a string; null is missing.
    result = one(FacetRequest("metadata.year"))
    assert terms(result) == [(2000, 2), ("2000", 1)]
    assert isinstance(result.buckets[0].value, int)
    assert result.missing == 2
    result = one(FacetRequest("metadata.year"), group=True)
    assert terms(result) == [(2000, 1), ("2000", 1)]
    assert result.missing == 2


def test_nested_metadata_paths() -> None:
    result = one(FacetRequest("metadata.author.name"))
    assert terms(result) == [("Ada", 1), ("Grace", 1)]
    assert result.missing == 3


def test_booleans_are_not_numbers_in_facets() -> None:
    hits = [
        {"document_id": "a", "metadata": {"v": True}},
        {"document_id": "b", "metadata": {"v": 1}},
        {"document_id": "c", "metadata": {"v": 1.0}},
        {"document_id": "d", "metadata": {"v": "1"}},
        {"document_id": "e", "metadata": {"v": False}},
    ]
    result = one(FacetRequest("metadata.v"), hits=hits)
    # ties: numbers, then strings, then booleans (false before true)
    assert terms(result) == [(1, 2), ("1", 1), (False, 1), (True, 1)]


def test_metadata_lists_objects_and_odd_values() -> None:
    hits: list[dict[str, Any]] = [
        {"document_id": "a", "metadata": {"v": ["x", "y", None, {"k": 1}, ["z"], "x"]}},
        {"document_id": "b", "metadata": {"v": {"k": "x"}}},
        {"document_id": "c", "metadata": {"v": math.nan}},
        {"document_id": "d", "metadata": {"v": 2.5}},
        {"document_id": "e", "metadata": "not a dict"},
        {"document_id": "f"},
    ]
    result = one(FacetRequest("metadata.v"), hits=hits)
    assert terms(result) == [(2.5, 1), ("x", 1), ("y", 1)]
    assert result.missing == 4


def test_no_hits() -> None:
    assert one(FacetRequest("source"), hits=[]) == FacetResult("source", (), 0, 0)
    assert compute_facets(HITS, [], group_by_document=True) == []


def test_results_follow_request_order() -> None:
    results = compute_facets(
        HITS,
        [FacetRequest("lang"), FacetRequest("source"), FacetRequest("lang", size=1)],
        group_by_document=False,
    )
    assert [r.field for r in results] == ["lang", "source", "lang"]
    assert len(results[2].buckets) == 1


def test_group_by_document_needs_document_ids() -> None:
    with pytest.raises(HsearchError, match="hit 1 has no document_id"):
        compute_facets(
            [hit("d1", source="a"), {"source": "b"}],
            [FacetRequest("source")],
            group_by_document=True,
        )
    # without grouping it is not needed
    assert terms(one(FacetRequest("source"), hits=[{"source": "b"}])) == [("b", 1)]


# --------------------------------------------------------------------------- ranges


def test_ranges_from_inclusive_to_exclusive() -> None:
    request = FacetRequest(
        "created_at",
        ranges=(
            FacetRange(to=10),
            FacetRange(10, 40),
            FacetRange(from_=40, label="old"),
            FacetRange(0, 100),
        ),
    )
    result = one(request)
    assert result.buckets == (
        FacetBucket("*..10", 0, from_=None, to=10),
        FacetBucket("10..40", 3, from_=10, to=40),
        FacetBucket("old", 2, from_=40, to=None),
        FacetBucket("0..100", 5, from_=0, to=100),
    )
    assert result.missing == 0
    assert result.other == 0
    grouped = one(request, group=True)
    assert [b.count for b in grouped.buckets] == [0, 2, 2, 4]


def test_range_other_and_missing() -> None:
    request = FacetRequest(
        "metadata.year", ranges=(FacetRange(1990, 2000), FacetRange(2000.5, 3000))
    )
    result = one(request)
    # 2000 and 2000.0 fall in no range, "2000" is not a number: all three are "other"
    assert [b.count for b in result.buckets] == [0, 0]
    assert result.other == 3
    assert result.missing == 2
    request = FacetRequest("metadata.year", ranges=(FacetRange(1999.5, 2000.5),))
    result = one(request)
    assert result.buckets[0].count == 2
    assert result.other == 1


def test_range_labels() -> None:
    assert FacetRange(1.0, 2.5).name == "1..2.5"
    assert FacetRange(-5, -1).name == "-5..-1"
    assert FacetRange(None, 1e20).name == "*..1e+20"
    assert FacetRange(3, label="x").name == "x"


def test_ranges_count_a_document_once_even_with_many_values() -> None:
    hits = [hit("d", created_at=1), hit("d", created_at=2), hit("e", created_at=50)]
    request = FacetRequest("created_at", ranges=(FacetRange(0, 10), FacetRange(0, 100)))
    assert [b.count for b in one(request, group=True, hits=hits).buckets] == [1, 2]
    assert [b.count for b in one(request, hits=hits).buckets] == [2, 3]


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (
            FacetRequest("document_id"),
            "facets[0].field: field 'document_id' is not facetable; allowed: source, lang, tags,"
            " created_at, metadata.<key>",
        ),
        (FacetRequest("ordinal"), "field 'ordinal' is not facetable"),
        (FacetRequest("tenant_id"), "facets[0].field: field 'tenant_id' cannot be used in a facet"),
        (FacetRequest("title"), "facets[0].field: unknown field 'title'; allowed: source,"),
        (FacetRequest("metadata"), "field 'metadata' is a JSON object; name a key"),
        (FacetRequest("metadata.a b"), "key 'a b' is not allowed"),
        (
            FacetRequest("source", size=0),
            f"facets[0].size: expected an integer from 1 to {MAX_FACET_SIZE}",
        ),
        (FacetRequest("source", size=MAX_FACET_SIZE + 1), "facets[0].size"),
        (FacetRequest("source", size=True), "facets[0].size"),
        (
            FacetRequest("source", ranges=(FacetRange(0, 1),)),
            "facets[0].ranges: ranges apply to numeric fields and metadata paths; field 'source'"
            " is a string",
        ),
        (FacetRequest("tags", ranges=(FacetRange(0, 1),)), "field 'tags' is a string_array"),
        (
            FacetRequest("created_at", ranges=(FacetRange(),)),
            "facets[0].ranges[0]: give from, to or both",
        ),
        (
            FacetRequest("created_at", ranges=(FacetRange(5, 5),)),
            "facets[0].ranges[0]: from (5) must be below to (5)",
        ),
        (
            FacetRequest("created_at", ranges=(FacetRange(math.nan),)),
            "facets[0].ranges[0].from: expected a finite number",
        ),
        (FacetRequest("created_at", ranges=(FacetRange(to=math.inf),)), "facets[0].ranges[0].to"),
        (FacetRequest("created_at", ranges=(FacetRange(True),)), "facets[0].ranges[0].from"),
        (
            FacetRequest("created_at", ranges=(FacetRange(0, 1), FacetRange(1, 2, label="0..1"))),
            "facets[0].ranges[1]: duplicate range label '0..1'",
        ),
        (
            FacetRequest("created_at", ranges=(FacetRange(0, 1, label=""),)),
            "facets[0].ranges[0].label",
        ),
        (
            FacetRequest(
                "created_at", ranges=tuple(FacetRange(i, i + 1) for i in range(MAX_RANGES + 1))
            ),
            f"at most {MAX_RANGES} ranges",
        ),
    ],
)
def test_rejects(request_: FacetRequest, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        compute_facets(HITS, [request_], group_by_document=False)
    assert message in str(caught.value)
    assert not isinstance(caught.value, InvalidFilterError)
    assert caught.value.code == "invalid_request"


def test_error_names_the_request_index() -> None:
    with pytest.raises(InvalidRequestError, match=r"^facets\[1\]\.field: unknown field 'x'"):
        validate_facet_requests([FacetRequest("source"), FacetRequest("x")])


def test_too_many_facets() -> None:
    with pytest.raises(InvalidRequestError, match=f"at most {MAX_FACETS} facet requests"):
        validate_facet_requests([FacetRequest("source")] * (MAX_FACETS + 1))


def test_parse_facet_requests() -> None:
    parsed = parse_facet_requests(
        [
            "source",
            {
                "field": "created_at",
                "ranges": [{"to": 10}, {"from": 10, "to": 20.5, "label": "mid"}],
            },
            {"field": "tags", "size": 3},
        ]
    )
    assert parsed == (
        FacetRequest("source"),
        FacetRequest("created_at", ranges=(FacetRange(to=10), FacetRange(10, 20.5, "mid"))),
        FacetRequest("tags", size=3),
    )
    assert parse_facet_requests(None) == ()
    assert parse_facet_requests([{"field": "source", "ranges": None}]) == (FacetRequest("source"),)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("source", "facets: expected a list of facet requests, got a string"),
        ([3], 'facets[0]: expected a field path or an object such as {"field": "source"'),
        ([{"size": 3}], "facets[0].field: required"),
        (
            [{"field": "source", "limit": 3}],
            "facets[0]: unknown key 'limit'; allowed: field, size, ranges",
        ),
        (
            [{"field": "source", "size": "3"}],
            "facets[0].size: expected an integer from 1 to 100, got a string",
        ),
        ([{"field": "source", "size": 2.0}], "facets[0].size: expected an integer"),
        (
            [{"field": "created_at", "ranges": {"to": 1}}],
            "facets[0].ranges: expected a list of ranges, got an object",
        ),
        ([{"field": "created_at", "ranges": [5]}], "facets[0].ranges[0]: expected an object"),
        (
            [{"field": "created_at", "ranges": [{"to": 1, "lt": 2}]}],
            "facets[0].ranges[0]: unknown key 'lt'; allowed: from, to, label",
        ),
        (
            [{"field": "created_at", "ranges": [{"from": "1"}]}],
            "facets[0].ranges[0].from: expected a number, got a string",
        ),
        (
            [{"field": "created_at", "ranges": [{"to": False}]}],
            "facets[0].ranges[0].to: expected a number, got a boolean",
        ),
        (
            [{"field": "created_at", "ranges": [{"to": 1, "label": 1}]}],
            "facets[0].ranges[0].label: expected a string",
        ),
        ([{"field": 3}], "facets[0].field: a field path must be a string"),
        (["source", "document_id"], "facets[1].field: field 'document_id' is not facetable"),
        (["source"] * (MAX_FACETS + 1), f"facets: at most {MAX_FACETS} facet requests"),
    ],
)
def test_parse_rejects(raw: object, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        parse_facet_requests(raw)
    assert message in str(caught.value)


# --------------------------------------------------------------------------- property


def brute_force(hits: list[dict[str, Any]], field: str, *, group: bool) -> tuple[Counter[Any], int]:
    """Count by the definition: for each unit, the set of its values, keyed with their kind."""
    units: dict[Any, list[dict[str, Any]]] = {}
    for i, h in enumerate(hits):
        units.setdefault(h["document_id"] if group else i, []).append(h)
    counts: Counter[Any] = Counter()
    missing = 0
    for unit in units.values():
        values: set[tuple[str, object]] = set()
        for h in unit:
            value = (
                h.get(field)
                if not field.startswith("metadata.")
                else (h.get("metadata") or {}).get(field[9:])
            )
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, bool):
                    values.add(("bool", item))
                elif isinstance(item, int | float):
                    values.add(("num", item))
                elif isinstance(item, str) and item:  # "": a string never given
                    values.add(("str", item))
        if not values:
            missing += 1
        counts.update(values)
    return counts, missing


hits_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "document_id": st.sampled_from(["d1", "d2", "d3", "d4"]),
            "source": st.sampled_from(["a", "b", "c", "d", "e", ""]),
            "lang": st.sampled_from(["en", "ja", ""]),
            "tags": st.lists(st.sampled_from(["x", "y", "z", "w", ""]), max_size=4),
            "created_at": st.integers(0, 5),
            "metadata": st.fixed_dictionaries(
                {},
                optional={
                    "v": st.none()
                    | st.booleans()
                    | st.integers(-2, 2)
                    | st.sampled_from(["p", "q", "1", ""])
                    | st.lists(st.sampled_from(["p", "q"]) | st.integers(0, 2), max_size=3)
                },
            ),
        }
    ),
    max_size=25,
)


@given(
    hits_strategy,
    st.sampled_from(["source", "lang", "tags", "created_at", "metadata.v"]),
    st.booleans(),
    st.integers(1, 6),
)
def test_terms_match_a_brute_force_count(
    hits: list[dict[str, Any]], field: str, group: bool, size: int
) -> None:
    (result,) = compute_facets(hits, [FacetRequest(field, size=size)], group_by_document=group)
    counts, missing = brute_force(hits, field, group=group)
    assert result.missing == missing
    kind = {bool: "bool", int: "num", float: "num", str: "str"}
    shown = [((kind[type(b.value)], b.value), b.count) for b in result.buckets]
    for key, count in shown:
        assert counts[key] == count
    assert len(shown) == min(size, len(counts))
    assert result.other == sum(counts.values()) - sum(count for _, count in shown)
    # every value left out has a count no larger than the smallest shown
    order = {"num": 0, "str": 1, "bool": 2}
    ranked = sorted(counts.items(), key=lambda item: (-item[1], order[item[0][0]], item[0][1]))
    assert shown == ranked[:size]


@given(
    hits_strategy,
    st.booleans(),
    st.lists(st.tuples(st.integers(-1, 6), st.integers(1, 4)), min_size=1, max_size=4, unique=True),
)
def test_ranges_match_a_brute_force_count(
    hits: list[dict[str, Any]], group: bool, spans: list[tuple[int, int]]
) -> None:
    ranges = tuple(FacetRange(lo, lo + width) for lo, width in spans)
    (result,) = compute_facets(
        hits, [FacetRequest("created_at", ranges=ranges)], group_by_document=group
    )
    units: dict[Any, set[int]] = {}
    for i, h in enumerate(hits):
        units.setdefault(h["document_id"] if group else i, set()).add(h["created_at"])
    bounds = [(lo, lo + width) for lo, width in spans]
    for bucket, (lo, hi) in zip(result.buckets, bounds, strict=True):
        assert bucket.count == sum(1 for vs in units.values() if any(lo <= v < hi for v in vs))
    assert result.other == sum(
        1 for vs in units.values() if not any(lo <= v < hi for lo, hi in bounds for v in vs)
    )
    assert result.missing == 0
