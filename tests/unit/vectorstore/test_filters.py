"""The filter language: parsing and validation into a typed tree, the tree's value
semantics (hashable, equal by value) and Python evaluation."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import given

from hsearch.errors import InvalidFilterError, InvalidRequestError
from hsearch.vectorstore.filters import (
    MAX_DEPTH,
    MAX_LIST_VALUES,
    MAX_NODES,
    MAX_PATH_KEYS,
    MAX_STRING_BYTES,
    MAX_VALUES,
    MISSING,
    And,
    CompareOp,
    Comparison,
    Contains,
    ContainsMode,
    Exists,
    FieldRef,
    Membership,
    Not,
    Or,
    lookup_value,
    matches,
    parse_filter,
    resolve_field,
)
from hsearch.vectorstore.schema import USER_FIELDS_BY_NAME

from .filter_strategies import filters

# --------------------------------------------------------------------------- the tree


def test_no_filter_is_none() -> None:
    assert parse_filter(None) is None
    assert parse_filter({}) is None


def test_parse_gives_a_typed_tree() -> None:
    node = parse_filter(
        {
            "and": [
                {"metadata.a.b": {"in": ["x", 1]}},
                {"not": {"tags": {"contains_all": ["p", "q"]}}},
                {"or": [{"created_at": {"gt": 3}}, {"metadata.c": {"exists": False}}]},
            ]
        }
    )
    metadata = FieldRef(USER_FIELDS_BY_NAME["metadata"], ("a", "b"))
    tags = FieldRef(USER_FIELDS_BY_NAME["tags"])
    assert node == And(
        (
            Membership(metadata, ("x", 1)),
            Not(Contains(tags, ContainsMode.ALL, ("p", "q"))),
            Or(
                (
                    Comparison(FieldRef(USER_FIELDS_BY_NAME["created_at"]), CompareOp.GT, 3),
                    Exists(FieldRef(USER_FIELDS_BY_NAME["metadata"], ("c",)), present=False),
                )
            ),
        )
    )
    assert metadata.path == "metadata.a.b"


EVERY_NODE_KIND: dict[str, Any] = {
    "and": [
        {"source": {"eq": "wiki"}},
        {"metadata.a.b": {"in": ["x", 1, 2.5, True]}},
        {"lang": {"nin": ["en", "ja"]}},
        {"not": {"tags": {"contains_all": ["p", "q"]}}},
        {"tags": {"contains_any": ["r"]}},
        {"metadata.arr": {"contains": 3}},
        {"created_at": {"range": {"gte": 1, "lt": 9}}},
        {"or": [{"created_at": {"gt": 3}}, {"metadata.c": {"exists": False}}]},
    ]
}


def test_trees_are_hashable_and_equal_by_value() -> None:
    first, second = parse_filter(EVERY_NODE_KIND), parse_filter(copy.deepcopy(EVERY_NODE_KIND))
    assert first is not second
    assert first == second
    assert hash(first) == hash(second)
    assert {first: "cached"}[second] == "cached"
    assert isinstance(first, And)
    kinds = {type(child) for child in first.children}
    assert kinds >= {Comparison, Membership, Not, Contains, And, Or}
    # list operands are tuples, so every node hashes on its own too
    for child in first.children:
        assert hash(child) == hash(copy.deepcopy(child))
    membership = first.children[1]
    assert isinstance(membership, Membership)
    assert membership.values == ("x", 1, 2.5, True)
    assert isinstance(membership.values, tuple)


@pytest.mark.parametrize(
    "other",
    [
        {"metadata.a.b": {"in": ["x", 2]}},  # one list element differs
        {"metadata.a.b": {"in": [1, "x"]}},  # order is part of the value
        {"metadata.a.b": {"nin": ["x", 1]}},
        {"metadata.a": {"in": ["x", 1]}},
        {"metadata.a.b": {"contains_any": ["x", 1]}},
    ],
)
def test_different_filters_give_different_trees(other: dict[str, Any]) -> None:
    tree = parse_filter({"metadata.a.b": {"in": ["x", 1]}})
    assert tree != parse_filter(other)


def test_operands_compare_as_the_filter_does() -> None:
    """1, 1.0 and true are one value in Python and in the filter (booleans are numbers
    in JSON comparisons): equal trees select the same rows."""
    ones = [parse_filter({"metadata.one": {"eq": v}}) for v in (1, 1.0, True)]
    assert ones[0] == ones[1] == ones[2]
    assert len(set(ones)) == 1
    assert parse_filter({"metadata.one": {"eq": "1"}}) != ones[0]


@given(filters)
def test_any_parsed_filter_is_a_hashable_value(filter: dict[str, Any]) -> None:
    tree = parse_filter(filter)
    again = parse_filter(copy.deepcopy(filter))
    assert tree == again
    assert hash(tree) == hash(again)


# --------------------------------------------------------------------------- errors

ALLOWED_FIELDS = "document_id, external_id, source, lang, tags, created_at, ordinal, metadata.<key>"


@pytest.mark.parametrize(
    ("filter", "message"),
    [
        # shape
        ([1], "filter: expected an object with one key"),
        ("source", "filter: expected an object with one key"),
        (
            {"source": {"eq": "a"}, "lang": {"eq": "b"}},
            "filter: an object must hold exactly one key (a field path or one of and, or, not);"
            " got 2 ('source', 'lang'); combine conditions with and",
        ),
        ({"and": [{}]}, "filter.and[0]: an object must hold exactly one key"),
        ({1: {"eq": 1}}, "filter: keys must be strings, got number 1"),
        ({"and": []}, "filter.and: expected a non-empty list of conditions, got an empty list"),
        ({"or": {"source": {"eq": "a"}}}, "filter.or: expected a non-empty list of conditions"),
        ({"not": [{"source": {"eq": "a"}}]}, "filter.not: expected an object with one key"),
        ({"or": [{"source": {"eq": "a"}}, 3]}, "filter.or[1]: expected an object with one key"),
        ({"source": "wiki"}, 'filter.source: expected an object of operators such as {"eq": ...}'),
        ({"source": {}}, "filter.source: expected an object of operators"),
        # fields
        ({"tenant_id": {"eq": "t2"}}, "filter.tenant_id: field 'tenant_id' cannot be used in a"),
        (
            {"tenant_id": {"eq": "t2"}},
            f"(the tenant comes from the API key); allowed: {ALLOWED_FIELDS}",
        ),
        ({"nope": {"eq": 1}}, f"filter.nope: unknown field 'nope'; allowed: {ALLOWED_FIELDS}"),
        ({"title": {"eq": "x"}}, "filter.title: unknown field 'title'"),
        ({"dense": {"eq": 1}}, "filter.dense: unknown field 'dense'"),
        ({"chunk_id": {"eq": "x"}}, "filter.chunk_id: unknown field 'chunk_id'"),
        ({"source.x": {"eq": "a"}}, "filter.source.x: field 'source' has no nested keys"),
        ({"metadata": {"eq": 1}}, "filter.metadata: field 'metadata' is a JSON object; name a key"),
        ({"metadata.": {"eq": 1}}, "filter.metadata.: key '' is not allowed in a metadata path"),
        ({"metadata.a..b": {"eq": 1}}, "key '' is not allowed"),
        ({"metadata.a b": {"eq": 1}}, "filter.metadata.a b: key 'a b' is not allowed"),
        ({'metadata.a"]': {"eq": 1}}, "key 'a\"]' is not allowed"),
        ({"metadata.é": {"eq": 1}}, "keys are 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"),
        ({"metadata." + "k" * 65: {"eq": 1}}, "is not allowed in a metadata path"),
        (
            {"metadata." + ".".join("k" * (MAX_PATH_KEYS + 1)): {"eq": 1}},
            f"at most {MAX_PATH_KEYS} keys after 'metadata', got {MAX_PATH_KEYS + 1}",
        ),
        # operators
        (
            {"source": {"like": "a%"}},
            "filter.source.like: unknown operator 'like'; allowed for string field 'source':"
            " eq, ne, in, nin, gt, gte, lt, lte, range",
        ),
        (
            {"and": [{"source": {"eq": "a"}}, {"tags": {"gt": 1}}]},
            "filter.and[1].tags.gt: field 'tags' is an array; use contains, contains_any,"
            " contains_all",
        ),
        ({"tags": {"eq": "a"}}, "filter.tags.eq: field 'tags' is an array; use contains"),
        ({"tags": {"exists": True}}, "filter.tags.exists: field 'tags' is an array"),
        (
            {"source": {"exists": True}},
            "filter.source.exists: exists applies to metadata paths only",
        ),
        (
            {"created_at": {"contains": 1}},
            "filter.created_at.contains: contains applies to array fields and metadata paths;"
            " field 'created_at' is a int",
        ),
        ({"metadata.x": {"regex": "a"}}, "unknown operator 'regex'; allowed for metadata path"),
        # values
        ({"source": {"eq": 1}}, "filter.source.eq: field 'source' holds strings; got number 1"),
        ({"source": {"eq": None}}, "filter.source.eq: field 'source' holds strings; got null"),
        ({"source": {"eq": ["a"]}}, "field 'source' holds strings; got a list"),
        ({"source": {"eq": {"a": 1}}}, "field 'source' holds strings; got an object"),
        ({"created_at": {"eq": True}}, "field 'created_at' holds numbers; got boolean true"),
        ({"created_at": {"gt": "1"}}, "field 'created_at' holds numbers; got string '1'"),
        ({"created_at": {"eq": 2**63}}, f"integer {2**63} is outside the 64-bit range"),
        ({"created_at": {"eq": -(2**63) - 1}}, "is outside the 64-bit range"),
        ({"metadata.x": {"eq": 2**64}}, "is outside the 64-bit range"),
        ({"created_at": {"eq": math.nan}}, "filter.created_at.eq: numbers must be finite"),
        ({"metadata.x": {"gt": math.inf}}, "numbers must be finite"),
        ({"tags": {"contains": 1}}, "filter.tags.contains: field 'tags' holds strings"),
        ({"metadata.x": {"gt": True}}, "gt on a metadata path takes a string or number"),
        ({"metadata.x": {"eq": None}}, "eq on a metadata path takes a string or number or boolean"),
        ({"metadata.x": {"eq": [1]}}, "got a list"),
        ({"metadata.x": {"exists": 1}}, "filter.metadata.x.exists: expected true or false"),
        ({"source": {"eq": "a\ud800"}}, "filter.source.eq: the string is not valid Unicode"),
        ({"source": {"eq": "é" * (MAX_STRING_BYTES // 2 + 1)}}, "strings are at most 4096 bytes"),
        # lists
        (
            {"source": {"in": []}},
            "filter.source.in: expected a non-empty list of values, got an empty list",
        ),
        (
            {"source": {"in": "a"}},
            "filter.source.in: expected a non-empty list of values, got string",
        ),
        ({"source": {"nin": ["a", 1]}}, "filter.source.nin[1]: field 'source' holds strings"),
        ({"tags": {"contains_any": []}}, "filter.tags.contains_any: expected a non-empty list"),
        ({"tags": {"contains_all": "a"}}, "filter.tags.contains_all: expected a non-empty list"),
        (
            {"source": {"in": ["a"] * (MAX_LIST_VALUES + 1)}},
            f"filter.source.in: at most {MAX_LIST_VALUES} values, got {MAX_LIST_VALUES + 1}",
        ),
        # ranges
        (
            {"created_at": {"range": 5}},
            "filter.created_at.range: expected an object of bounds such as",
        ),
        ({"created_at": {"range": {}}}, "filter.created_at.range: expected an object of bounds"),
        (
            {"created_at": {"range": {"from": 1}}},
            "filter.created_at.range: unknown bound 'from'; allowed: gt, gte, lt, lte",
        ),
        ({"created_at": {"range": {"gt": 1, "gte": 1}}}, "give either gt or gte, not both"),
        ({"created_at": {"range": {"lt": 1, "lte": 1}}}, "give either lt or lte, not both"),
        (
            {"created_at": {"range": {"gte": 5, "lt": 1}}},
            "filter.created_at.range: the lower bound 5 is above the upper bound 1",
        ),
        (
            {"metadata.x": {"range": {"gte": "a", "lt": 1}}},
            "filter.metadata.x.range: both bounds must be numbers or both strings",
        ),
        (
            {"created_at": {"range": {"gte": "a"}}},
            "filter.created_at.range.gte: field 'created_at' holds numbers",
        ),
        # nesting, deep locations
        (
            {
                "or": [
                    {"source": {"eq": "a"}},
                    {"source": {"eq": "b"}},
                    {"metadata.year": {"gt": "x", "lt": True}},
                ]
            },
            "filter.or[2].metadata.year.lt: lt on a metadata path takes a string or number;"
            " got boolean true",
        ),
        (
            {"not": {"and": [{"not": {"lang": {"in": ["en", None]}}}]}},
            "filter.not.and[0].not.lang.in[1]: field 'lang' holds strings; got null",
        ),
    ],
)
def test_rejects(filter: object, message: str) -> None:
    with pytest.raises(InvalidFilterError) as caught:
        parse_filter(filter)
    assert message in str(caught.value)
    assert caught.value.code == "invalid_filter"
    assert caught.value.status_code == 422


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"source": {"eq": "a"}}
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def test_depth_limit() -> None:
    parse_filter(nested(MAX_DEPTH))
    with pytest.raises(InvalidFilterError, match=f"nests deeper than {MAX_DEPTH} levels"):
        parse_filter(nested(MAX_DEPTH + 1))


def test_node_limit() -> None:
    leaf = {"source": {"eq": "a"}}
    parse_filter({"and": [leaf] * (MAX_NODES - 1)})  # + the "and" itself
    with pytest.raises(InvalidFilterError, match=f"more than {MAX_NODES} conditions") as caught:
        parse_filter({"and": [leaf] * MAX_NODES})
    assert str(caught.value).startswith(f"filter.and[{MAX_NODES - 1}].source.eq:")


def test_operators_count_as_nodes() -> None:
    many = {"created_at": {"gt": 1, "lt": 2}}  # two conditions
    parse_filter({"or": [many] * ((MAX_NODES - 1) // 2)})
    with pytest.raises(InvalidFilterError, match="conditions"):
        parse_filter({"or": [many] * (MAX_NODES // 2)})


def test_total_values_limit() -> None:
    chunk = {"source": {"in": ["a"] * MAX_LIST_VALUES}}
    parse_filter({"or": [chunk] * (MAX_VALUES // MAX_LIST_VALUES)})
    with pytest.raises(InvalidFilterError, match=f"more than {MAX_VALUES} values in all"):
        parse_filter({"or": [chunk] * (MAX_VALUES // MAX_LIST_VALUES) + [{"source": {"eq": "b"}}]})


def test_long_keys_are_shortened_in_messages() -> None:
    with pytest.raises(InvalidFilterError) as caught:
        parse_filter({"x" * 10_000: {"eq": 1}})
    assert len(str(caught.value)) < 400


def test_resolve_field_for_facets_raises_request_errors() -> None:
    assert resolve_field("tags", location="f", purpose="facet").path == "tags"
    with pytest.raises(InvalidRequestError) as caught:
        resolve_field("document_id", location="facets[0].field", purpose="facet")
    assert not isinstance(caught.value, InvalidFilterError)
    assert str(caught.value) == (
        "facets[0].field: field 'document_id' is not facetable; allowed: source, lang, tags,"
        " created_at, metadata.<key>"
    )
    with pytest.raises(InvalidRequestError, match="a field path must be a string"):
        resolve_field(3, location="x", purpose="facet")


# --------------------------------------------------------------------------- evaluating

ROW: dict[str, Any] = {
    "tenant_id": "t1",
    "source": "wiki",
    "lang": "en",
    "tags": ["a", "b"],
    "created_at": 100,
    "ordinal": 0,
    "metadata": {
        "s": "x",
        "n": 2000,
        "f": 2.5,
        "flag": True,
        "one": 1,
        "null": None,
        "arr": ["p", 1],
        "obj": {"k": "v"},
        "numstr": "2000",
    },
}


def ev(filter: object) -> bool:
    return matches(parse_filter(filter), ROW)


def test_lookup_value() -> None:
    ref = resolve_field("metadata.obj.k", location="x")
    assert lookup_value(ref, ROW) == "v"
    assert lookup_value(resolve_field("metadata.null", location="x"), ROW) is MISSING
    assert lookup_value(resolve_field("metadata.s.k", location="x"), ROW) is MISSING
    assert lookup_value(resolve_field("metadata.nope", location="x"), ROW) is MISSING
    assert lookup_value(resolve_field("source", location="x"), {}) is MISSING
    assert lookup_value(resolve_field("metadata.a", location="x"), {"metadata": "str"}) is MISSING
    assert repr(MISSING) == "MISSING"


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        (None, True),
        ({}, True),
        ({"source": {"eq": "wiki"}}, True),
        ({"source": {"ne": "wiki"}}, False),
        ({"source": {"in": ["x", "wiki"]}}, True),
        ({"source": {"nin": ["x", "wiki"]}}, False),
        ({"source": {"gt": "w"}}, True),
        ({"source": {"lt": "w"}}, False),
        ({"created_at": {"range": {"gte": 100, "lt": 101}}}, True),
        ({"created_at": {"range": {"gt": 100}}}, False),
        ({"created_at": {"eq": 100.0}}, True),
        ({"tags": {"contains": "a"}}, True),
        ({"tags": {"contains": "c"}}, False),
        ({"tags": {"contains_any": ["c", "b"]}}, True),
        ({"tags": {"contains_all": ["a", "c"]}}, False),
        ({"tags": {"contains_all": ["b", "a"]}}, True),
        # JSON: equality across types is false, inequality true
        ({"metadata.n": {"eq": 2000}}, True),
        ({"metadata.n": {"eq": 2000.0}}, True),
        ({"metadata.n": {"eq": "2000"}}, False),
        ({"metadata.numstr": {"ne": 2000}}, True),
        ({"metadata.obj": {"ne": "x"}}, True),
        ({"metadata.arr": {"eq": "p"}}, False),
        # booleans are numbers in JSON comparisons
        ({"metadata.flag": {"eq": 1}}, True),
        ({"metadata.one": {"eq": True}}, True),
        ({"metadata.flag": {"gt": 0}}, True),
        # orderings across types are unknown: neither they nor their negation match
        ({"metadata.numstr": {"gt": 1}}, False),
        ({"not": {"metadata.numstr": {"gt": 1}}}, False),
        ({"metadata.s": {"gt": 1}}, False),
        ({"not": {"metadata.flag": {"gt": "a"}}}, False),
        ({"metadata.s": {"gte": "x"}}, True),
        ({"metadata.f": {"range": {"gt": 2, "lt": 3}}}, True),
        # missing and null are unknown for comparisons, in ne and not as well
        ({"metadata.nope": {"eq": 1}}, False),
        ({"metadata.nope": {"ne": 1}}, False),
        ({"not": {"metadata.nope": {"eq": 1}}}, False),
        ({"metadata.null": {"ne": 1}}, False),
        ({"metadata.nope": {"in": [1]}}, False),
        ({"metadata.nope": {"nin": [1]}}, False),
        ({"metadata.s": {"nin": ["y", 1]}}, True),
        ({"metadata.s": {"in": ["y", "x"]}}, True),
        # Kleene logic
        ({"or": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "wiki"}}]}, True),
        ({"not": {"or": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "x"}}]}}, False),
        ({"not": {"and": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "x"}}]}}, True),
        ({"not": {"and": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "wiki"}}]}}, False),
        ({"and": [{"source": {"eq": "wiki"}}, {"lang": {"eq": "en"}}]}, True),
        ({"or": [{"source": {"eq": "x"}}, {"lang": {"eq": "x"}}]}, False),
        ({"not": {"not": {"source": {"eq": "wiki"}}}}, True),
        # exists: present and not null; contains: false (not unknown) on non-arrays
        ({"metadata.s": {"exists": True}}, True),
        ({"metadata.null": {"exists": True}}, False),
        ({"metadata.null": {"exists": False}}, True),
        ({"metadata.obj.k": {"exists": True}}, True),
        ({"metadata.arr": {"contains": 1.0}}, True),
        ({"metadata.arr": {"contains": True}}, True),
        ({"metadata.arr": {"contains": "1"}}, False),
        ({"not": {"metadata.s": {"contains": "x"}}}, True),
        ({"not": {"metadata.nope": {"contains": "x"}}}, True),
        ({"metadata.arr": {"contains_all": ["p", 1]}}, True),
        ({"metadata.arr": {"contains_any": ["q", 2]}}, False),
    ],
)
def test_matches(filter: object, expected: bool) -> None:
    assert ev(filter) is expected
