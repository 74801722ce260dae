"""The filter language: parsing, validation, compilation and Python evaluation.

The property tests read compiled expressions with a small lexer that follows the Milvus
Lite parser as observed (tests/integration/test_filters_milvus.py runs the real thing):
quoted strings whose only escapes are \\\\ \\" \\' \\n \\r \\t, every other character literal.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import HsearchError, InvalidFilterError, InvalidRequestError
from hsearch.search.filters import (
    INT64_MAX,
    INT64_MIN,
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
    compile_filter,
    lookup_value,
    matches,
    parse_filter,
    quote_string,
    render_expression,
    resolve_field,
    tenant_expression,
)
from hsearch.vectorstore.schema import USER_FIELDS_BY_NAME

T = 'tenant_id == "t1"'


def compiled(filter: object) -> str:
    """The user part of the compiled expression (after the tenant condition)."""
    expr = compile_filter(filter, tenant_id="t1")
    assert expr.startswith(f"{T} and (")
    assert expr.endswith(")")
    return expr[len(T) + len(" and (") : -1]


# --------------------------------------------------------------------------- a lexer

_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "r": "\r", "t": "\t"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PUNCT = ("==", "!=", ">=", "<=", ">", "<", "(", ")", "[", "]", ",")


class LexError(ValueError):
    pass


@dataclass(frozen=True)
class Token:
    kind: str  # str | num | ident | punct
    text: str  # the decoded value for strings, the source text otherwise


def tokenize(expr: str) -> list[Token]:
    tokens: list[Token] = []
    i = 0
    while i < len(expr):
        if expr[i] == " ":
            i += 1
        elif expr[i] in "\"'":
            value, i = _read_string(expr, i)
            tokens.append(Token("str", value))
        elif m := _NUMBER.match(expr, i):
            tokens.append(Token("num", m.group()))
            i = m.end()
        elif m := _IDENT.match(expr, i):
            tokens.append(Token("ident", m.group()))
            i = m.end()
        else:
            punct = next((p for p in _PUNCT if expr.startswith(p, i)), None)
            if punct is None:
                raise LexError(f"unexpected {expr[i]!r} at {i} in {expr!r}")
            tokens.append(Token("punct", punct))
            i += len(punct)
    return tokens


def _read_string(expr: str, i: int) -> tuple[str, int]:
    quote, out = expr[i], []
    i += 1
    while True:
        if i >= len(expr):
            raise LexError("unterminated string")
        ch = expr[i]
        if ch in "\n\r":
            raise LexError("raw line break inside a string")
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\":
            if i + 1 >= len(expr) or expr[i + 1] not in _ESCAPES:
                raise LexError(f"unknown escape at {i}")
            out.append(_ESCAPES[expr[i + 1]])
            i += 2
        else:
            out.append(ch)
            i += 1


def shape(tokens: list[Token]) -> list[str]:
    """The token stream with every literal replaced by its kind."""
    return ["STR" if t.kind == "str" else "NUM" if t.kind == "num" else t.text for t in tokens]


def test_lexer_reads_what_the_compiler_writes() -> None:
    tokens = tokenize(r'a == "x\"y\\z\n" and b in [1, -2.5e+3]')
    assert shape(tokens) == ["a", "==", "STR", "and", "b", "in", "[", "NUM", ",", "NUM", "]"]
    assert tokens[2].text == 'x"y\\z\n'
    with pytest.raises(LexError):
        tokenize('a == "x\ny"')
    with pytest.raises(LexError):
        tokenize(r'a == "\u0041"')


# --------------------------------------------------------------------------- literals

TRICKY = [
    "",
    "plain",
    'a"b',
    "a\\b",
    'a\\"b',
    "\\",
    '"',
    '" or tenant_id != "',
    '") or (tenant_id != "',
    "new\nline",
    "cr\rlf\r\n",
    "tab\tx",
    "nul\x00x",
    "bell\x07esc\x1b del\x7f",
    "\u2028\u2029\x85",
    "ünïcödé 😀 日本語 한국어",
    "single'quote",
    "a\\nb (literally backslash-n)",
    "]) or ARRAY_CONTAINS(tags, [",
]


@pytest.mark.parametrize("value", TRICKY)
def test_quote_string_round_trips(value: str) -> None:
    literal = quote_string(value)
    assert literal[0] == literal[-1] == '"'
    assert not {"\n", "\r"} & set(literal)
    assert tokenize(literal) == [Token("str", value)]


def test_quote_string_escapes_exactly_the_five_characters() -> None:
    assert quote_string('\\"\n\r\t') == r'"\\\"\n\r\t"'
    assert quote_string("\x00\x07\u2028é") == '"\x00\x07\u2028é"'


def test_quote_string_rejects_lone_surrogates() -> None:
    with pytest.raises(InvalidRequestError, match="lone surrogate"):
        quote_string("a\ud800")


def test_tenant_expression() -> None:
    assert tenant_expression("t1") == T
    assert tenant_expression('x" or "1') == r'tenant_id == "x\" or \"1"'
    for bad in ("", None, 3):
        with pytest.raises(HsearchError, match="tenant_id"):
            tenant_expression(bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- compiling


def test_no_filter_is_the_tenant_alone() -> None:
    assert compile_filter(None, tenant_id="t1") == T
    assert compile_filter({}, tenant_id="t1") == T
    assert parse_filter(None) is None
    assert parse_filter({}) is None


@pytest.mark.parametrize(
    ("filter", "expected"),
    [
        # string fields
        ({"source": {"eq": "wiki"}}, 'source == "wiki"'),
        ({"source": {"ne": "wiki"}}, 'source != "wiki"'),
        ({"lang": {"gt": "en"}}, 'lang > "en"'),
        ({"lang": {"gte": "en"}}, 'lang >= "en"'),
        ({"lang": {"lt": "en"}}, 'lang < "en"'),
        ({"lang": {"lte": "en"}}, 'lang <= "en"'),
        ({"source": {"in": ["a", "b"]}}, 'source in ["a", "b"]'),
        ({"source": {"nin": ["a"]}}, 'source not in ["a"]'),
        ({"document_id": {"eq": "d1"}}, 'document_id == "d1"'),
        ({"external_id": {"eq": "e/1"}}, 'external_id == "e/1"'),
        ({"lang": {"range": {"gte": "a", "lt": "m"}}}, '(lang >= "a") and (lang < "m")'),
        # integer fields
        ({"created_at": {"eq": 5}}, "created_at == 5"),
        ({"created_at": {"ne": -5}}, "created_at != -5"),
        ({"created_at": {"gt": 1.5}}, "created_at > 1.5"),
        ({"created_at": {"gte": 1e16}}, "created_at >= 1e+16"),
        ({"created_at": {"lt": INT64_MAX}}, f"created_at < {INT64_MAX}"),
        ({"created_at": {"lte": INT64_MIN}}, f"created_at <= {INT64_MIN}"),
        ({"ordinal": {"in": [1, 2, 3]}}, "ordinal in [1, 2, 3]"),
        ({"ordinal": {"nin": [0]}}, "ordinal not in [0]"),
        ({"created_at": {"range": {"gt": 1}}}, "created_at > 1"),
        ({"created_at": {"range": {"lte": 9}}}, "created_at <= 9"),
        (
            {"created_at": {"range": {"gte": 1, "lt": 9}}},
            "(created_at >= 1) and (created_at < 9)",
        ),
        (
            {"created_at": {"range": {"lt": 9, "gt": 1}}},
            "(created_at > 1) and (created_at < 9)",
        ),
        # several operators on one path are AND-ed, in the given order
        (
            {"created_at": {"gte": 1, "lt": 9, "ne": 5}},
            "(created_at >= 1) and (created_at < 9) and (created_at != 5)",
        ),
        # string arrays
        ({"tags": {"contains": "faq"}}, 'ARRAY_CONTAINS(tags, "faq")'),
        ({"tags": {"contains_any": ["a", "b"]}}, 'ARRAY_CONTAINS_ANY(tags, ["a", "b"])'),
        ({"tags": {"contains_all": ["a", "b"]}}, 'ARRAY_CONTAINS_ALL(tags, ["a", "b"])'),
        # metadata paths
        ({"metadata.author": {"eq": "Ada"}}, 'metadata["author"] == "Ada"'),
        ({"metadata.a.b-c.d_e.9": {"eq": 1}}, 'metadata["a"]["b-c"]["d_e"]["9"] == 1'),
        ({"metadata.year": {"ne": 2000}}, 'metadata["year"] != 2000'),
        ({"metadata.draft": {"eq": True}}, 'metadata["draft"] == true'),
        ({"metadata.draft": {"ne": False}}, 'metadata["draft"] != false'),
        ({"metadata.score": {"gt": 0.5}}, 'metadata["score"] > 0.5'),
        ({"metadata.name": {"lte": "m"}}, 'metadata["name"] <= "m"'),
        ({"metadata.x": {"in": ["a"]}}, '(metadata["x"] == "a")'),
        (
            {"metadata.x": {"in": ["a", 1, True]}},
            '(metadata["x"] == "a" or metadata["x"] == 1 or metadata["x"] == true)',
        ),
        (
            {"metadata.x": {"nin": ["a", 2.5]}},
            'not (metadata["x"] == "a" or metadata["x"] == 2.5)',
        ),
        ({"metadata.arr": {"contains": 3}}, 'ARRAY_CONTAINS(metadata["arr"], 3)'),
        (
            {"metadata.arr": {"contains_any": ["a", 1]}},
            'ARRAY_CONTAINS_ANY(metadata["arr"], ["a", 1])',
        ),
        (
            {"metadata.arr": {"contains_all": [False]}},
            'ARRAY_CONTAINS_ALL(metadata["arr"], [false])',
        ),
        ({"metadata.x": {"exists": True}}, 'exists metadata["x"]'),
        ({"metadata.x": {"exists": False}}, 'not (exists metadata["x"])'),
        (
            {"metadata.year": {"range": {"gte": 2000, "lt": 2010.5}}},
            '(metadata["year"] >= 2000) and (metadata["year"] < 2010.5)',
        ),
        # combinators
        (
            {"and": [{"source": {"eq": "a"}}, {"lang": {"eq": "b"}}]},
            '(source == "a") and (lang == "b")',
        ),
        (
            {"or": [{"source": {"eq": "a"}}, {"lang": {"eq": "b"}}]},
            '(source == "a") or (lang == "b")',
        ),
        ({"not": {"source": {"eq": "a"}}}, 'not (source == "a")'),
        ({"and": [{"source": {"eq": "a"}}]}, '(source == "a")'),
        (
            {"or": [{"and": [{"source": {"eq": "a"}}, {"not": {"lang": {"eq": "b"}}}]}]},
            '((source == "a") and (not (lang == "b")))',
        ),
    ],
)
def test_compiles(filter: object, expected: str) -> None:
    assert compiled(filter) == expected
    tokenize(compile_filter(filter, tenant_id="t1"))  # lexes cleanly


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
    assert metadata.expression == 'metadata["a"]["b"]'
    assert node is not None
    assert render_expression(node) == compiled(
        {
            "and": [
                {"metadata.a.b": {"in": ["x", 1]}},
                {"not": {"tags": {"contains_all": ["p", "q"]}}},
                {"or": [{"created_at": {"gt": 3}}, {"metadata.c": {"exists": False}}]},
            ]
        }
    )


def test_accepts_tuples_as_lists() -> None:
    assert compiled({"source": {"in": ("a", "b")}}) == 'source in ["a", "b"]'


def test_float_literals_round_trip() -> None:
    for value in (0.1, -0.0, 5e-324, 1.7976931348623157e308, 1e16, -2.5e-7, 123456.789):
        literal = compiled({"metadata.x": {"eq": value}}).split(" == ")[1]
        assert float(literal) == value
        assert _NUMBER.fullmatch(literal)


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
        compile_filter(filter, tenant_id="t1")
    assert message in str(caught.value)
    assert caught.value.code == "invalid_filter"
    assert caught.value.status_code == 422


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"source": {"eq": "a"}}
    for _ in range(depth - 1):
        node = {"not": node}
    return node


def test_depth_limit() -> None:
    compile_filter(nested(MAX_DEPTH), tenant_id="t1")
    with pytest.raises(InvalidFilterError, match=f"nests deeper than {MAX_DEPTH} levels"):
        compile_filter(nested(MAX_DEPTH + 1), tenant_id="t1")


def test_node_limit() -> None:
    leaf = {"source": {"eq": "a"}}
    compile_filter({"and": [leaf] * (MAX_NODES - 1)}, tenant_id="t1")  # + the "and" itself
    with pytest.raises(InvalidFilterError, match=f"more than {MAX_NODES} conditions") as caught:
        compile_filter({"and": [leaf] * MAX_NODES}, tenant_id="t1")
    assert str(caught.value).startswith(f"filter.and[{MAX_NODES - 1}].source.eq:")


def test_operators_count_as_nodes() -> None:
    many = {"created_at": {"gt": 1, "lt": 2}}  # two conditions
    compile_filter({"or": [many] * ((MAX_NODES - 1) // 2)}, tenant_id="t1")
    with pytest.raises(InvalidFilterError, match="conditions"):
        compile_filter({"or": [many] * (MAX_NODES // 2)}, tenant_id="t1")


def test_total_values_limit() -> None:
    chunk = {"source": {"in": ["a"] * MAX_LIST_VALUES}}
    compile_filter({"or": [chunk] * (MAX_VALUES // MAX_LIST_VALUES)}, tenant_id="t1")
    with pytest.raises(InvalidFilterError, match=f"more than {MAX_VALUES} values in all"):
        compile_filter(
            {"or": [chunk] * (MAX_VALUES // MAX_LIST_VALUES) + [{"source": {"eq": "b"}}]},
            tenant_id="t1",
        )


def test_long_keys_are_shortened_in_messages() -> None:
    with pytest.raises(InvalidFilterError) as caught:
        compile_filter({"x" * 10_000: {"eq": 1}}, tenant_id="t1")
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


# --------------------------------------------------------------------------- properties

HOSTILE = [
    '" or tenant_id != "',
    '") or (tenant_id != "t2") or ("',
    "\\",
    '\\"',
    '"',
    "'",
    ") or (1 == 1",
    "]) or ARRAY_CONTAINS(tags, [",
    "\n",
    "\r\n",
    "a\\nb",
    "tenant_id",
    "\x00",
    "\u2028",
    "日本語",
]

texts = st.text(max_size=24) | st.sampled_from(HOSTILE)
ints = st.integers(INT64_MIN, INT64_MAX)
numbers = ints | st.floats(allow_nan=False, allow_infinity=False)
json_values = texts | numbers | st.booleans()
keys = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
meta_paths = st.lists(keys, min_size=1, max_size=3).map(lambda ks: "metadata." + ".".join(ks))
STRING_FIELDS = ["source", "lang", "document_id", "external_id"]
INT_FIELDS = ["created_at", "ordinal"]


def _ranges(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    one = st.builds(lambda b, v: {b: v}, st.sampled_from(["gt", "gte", "lt", "lte"]), values)
    two = (
        st.tuples(values, values)
        .map(sorted)
        .flatmap(
            lambda pair: st.sampled_from([("gt", "lt"), ("gte", "lte"), ("gte", "lt")]).map(
                lambda b: {b[0]: pair[0], b[1]: pair[1]}
            )
        )
    )
    return one | two


def _ops(
    values: st.SearchStrategy[Any], ordered: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    lists = st.lists(values, min_size=1, max_size=4)
    return st.one_of(
        st.builds(lambda op, v: {op: v}, st.sampled_from(["eq", "ne"]), values),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["gt", "gte", "lt", "lte"]), ordered),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["in", "nin"]), lists),
    )


leaves = st.one_of(
    st.builds(
        lambda f, ops: {f: ops},
        st.sampled_from(STRING_FIELDS),
        _ops(texts, texts) | _ranges(texts).map(lambda r: {"range": r}),
    ),
    st.builds(
        lambda f, ops: {f: ops},
        st.sampled_from(INT_FIELDS),
        _ops(numbers, numbers) | _ranges(numbers).map(lambda r: {"range": r}),
    ),
    st.builds(
        lambda op, v: {"tags": {op: v}},
        st.sampled_from(["contains_any", "contains_all"]),
        st.lists(texts, min_size=1, max_size=4),
    ),
    texts.map(lambda v: {"tags": {"contains": v}}),
    st.builds(
        lambda p, ops: {p: ops},
        meta_paths,
        st.one_of(
            _ops(json_values, texts | numbers),
            _ranges(numbers).map(lambda r: {"range": r}),
            _ranges(texts).map(lambda r: {"range": r}),
            json_values.map(lambda v: {"contains": v}),
            st.lists(json_values, min_size=1, max_size=3).map(lambda v: {"contains_any": v}),
            st.lists(json_values, min_size=1, max_size=3).map(lambda v: {"contains_all": v}),
            st.booleans().map(lambda v: {"exists": v}),
        ),
    ),
)


def _trees(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    if depth == 0:
        return leaves
    below = _trees(depth - 1)
    return st.one_of(
        leaves,
        st.lists(below, min_size=1, max_size=3).map(lambda cs: {"and": cs}),
        st.lists(below, min_size=1, max_size=3).map(lambda cs: {"or": cs}),
        below.map(lambda c: {"not": c}),
    )


filters = _trees(4)


def benign(value: Any) -> Any:
    """The same filter with every literal value made harmless (keys and booleans kept)."""
    if isinstance(value, dict):
        return {k: benign(v) for k, v in value.items()}
    if isinstance(value, list):
        return [benign(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return 1
    if isinstance(value, str):
        return "x"
    raise AssertionError(value)


def strings_in(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = set().union(*(strings_in(v) for v in value.values())) if value else set()
        for key in value:
            found |= set(key.split(".")[1:])  # metadata keys become literals too
        return found
    if isinstance(value, list):
        return set().union(*(strings_in(v) for v in value)) if value else set()
    return {value} if isinstance(value, str) else set()


@given(filters)
def test_values_never_change_the_expression_structure(filter: dict[str, Any]) -> None:
    expr = compile_filter(filter, tenant_id="t1")
    tokens = tokenize(expr)
    assert shape(tokens) == shape(tokenize(compile_filter(benign(filter), tenant_id="t1")))
    allowed = strings_in(filter) | {"t1"}
    assert {t.text for t in tokens if t.kind == "str"} <= allowed


@given(
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]),
    texts,
    st.sampled_from([*STRING_FIELDS, "metadata.k"]),
)
def test_any_string_stays_one_literal(op: str, value: str, field: str) -> None:
    operand: Any = [value] if op in ("in", "nin") else value
    tokens = tokenize(compile_filter({field: {op: operand}}, tenant_id="t1"))
    strings = [t for t in tokens if t.kind == "str"]
    assert strings[0] == Token("str", "t1")
    assert value in [t.text for t in strings[1:]]
    assert shape(tokens) == shape(
        tokenize(
            compile_filter({field: {op: ["x"] if op in ("in", "nin") else "x"}}, tenant_id="t1")
        )
    )


@given(
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte"]),
    numbers,
    st.sampled_from([*INT_FIELDS, "metadata.k"]),
)
def test_any_number_stays_one_literal(op: str, value: float, field: str) -> None:
    tokens = tokenize(compile_filter({field: {op: value}}, tenant_id="t1"))
    (number,) = [t for t in tokens if t.kind == "num"]
    assert (int if isinstance(value, int) else float)(number.text) == value
    assert shape(tokens) == shape(tokenize(compile_filter({field: {op: 1}}, tenant_id="t1")))


def assert_tenant_first(expr: str, tenant_id: str) -> None:
    """``tenant_id == "<tenant>"`` is the first conjunct of the whole expression: it is
    followed by nothing, or by ``and (`` whose parenthesis closes at the very end."""
    tokens = tokenize(expr)
    assert tokens[:3] == [
        Token("ident", "tenant_id"),
        Token("punct", "=="),
        Token("str", tenant_id),
    ]
    idents = [t.text for t in tokens if t.kind == "ident"]
    assert idents.count("tenant_id") == 1
    rest = tokens[3:]
    if not rest:
        return
    assert rest[:2] == [Token("ident", "and"), Token("punct", "(")]
    depth = 0
    for i, token in enumerate(rest[1:], start=1):
        if token.text in "([" and token.kind == "punct":
            depth += 1
        elif token.text in ")]" and token.kind == "punct":
            depth -= 1
            assert depth >= 0
            if depth == 0:
                assert i == len(rest) - 1, "the user expression closed before the end"


@given(filters, texts.filter(bool))
def test_tenant_condition_always_comes_first(filter: dict[str, Any], tenant_id: str) -> None:
    assert_tenant_first(compile_filter(filter, tenant_id=tenant_id), tenant_id)


json_garbage = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "and",
                    "or",
                    "not",
                    "source",
                    "tags",
                    "created_at",
                    "metadata.a",
                    "tenant_id",
                    "eq",
                    "ne",
                    "in",
                    "nin",
                    "gt",
                    "lt",
                    "range",
                    "gte",
                    "contains",
                    "contains_any",
                    "exists",
                    "metadata",
                    "x",
                ]
            )
            | texts,
            inner,
            max_size=2,
        )
    ),
    max_leaves=12,
)


@given(json_garbage)
def test_any_json_compiles_safely_or_is_rejected(filter: object) -> None:
    try:
        expr = compile_filter(filter, tenant_id="t1")
    except InvalidFilterError:
        return
    assert_tenant_first(expr, "t1")
