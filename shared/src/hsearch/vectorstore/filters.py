"""The JSON filter language: a typed tree, its parser and a Python evaluator.

Pure: no I/O. :func:`parse_filter` validates a request's ``filter`` (raw JSON) against
the field whitelist of :mod:`hsearch.vectorstore.schema` and returns a typed tree, or
``None`` when it filters nothing; the search service parses once per request and hands
the tree to every leg. A store renders it for its engine
(:mod:`hsearch.vectorstore.milvus_filters`) or evaluates it with :func:`matches`, which
has the semantics Milvus has (the in-memory store and the tests use it).

The tree is immutable and hashable: every node is a frozen dataclass and list operands
are tuples, so a parsed filter can be part of a cache key. Equality is by value, with
Python's equality on operands (``1 == 1.0 == True``), which is also how the filter
compares them (booleans are the numbers 0/1): equal trees select the same rows.

The language for users (grammar, operators, value rules, limits, metadata-path
semantics, error messages) is described in ``docs/filters.md``.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any, Final, Literal, TypeAlias, TypeGuard, assert_never

from hsearch.errors import InvalidFilterError, InvalidRequestError
from hsearch.vectorstore.schema import (
    METADATA_FIELD,
    TENANT_FIELD,
    USER_FIELDS,
    USER_FIELDS_BY_NAME,
    FieldSpec,
    FieldType,
)

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DEPTH",
    "MAX_LIST_VALUES",
    "MAX_NODES",
    "MAX_PATH_KEYS",
    "MAX_STRING_BYTES",
    "MAX_VALUES",
    "MISSING",
    "And",
    "CompareOp",
    "Comparison",
    "Contains",
    "ContainsMode",
    "Exists",
    "FieldRef",
    "FilterNode",
    "Membership",
    "Not",
    "Or",
    "Scalar",
    "lookup_value",
    "matches",
    "parse_filter",
    "resolve_field",
]

MAX_DEPTH: Final = 16
MAX_NODES: Final = 256
MAX_LIST_VALUES: Final = 1024
MAX_VALUES: Final = 2048
MAX_STRING_BYTES: Final = 4096
MAX_PATH_KEYS: Final = 8
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1

_KEY_RE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
_COMBINATORS: Final = ("and", "or", "not")

Scalar: TypeAlias = str | int | float | bool


class _Missing(Enum):
    MISSING = "MISSING"

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing.MISSING
"""What :func:`lookup_value` returns for an absent field, key or JSON ``null``."""


class CompareOp(StrEnum):
    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GTE = "gte"
    LT = "lt"
    LTE = "lte"


class ContainsMode(StrEnum):
    ONE = "contains"
    ANY = "contains_any"
    ALL = "contains_all"


_ORDERING: Final = frozenset({CompareOp.GT, CompareOp.GTE, CompareOp.LT, CompareOp.LTE})

# Operators by kind of path, in the order error messages list them.
_SCALAR_OPS: Final = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "range")
_BOOL_OPS: Final = ("eq", "ne", "in", "nin")
_ARRAY_OPS: Final = ("contains", "contains_any", "contains_all")
_JSON_OPS: Final = (*_SCALAR_OPS, *_ARRAY_OPS, "exists")
_ALL_OPS: Final = frozenset(_JSON_OPS)


# --------------------------------------------------------------------------- the tree


@dataclass(frozen=True, slots=True)
class FieldRef:
    """A validated field path: a whitelisted field, plus keys inside the JSON field."""

    spec: FieldSpec
    keys: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        """The dotted form users write: ``metadata.author.name``."""
        return ".".join((self.spec.name, *self.keys))

    @property
    def is_json(self) -> bool:
        return self.spec.type is FieldType.JSON


@dataclass(frozen=True, slots=True)
class Comparison:
    ref: FieldRef
    op: CompareOp
    value: Scalar


@dataclass(frozen=True, slots=True)
class Membership:
    """``in`` (or ``nin`` when ``negated``)."""

    ref: FieldRef
    values: tuple[Scalar, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Contains:
    ref: FieldRef
    mode: ContainsMode
    values: tuple[Scalar, ...]  # exactly one for ContainsMode.ONE


@dataclass(frozen=True, slots=True)
class Exists:
    ref: FieldRef
    present: bool = True


@dataclass(frozen=True, slots=True)
class And:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True, slots=True)
class Or:
    children: tuple[FilterNode, ...]


@dataclass(frozen=True, slots=True)
class Not:
    child: FilterNode


FilterNode: TypeAlias = Comparison | Membership | Contains | Exists | And | Or | Not


# --------------------------------------------------------------------------- parsing


@dataclass(slots=True)
class _Budget:
    nodes: int = 0
    values: int = 0

    def node(self, location: str) -> None:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            msg = f"{location}: the filter has more than {MAX_NODES} conditions"
            raise InvalidFilterError(msg)

    def value(self, location: str) -> None:
        self.values += 1
        if self.values > MAX_VALUES:
            msg = f"{location}: the filter holds more than {MAX_VALUES} values in all"
            raise InvalidFilterError(msg)


def parse_filter(filter: object | None) -> FilterNode | None:
    """Validate a request's JSON filter into a typed tree; ``None`` when it filters nothing.

    Accepts what a JSON parser yields (dicts, lists, strings, numbers, booleans, None);
    raises :class:`~hsearch.errors.InvalidFilterError` naming the offending part.
    """
    if filter is None or (isinstance(filter, Mapping) and not filter):
        return None
    return _parse_node(filter, "filter", 1, _Budget())


def _parse_node(raw: object, loc: str, depth: int, budget: _Budget) -> FilterNode:
    if depth > MAX_DEPTH:
        msg = f"{loc}: the filter nests deeper than {MAX_DEPTH} levels"
        raise InvalidFilterError(msg)
    if not isinstance(raw, Mapping):
        msg = (
            f"{loc}: expected an object with one key, a field path (such as"
            f' {{"source": {{"eq": "wiki"}}}}) or one of and, or, not; got {_describe(raw)}'
        )
        raise InvalidFilterError(msg)
    if len(raw) != 1:
        keys = ", ".join(_show(k) for k in raw) or "none"
        msg = (
            f"{loc}: an object must hold exactly one key (a field path or one of and, or,"
            f" not); got {len(raw)} ({keys}); combine conditions with and"
        )
        raise InvalidFilterError(msg)
    ((key, value),) = raw.items()
    if not isinstance(key, str):
        msg = f"{loc}: keys must be strings, got {_describe(key)}"
        raise InvalidFilterError(msg)
    here = f"{loc}.{_short(key)}"
    if key in ("and", "or"):
        budget.node(here)
        if not _is_list(value) or not value:
            msg = f"{here}: expected a non-empty list of conditions, got {_describe(value)}"
            raise InvalidFilterError(msg)
        children = tuple(
            _parse_node(child, f"{here}[{i}]", depth + 1, budget) for i, child in enumerate(value)
        )
        return And(children) if key == "and" else Or(children)
    if key == "not":
        budget.node(here)
        return Not(_parse_node(value, here, depth + 1, budget))
    ref = resolve_field(key, location=here)
    return _parse_conditions(ref, value, here, budget)


def _parse_conditions(ref: FieldRef, raw: object, loc: str, budget: _Budget) -> FilterNode:
    allowed = _allowed_ops(ref)
    if not isinstance(raw, Mapping) or not raw:
        msg = (
            f"{loc}: expected an object of operators such as"
            f' {{"{allowed[0]}": ...}} (allowed for {_what(ref)}: {", ".join(allowed)});'
            f" got {_describe(raw)}"
        )
        raise InvalidFilterError(msg)
    nodes: list[FilterNode] = []
    for op, operand in raw.items():
        here = f"{loc}.{_short(op) if isinstance(op, str) else _describe(op)}"
        budget.node(here)
        nodes.append(_parse_operator(ref, op, operand, here, budget))
    return nodes[0] if len(nodes) == 1 else And(tuple(nodes))


def _allowed_ops(ref: FieldRef) -> tuple[str, ...]:
    if ref.is_json:
        return _JSON_OPS
    if ref.spec.type is FieldType.STRING_ARRAY:
        return _ARRAY_OPS
    if ref.spec.type is FieldType.BOOL:
        return _BOOL_OPS
    return _SCALAR_OPS


def _parse_operator(
    ref: FieldRef, op: object, operand: object, loc: str, budget: _Budget
) -> FilterNode:
    allowed = _allowed_ops(ref)
    if op not in allowed:
        raise InvalidFilterError(_operator_error(ref, op, allowed, loc))
    if op == "range":
        return _parse_range(ref, operand, loc, budget)
    if op in ("in", "nin"):
        values = _parse_list(ref, operand, loc, budget, for_op="eq")
        return Membership(ref, values, negated=op == "nin")
    if op == "contains":
        budget.value(loc)
        return Contains(ref, ContainsMode.ONE, (_parse_value(ref, operand, loc, "contains"),))
    if op in ("contains_any", "contains_all"):
        values = _parse_list(ref, operand, loc, budget, for_op="contains")
        return Contains(ref, ContainsMode(str(op)), values)
    if op == "exists":
        if not isinstance(operand, bool):
            msg = f"{loc}: expected true or false, got {_describe(operand)}"
            raise InvalidFilterError(msg)
        return Exists(ref, present=operand)
    compare = CompareOp(str(op))
    budget.value(loc)
    return Comparison(ref, compare, _parse_value(ref, operand, loc, compare.value))


def _operator_error(ref: FieldRef, op: object, allowed: tuple[str, ...], loc: str) -> str:
    listed = ", ".join(allowed)
    if op not in _ALL_OPS:
        return f"{loc}: unknown operator {_show(op)}; allowed for {_what(ref)}: {listed}"
    if ref.spec.type is FieldType.STRING_ARRAY:
        return f"{loc}: field {ref.path!r} is an array; use {listed}"
    if op == "exists":
        return (
            f"{loc}: exists applies to metadata paths only (field {ref.path!r} is always"
            f" present); allowed for {_what(ref)}: {listed}"
        )
    if op in _ARRAY_OPS:
        return (
            f"{loc}: {op} applies to array fields and metadata paths; field {ref.path!r}"
            f" is a {ref.spec.type.value}; allowed: {listed}"
        )
    return f"{loc}: field {ref.path!r} is a {ref.spec.type.value}; use {listed}"


def _parse_range(ref: FieldRef, raw: object, loc: str, budget: _Budget) -> FilterNode:
    bounds = ("gt", "gte", "lt", "lte")
    if not isinstance(raw, Mapping) or not raw:
        msg = (
            f"{loc}: expected an object of bounds such as"
            f' {{"gte": 1, "lt": 10}} (allowed: {", ".join(bounds)}); got {_describe(raw)}'
        )
        raise InvalidFilterError(msg)
    for key in raw:
        if key not in bounds:
            msg = f"{loc}: unknown bound {_show(key)}; allowed: {', '.join(bounds)}"
            raise InvalidFilterError(msg)
    for pair in (("gt", "gte"), ("lt", "lte")):
        if all(k in raw for k in pair):
            msg = f"{loc}: give either {pair[0]} or {pair[1]}, not both"
            raise InvalidFilterError(msg)
    parts: list[Comparison] = []
    for key in bounds:
        if key in raw:
            budget.value(f"{loc}.{key}")
            parts.append(
                Comparison(ref, CompareOp(key), _parse_value(ref, raw[key], f"{loc}.{key}", key))
            )
    if len(parts) == 2:
        low, high = parts[0].value, parts[1].value
        if isinstance(low, str) != isinstance(high, str):
            msg = f"{loc}: both bounds must be numbers or both strings"
            raise InvalidFilterError(msg)
        if _ORDER_FUNCTIONS[CompareOp.GT](low, high):
            msg = f"{loc}: the lower bound {_json(low)} is above the upper bound {_json(high)}"
            raise InvalidFilterError(msg)
        budget.node(loc)  # the implicit "and"
        return And(tuple(parts))
    return parts[0]


def _parse_list(
    ref: FieldRef, raw: object, loc: str, budget: _Budget, *, for_op: str
) -> tuple[Scalar, ...]:
    if not _is_list(raw) or not raw:
        msg = f"{loc}: expected a non-empty list of values, got {_describe(raw)}"
        raise InvalidFilterError(msg)
    if len(raw) > MAX_LIST_VALUES:
        msg = f"{loc}: at most {MAX_LIST_VALUES} values, got {len(raw)}"
        raise InvalidFilterError(msg)
    values: list[Scalar] = []
    for i, item in enumerate(raw):
        budget.value(f"{loc}[{i}]")
        values.append(_parse_value(ref, item, f"{loc}[{i}]", for_op))
    return tuple(values)


def _parse_value(ref: FieldRef, raw: object, loc: str, op: str) -> Scalar:  # noqa: PLR0912
    ordering = op in ("gt", "gte", "lt", "lte")
    kind = ref.spec.type
    accepted: tuple[str, ...]
    if kind is FieldType.JSON:
        accepted = ("string", "number") if ordering else ("string", "number", "boolean")
    elif kind in (FieldType.STRING, FieldType.STRING_ARRAY):
        accepted = ("string",)
    elif kind in (FieldType.INT, FieldType.FLOAT):
        accepted = ("number",)
    elif kind is FieldType.BOOL:
        accepted = ("boolean",)
    else:  # pragma: no cover - every FieldType is listed above
        assert_never(kind)
    if isinstance(raw, bool):
        if "boolean" in accepted:
            return raw
    elif isinstance(raw, int):
        if "number" in accepted:
            if not INT64_MIN <= raw <= INT64_MAX:
                msg = f"{loc}: integer {raw} is outside the 64-bit range"
                raise InvalidFilterError(msg)
            return raw
    elif isinstance(raw, float):
        if "number" in accepted:
            if not math.isfinite(raw):
                msg = f"{loc}: numbers must be finite, got {raw}"
                raise InvalidFilterError(msg)
            return raw
    elif isinstance(raw, str) and "string" in accepted:
        try:
            size = len(raw.encode("utf-8"))
        except UnicodeEncodeError:
            msg = f"{loc}: the string is not valid Unicode (it holds a lone surrogate)"
            raise InvalidFilterError(msg) from None
        if size > MAX_STRING_BYTES:
            msg = f"{loc}: strings are at most {MAX_STRING_BYTES} bytes (UTF-8), got {size}"
            raise InvalidFilterError(msg)
        return raw
    holds = " or ".join(accepted)
    if kind is FieldType.STRING_ARRAY:
        what = f"field {ref.path!r} holds strings"
    elif kind is FieldType.JSON:
        what = f"{op} on a metadata path takes a {holds}"
    else:
        what = f"field {ref.path!r} holds {holds}s"
    msg = f"{loc}: {what}; got {_describe(raw)}"
    raise InvalidFilterError(msg)


# --------------------------------------------------------------------------- field paths


def resolve_field(
    path: object, *, location: str, purpose: Literal["filter", "facet"] = "filter"
) -> FieldRef:
    """Validate a dotted field path (``source``, ``metadata.author.name``) against the
    whitelist: filterable fields for ``purpose="filter"`` (errors are
    :class:`~hsearch.errors.InvalidFilterError`), facetable ones for ``"facet"``
    (:class:`~hsearch.errors.InvalidRequestError`). ``location`` prefixes error messages.
    """
    error = InvalidFilterError if purpose == "filter" else InvalidRequestError
    usable = [
        spec.name
        for spec in USER_FIELDS
        if (spec.filterable if purpose == "filter" else spec.facetable)
        and spec.type is not FieldType.JSON
    ]
    json_fields = [
        f"{spec.name}.<key>"
        for spec in USER_FIELDS
        if spec.type is FieldType.JSON
        and (spec.filterable if purpose == "filter" else spec.facetable)
    ]
    allowed = ", ".join(usable + json_fields)
    if not isinstance(path, str):
        msg = (
            f"{location}: a field path must be a string, got {_describe(path)}; allowed: {allowed}"
        )
        raise error(msg)
    head, *keys = path.split(".")
    spec = USER_FIELDS_BY_NAME.get(head)
    if head == TENANT_FIELD:
        msg = (
            f"{location}: field {TENANT_FIELD!r} cannot be used in a {purpose} (the tenant"
            f" comes from the API key); allowed: {allowed}"
        )
        raise error(msg)
    if spec is None:
        msg = f"{location}: unknown field {_show(head)}; allowed: {allowed}"
        raise error(msg)
    if not (spec.filterable if purpose == "filter" else spec.facetable):
        adjective = "filterable" if purpose == "filter" else "facetable"
        msg = f"{location}: field {head!r} is not {adjective}; allowed: {allowed}"
        raise error(msg)
    if spec.type is not FieldType.JSON:
        if keys:
            msg = (
                f"{location}: field {head!r} has no nested keys (only {METADATA_FIELD}.<key>"
                f" paths do); allowed: {allowed}"
            )
            raise error(msg)
        return FieldRef(spec)
    if not keys:
        msg = (
            f"{location}: field {head!r} is a JSON object; name a key inside it,"
            f" such as {head}.author"
        )
        raise error(msg)
    if len(keys) > MAX_PATH_KEYS:
        msg = f"{location}: at most {MAX_PATH_KEYS} keys after {head!r}, got {len(keys)}"
        raise error(msg)
    for key in keys:
        if not _KEY_RE.fullmatch(key):
            msg = (
                f"{location}: key {_show(key)} is not allowed in a {head} path; keys are 1 to"
                " 64 characters from A-Z, a-z, 0-9, '_' and '-'"
            )
            raise error(msg)
    return FieldRef(spec, tuple(keys))


# --------------------------------------------------------------------------- evaluating


def lookup_value(ref: FieldRef, row: Mapping[str, object]) -> object:
    """The value at ``ref`` in a row (a hit's output fields), or :data:`MISSING` when the
    field or key is absent, the path crosses a non-object, or the value is ``null``."""
    value: object = row.get(ref.spec.name)
    for key in ref.keys:
        if not isinstance(value, Mapping):
            return MISSING
        value = value.get(key)
    return MISSING if value is None else value


def matches(node: FilterNode | None, row: Mapping[str, object]) -> bool:
    """Whether a row passes a parsed filter, with the semantics Milvus applies (see
    docs/filters.md): an unknown result, as for a missing metadata key, does not pass.

    The tenant is not checked here: the caller keeps rows of one tenant only.
    """
    return node is None or _evaluate(node, row) is True


def _evaluate(node: FilterNode, row: Mapping[str, object]) -> bool | None:
    """Kleene three-valued logic: ``None`` is unknown."""
    if isinstance(node, And):
        results = [_evaluate(child, row) for child in node.children]
        if False in results:
            return False
        return None if None in results else True
    if isinstance(node, Or):
        results = [_evaluate(child, row) for child in node.children]
        if True in results:
            return True
        return None if None in results else False
    if isinstance(node, Not):
        result = _evaluate(node.child, row)
        return None if result is None else not result
    return _evaluate_leaf(node, lookup_value(node.ref, row))


def _evaluate_leaf(  # noqa: PLR0911 - one return per operator reads best
    node: Comparison | Membership | Contains | Exists, value: object
) -> bool | None:
    if isinstance(node, Exists):
        return (value is not MISSING) is node.present
    if isinstance(node, Contains):
        if not _is_list(value):
            return False
        found = [any(_equal(element, v) for element in value) for v in node.values]
        return all(found) if node.mode is ContainsMode.ALL else any(found)
    if value is MISSING:
        return None
    if isinstance(node, Membership):
        return any(_equal(value, v) for v in node.values) is not node.negated
    if node.op is CompareOp.EQ:
        return _equal(value, node.value)
    if node.op is CompareOp.NE:
        return not _equal(value, node.value)
    return _order(value, node.op, node.value)


def _is_number(value: object) -> bool:
    # JSON booleans compare as numbers in Milvus (true == 1), as they do in Python.
    return isinstance(value, int | float)


def _equal(value: object, operand: Scalar) -> bool:
    if isinstance(operand, str):
        return isinstance(value, str) and value == operand
    return _is_number(value) and value == operand


def _order(value: object, op: CompareOp, operand: Scalar) -> bool | None:
    same_kind = isinstance(value, str) if isinstance(operand, str) else _is_number(value)
    return _ORDER_FUNCTIONS[op](value, operand) if same_kind else None


_ORDER_FUNCTIONS: Final[dict[CompareOp, Callable[[Any, Any], bool]]] = {
    CompareOp.GT: operator.gt,
    CompareOp.GTE: operator.ge,
    CompareOp.LT: operator.lt,
    CompareOp.LTE: operator.le,
}


# --------------------------------------------------------------------------- messages


def _is_list(value: object) -> TypeGuard[list[object] | tuple[object, ...]]:
    return isinstance(value, list | tuple)


_TYPE_NAMES: Final = ((bool, "boolean"), (int, "number"), (float, "number"), (str, "string"))


def _describe(value: object) -> str:
    if value is None:
        return "null"
    for kind, name in _TYPE_NAMES:
        if isinstance(value, kind):
            shown = ("true" if value else "false") if kind is bool else _show(value)
            return f"{name} {shown}"
    if isinstance(value, Mapping):
        return "an object" if value else "an empty object"
    if _is_list(value):
        return "a list" if value else "an empty list"
    return f"a {type(value).__name__}"


def _json(value: Scalar) -> str:
    """A value as the user wrote it in the request (JSON)."""
    return json.dumps(value, ensure_ascii=False)


def _show(value: object, limit: int = 64) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short(key: str, limit: int = 64) -> str:
    return key if len(key) <= limit else key[: limit - 1] + "…"


def _what(ref: FieldRef) -> str:
    if ref.is_json:
        return f"metadata path {ref.path!r}"
    return f"{ref.spec.type.value} field {ref.path!r}"
