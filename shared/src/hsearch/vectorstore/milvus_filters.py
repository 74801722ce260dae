"""A parsed filter rendered as a Milvus boolean expression, tenant condition first.

Pure: no I/O, no pymilvus. It takes the tree that
:func:`~hsearch.vectorstore.filters.parse_filter` built (never raw JSON: the request
was validated once, upstream) and the tenant.

Every sub-expression is parenthesised; string literals are double-quoted by
:func:`quote_string` (Milvus has no filter templating, so user text is only ever put
inside a quoted literal); ``in``/``nin`` on a metadata path become an ``or`` of
equalities (Milvus Lite rejects ``in`` on JSON paths); a negative number given to
``contains`` is parenthesised (Milvus rejects ``ARRAY_CONTAINS(x, -1)``). The
expressions are checked against Milvus Lite by ``tests/integration/test_filters_milvus.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from hsearch.errors import HsearchError, InvalidRequestError
from hsearch.vectorstore.filters import (
    And,
    CompareOp,
    Comparison,
    Contains,
    ContainsMode,
    Exists,
    FieldRef,
    FilterNode,
    Membership,
    Not,
    Or,
    Scalar,
)
from hsearch.vectorstore.schema import TENANT_FIELD

__all__ = [
    "compile_filter",
    "field_expression",
    "quote_string",
    "render_expression",
    "tenant_expression",
]

_SYMBOLS: Final = {
    CompareOp.EQ: "==",
    CompareOp.NE: "!=",
    CompareOp.GT: ">",
    CompareOp.GTE: ">=",
    CompareOp.LT: "<",
    CompareOp.LTE: "<=",
}
_FUNCTIONS: Final = {
    ContainsMode.ONE: "ARRAY_CONTAINS",
    ContainsMode.ANY: "ARRAY_CONTAINS_ANY",
    ContainsMode.ALL: "ARRAY_CONTAINS_ALL",
}


# --------------------------------------------------------------------------- literals


def quote_string(value: str) -> str:
    """``value`` as a double-quoted Milvus string literal.

    Escapes backslash, double quote, line feed, carriage return and tab; the Milvus
    parser knows no other escapes (no ``\\u``, no ``\\x``) and takes every other
    character, control characters included, literally. A bare line feed or carriage
    return would end the literal, which is why those two are escaped.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        shown = repr(value)
        if len(shown) > 64:
            shown = shown[:63] + "…"
        msg = f"string {shown} is not valid Unicode (it holds a lone surrogate)"
        raise InvalidRequestError(msg) from None
    return '"' + value.translate(_ESCAPES) + '"'


_ESCAPES: Final = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def _literal(value: Scalar) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # repr is the shortest round-trip form (1e+16, 5e-324, -0.0); values are finite.
        return repr(value)
    return quote_string(value)


def _list_literal(values: Sequence[Scalar]) -> str:
    return "[" + ", ".join(_literal(v) for v in values) + "]"


def field_expression(ref: FieldRef) -> str:
    """The Milvus form of a field path: ``metadata["author"]["name"]``."""
    return ref.spec.name + "".join(f"[{quote_string(key)}]" for key in ref.keys)


def tenant_expression(tenant_id: str) -> str:
    """The tenant condition every compiled filter starts with."""
    if not isinstance(tenant_id, str) or not tenant_id:
        msg = f"tenant_id must be a non-empty string, got {tenant_id!r}"
        raise HsearchError(msg)
    return f"{TENANT_FIELD} == {quote_string(tenant_id)}"


# --------------------------------------------------------------------------- compiling


def compile_filter(node: FilterNode | None, *, tenant_id: str) -> str:
    """The Milvus expression for one search leg: the tenant and a parsed filter.

    The result is ``tenant_id == "<tenant>"``, followed by ``and (<user expression>)``
    when there is a filter, so no filter can widen the search beyond the tenant.
    """
    tenant = tenant_expression(tenant_id)
    if node is None:
        return tenant
    return f"{tenant} and ({render_expression(node)})"


def render_expression(node: FilterNode) -> str:
    """The Milvus expression for a parsed filter (without the tenant condition)."""
    if isinstance(node, And):
        return " and ".join(f"({render_expression(c)})" for c in node.children)
    if isinstance(node, Or):
        return " or ".join(f"({render_expression(c)})" for c in node.children)
    if isinstance(node, Not):
        return f"not ({render_expression(node.child)})"
    return _render_leaf(node)


def _render_leaf(node: Comparison | Membership | Contains | Exists) -> str:
    ref = field_expression(node.ref)
    if isinstance(node, Comparison):
        return f"{ref} {_SYMBOLS[node.op]} {_literal(node.value)}"
    if isinstance(node, Membership):
        if node.ref.is_json:
            either = " or ".join(f"{ref} == {_literal(v)}" for v in node.values)
            return f"not ({either})" if node.negated else f"({either})"
        keyword = "not in" if node.negated else "in"
        return f"{ref} {keyword} {_list_literal(node.values)}"
    if isinstance(node, Contains):
        if node.mode is ContainsMode.ONE:
            operand = _literal(node.values[0])
            if operand.startswith("-"):
                # Milvus reads no unary minus in a function argument: (-50) parses.
                operand = f"({operand})"
        else:
            operand = _list_literal(node.values)
        return f"{_FUNCTIONS[node.mode]}({ref}, {operand})"
    test = f"exists {ref}"
    return test if node.present else f"not ({test})"
