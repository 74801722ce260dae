"""Parsed filters rendered as Milvus expressions: literals, the tenant condition first,
every operator's form, and properties over generated filters.

The property tests read compiled expressions with a small lexer that follows the Milvus
Lite parser as observed (tests/integration/test_filters_milvus.py runs the real thing):
quoted strings whose only escapes are \\\\ \\" \\' \\n \\r \\t, every other character literal.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import HsearchError, InvalidFilterError, InvalidRequestError
from hsearch.vectorstore.filters import INT64_MAX, INT64_MIN, FieldRef, parse_filter
from hsearch.vectorstore.milvus_filters import (
    compile_filter,
    field_expression,
    quote_string,
    render_expression,
    tenant_expression,
)
from hsearch.vectorstore.schema import USER_FIELDS_BY_NAME

from .filter_strategies import (
    INT_FIELDS,
    STRING_FIELDS,
    filters,
    json_garbage,
    numbers,
    texts,
)

T = 'tenant_id == "t1"'


def compile_json(filter: object, *, tenant_id: str) -> str:
    """A request's raw filter as a leg sees it: parsed, then compiled."""
    return compile_filter(parse_filter(filter), tenant_id=tenant_id)


def compiled(filter: object) -> str:
    """The user part of the compiled expression (after the tenant condition)."""
    expr = compile_json(filter, tenant_id="t1")
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
    quote = expr[i]
    out: list[str] = []
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
            tenant_expression(bad)  # type: ignore[arg-type]  # wrong on purpose


# --------------------------------------------------------------------------- compiling


def test_no_filter_is_the_tenant_alone() -> None:
    assert compile_filter(None, tenant_id="t1") == T
    assert compile_json({}, tenant_id="t1") == T


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
        ({"metadata.arr": {"contains": -3}}, 'ARRAY_CONTAINS(metadata["arr"], (-3))'),
        ({"metadata.arr": {"contains": -0.5}}, 'ARRAY_CONTAINS(metadata["arr"], (-0.5))'),
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
    tokenize(compile_json(filter, tenant_id="t1"))  # lexes cleanly


def test_renders_a_parsed_tree() -> None:
    raw = {
        "and": [
            {"metadata.a.b": {"in": ["x", 1]}},
            {"not": {"tags": {"contains_all": ["p", "q"]}}},
            {"or": [{"created_at": {"gt": 3}}, {"metadata.c": {"exists": False}}]},
        ]
    }
    node = parse_filter(raw)
    metadata = FieldRef(USER_FIELDS_BY_NAME["metadata"], ("a", "b"))
    assert field_expression(metadata) == 'metadata["a"]["b"]'
    assert node is not None
    assert render_expression(node) == compiled(raw)
    assert compile_filter(node, tenant_id="t1") == f"{T} and ({render_expression(node)})"


def test_accepts_tuples_as_lists() -> None:
    assert compiled({"source": {"in": ("a", "b")}}) == 'source in ["a", "b"]'


def test_float_literals_round_trip() -> None:
    for value in (0.1, -0.0, 5e-324, 1.7976931348623157e308, 1e16, -2.5e-7, 123456.789):
        literal = compiled({"metadata.x": {"eq": value}}).split(" == ")[1]
        assert float(literal) == value
        assert _NUMBER.fullmatch(literal)


# --------------------------------------------------------------------------- properties


def benign(value: Any) -> Any:
    """The same filter with every literal value made harmless (keys and booleans kept).

    Numbers keep their sign, zeros themselves (``-0.0`` too), so range bounds stay in
    order and a negative ``contains`` operand is still parenthesised."""
    if isinstance(value, dict):
        return {k: benign(v) for k, v in value.items()}
    if isinstance(value, list):
        return [benign(v) for v in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value if value == 0 else -1 if value < 0 else 1
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
    expr = compile_json(filter, tenant_id="t1")
    tokens = tokenize(expr)
    assert shape(tokens) == shape(tokenize(compile_json(benign(filter), tenant_id="t1")))
    allowed = strings_in(filter) | {"t1"}
    assert {t.text for t in tokens if t.kind == "str"} <= allowed


@given(
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"]),
    texts,
    st.sampled_from([*STRING_FIELDS, "metadata.k"]),
)
def test_any_string_stays_one_literal(op: str, value: str, field: str) -> None:
    operand: Any = [value] if op in ("in", "nin") else value
    tokens = tokenize(compile_json({field: {op: operand}}, tenant_id="t1"))
    strings = [t for t in tokens if t.kind == "str"]
    assert strings[0] == Token("str", "t1")
    assert value in [t.text for t in strings[1:]]
    assert shape(tokens) == shape(
        tokenize(compile_json({field: {op: ["x"] if op in ("in", "nin") else "x"}}, tenant_id="t1"))
    )


@given(
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte"]),
    numbers,
    st.sampled_from([*INT_FIELDS, "metadata.k"]),
)
def test_any_number_stays_one_literal(op: str, value: float, field: str) -> None:
    tokens = tokenize(compile_json({field: {op: value}}, tenant_id="t1"))
    (number,) = [t for t in tokens if t.kind == "num"]
    assert (int if isinstance(value, int) else float)(number.text) == value
    assert shape(tokens) == shape(tokenize(compile_json({field: {op: 1}}, tenant_id="t1")))


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
    assert_tenant_first(compile_json(filter, tenant_id=tenant_id), tenant_id)


@given(json_garbage)
def test_any_json_compiles_safely_or_is_rejected(filter: object) -> None:
    try:
        expr = compile_json(filter, tenant_id="t1")
    except InvalidFilterError:
        return
    assert_tenant_first(expr, "t1")
