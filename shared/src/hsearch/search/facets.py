"""Facet counts over a set of hits (the fused candidates of one search).

Pure: no I/O. A hit is a mapping of output field name to value, as Milvus returns it
(``metadata`` is a dict, ``tags`` a list of strings, ``document_id`` a string).

Two kinds of facet, chosen by the request:

* **terms** (no ``ranges``): one bucket per distinct value, the ``size`` largest counts
  first; ties are broken by value ascending (numbers, then strings, then booleans) so the
  answer is deterministic. An array (``tags``, or a list at a metadata path) counts each
  distinct element once. ``other`` is the sum of the counts cut off by ``size``.
* **ranges** (numeric fields and metadata paths only): one bucket per requested range,
  in request order; ``from`` is inclusive, ``to`` exclusive, either may be open. Ranges
  may overlap (a value counts in each range holding it). ``other`` counts the units with
  a value that falls in no range (non-numeric values included).

What is counted (a "unit") is a hit, or with ``group_by_document=True`` a document: then
each document counts once per value however many of its chunks are in the set, and its
values are the union of its chunks' values. ``missing`` counts the units with no value
at all (absent field or key, JSON ``null``, the empty string, empty array, or an object).
The empty string is how the store holds a string field that was not given (``lang``,
``source``: its columns have no null), so it is never a bucket of its own.

Requests are validated against the schema whitelist: a non-facetable field, ``ranges`` on
a non-numeric field or a malformed range raise :class:`~hsearch.errors.InvalidRequestError`
with the location (``facets[1].ranges[0].to``) and what is allowed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

from hsearch.errors import HsearchError, InvalidRequestError
from hsearch.vectorstore.filters import MISSING, FieldRef, lookup_value, resolve_field
from hsearch.vectorstore.schema import FieldType

__all__ = [
    "MAX_FACETS",
    "MAX_FACET_SIZE",
    "MAX_LABEL_CHARS",
    "MAX_RANGES",
    "FacetBucket",
    "FacetRange",
    "FacetRequest",
    "FacetResult",
    "FacetValue",
    "compute_facets",
    "parse_facet_requests",
    "validate_facet_requests",
]

MAX_FACETS: Final = 20
MAX_FACET_SIZE: Final = 100
MAX_RANGES: Final = 32
MAX_LABEL_CHARS: Final = 128

FacetValue: TypeAlias = str | int | float | bool
Number: TypeAlias = int | float

_NUMERIC: Final = frozenset({FieldType.INT, FieldType.FLOAT, FieldType.JSON})


@dataclass(frozen=True, slots=True)
class FacetRange:
    """A numeric bucket ``[from_, to)``; ``None`` leaves that side open.

    The label defaults to ``"<from>..<to>"`` with ``*`` for an open side (``"*..10"``).
    """

    from_: Number | None = None
    to: Number | None = None
    label: str | None = None

    @property
    def name(self) -> str:
        if self.label is not None:
            return self.label
        return f"{_format_number(self.from_)}..{_format_number(self.to)}"


@dataclass(frozen=True, slots=True)
class FacetRequest:
    """Count the values of ``field`` (``source``, ``tags``, ``metadata.author``).

    ``size`` caps the terms buckets (ignored with ``ranges``).
    """

    field: str
    size: int = 10
    ranges: tuple[FacetRange, ...] = ()


@dataclass(frozen=True, slots=True)
class FacetBucket:
    """One bucket: a term and its count, or a range (``value`` is then its label)."""

    value: FacetValue
    count: int
    from_: Number | None = None
    to: Number | None = None


@dataclass(frozen=True, slots=True)
class FacetResult:
    field: str
    buckets: tuple[FacetBucket, ...]
    missing: int
    """Units (hits, or documents) with no value for the field."""
    other: int
    """Terms: the counts cut off by ``size``. Ranges: units whose values fall in no range."""


# --------------------------------------------------------------------------- validation


def parse_facet_requests(raw: object) -> tuple[FacetRequest, ...]:
    """Build requests from JSON: a list whose items are a field path (``"source"``) or an
    object ``{"field": ..., "size"?: int, "ranges"?: [{"from"?, "to"?, "label"?}]}``.
    ``None`` means no facets. The requests are validated as by
    :func:`validate_facet_requests`.
    """
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        msg = f"facets: expected a list of facet requests, got {describe_type(raw)}"
        raise InvalidRequestError(msg)
    if len(raw) > MAX_FACETS:
        msg = f"facets: at most {MAX_FACETS} facet requests, got {len(raw)}"
        raise InvalidRequestError(msg)
    requests = tuple(_parse_request(item, f"facets[{i}]") for i, item in enumerate(raw))
    validate_facet_requests(requests)
    return requests


def _parse_request(raw: object, loc: str) -> FacetRequest:
    if isinstance(raw, str):
        return FacetRequest(raw)
    if not isinstance(raw, Mapping):
        msg = (
            f'{loc}: expected a field path or an object such as {{"field": "source",'
            f' "size": 10}}, got {describe_type(raw)}'
        )
        raise InvalidRequestError(msg)
    _check_keys(raw, ("field", "size", "ranges"), loc)
    if "field" not in raw:
        msg = f"{loc}.field: required"
        raise InvalidRequestError(msg)
    size = raw.get("size", 10)
    if not isinstance(size, int) or isinstance(size, bool):
        msg = (
            f"{loc}.size: expected an integer from 1 to {MAX_FACET_SIZE}, got {describe_type(size)}"
        )
        raise InvalidRequestError(msg)
    ranges_raw = raw.get("ranges")
    if ranges_raw is None:
        ranges_raw = []
    if not isinstance(ranges_raw, list | tuple):
        msg = f"{loc}.ranges: expected a list of ranges, got {describe_type(ranges_raw)}"
        raise InvalidRequestError(msg)
    ranges: list[FacetRange] = []
    for i, item in enumerate(ranges_raw):
        here = f"{loc}.ranges[{i}]"
        if not isinstance(item, Mapping):
            got = describe_type(item)
            msg = f'{here}: expected an object such as {{"from": 0, "to": 10}}, got {got}'
            raise InvalidRequestError(msg)
        _check_keys(item, ("from", "to", "label"), here)
        ranges.append(
            FacetRange(
                from_=_number_or_none(item.get("from"), f"{here}.from"),
                to=_number_or_none(item.get("to"), f"{here}.to"),
                label=_label_or_none(item.get("label"), f"{here}.label"),
            )
        )
    return FacetRequest(raw["field"], size=size, ranges=tuple(ranges))


def _check_keys(raw: Mapping[object, object], allowed: tuple[str, ...], loc: str) -> None:
    for key in raw:
        if key not in allowed:
            msg = f"{loc}: unknown key {shorten(key)}; allowed: {', '.join(allowed)}"
            raise InvalidRequestError(msg)


def _number_or_none(raw: object, loc: str) -> Number | None:
    if raw is None or (isinstance(raw, int | float) and not isinstance(raw, bool)):
        return raw
    msg = f"{loc}: expected a number, got {describe_type(raw)}"
    raise InvalidRequestError(msg)


def _label_or_none(raw: object, loc: str) -> str | None:
    if raw is None or isinstance(raw, str):
        return raw
    msg = f"{loc}: expected a string, got {describe_type(raw)}"
    raise InvalidRequestError(msg)


def validate_facet_requests(requests: Sequence[FacetRequest]) -> tuple[FieldRef, ...]:
    """Check requests against the schema and limits; returns each request's field.

    Raises :class:`~hsearch.errors.InvalidRequestError` naming the request
    (``facets[1].field``) and listing what is allowed.
    """
    if len(requests) > MAX_FACETS:
        msg = f"facets: at most {MAX_FACETS} facet requests, got {len(requests)}"
        raise InvalidRequestError(msg)
    return tuple(_validate(request, f"facets[{i}]") for i, request in enumerate(requests))


def _validate(request: FacetRequest, loc: str) -> FieldRef:
    ref = resolve_field(request.field, location=f"{loc}.field", purpose="facet")
    size = request.size
    if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= MAX_FACET_SIZE:
        msg = f"{loc}.size: expected an integer from 1 to {MAX_FACET_SIZE}, got {size!r}"
        raise InvalidRequestError(msg)
    if not request.ranges:
        return ref
    if ref.spec.type not in _NUMERIC:
        msg = (
            f"{loc}.ranges: ranges apply to numeric fields and metadata paths; field"
            f" {ref.path!r} is a {ref.spec.type.value}"
        )
        raise InvalidRequestError(msg)
    if len(request.ranges) > MAX_RANGES:
        msg = f"{loc}.ranges: at most {MAX_RANGES} ranges, got {len(request.ranges)}"
        raise InvalidRequestError(msg)
    seen: set[str] = set()
    for i, bucket in enumerate(request.ranges):
        here = f"{loc}.ranges[{i}]"
        for side, bound in (("from", bucket.from_), ("to", bucket.to)):
            if bound is not None and not _is_finite_number(bound):
                msg = f"{here}.{side}: expected a finite number or null, got {bound!r}"
                raise InvalidRequestError(msg)
        if bucket.from_ is None and bucket.to is None:
            msg = f"{here}: give from, to or both"
            raise InvalidRequestError(msg)
        if bucket.from_ is not None and bucket.to is not None and bucket.from_ >= bucket.to:
            msg = f"{here}: from ({bucket.from_}) must be below to ({bucket.to})"
            raise InvalidRequestError(msg)
        if bucket.label is not None and not (
            isinstance(bucket.label, str) and 0 < len(bucket.label) <= MAX_LABEL_CHARS
        ):
            msg = f"{here}.label: expected a string of 1 to {MAX_LABEL_CHARS} characters"
            raise InvalidRequestError(msg)
        if bucket.name in seen:
            msg = f"{here}: duplicate range label {bucket.name!r}; labels must be unique"
            raise InvalidRequestError(msg)
        seen.add(bucket.name)
    return ref


# --------------------------------------------------------------------------- counting


def compute_facets(
    hits: Sequence[Mapping[str, object]],
    requests: Sequence[FacetRequest],
    *,
    group_by_document: bool,
) -> list[FacetResult]:
    """Count facet values over ``hits``, one result per request, in request order.

    With ``group_by_document`` every hit must carry ``document_id``; each document then
    counts once per value.
    """
    refs = validate_facet_requests(requests)
    units = _units(hits, group_by_document=group_by_document)
    results: list[FacetResult] = []
    for request, ref in zip(requests, refs, strict=True):
        values = [_unit_values(unit, ref) for unit in units]
        if request.ranges:
            results.append(_count_ranges(request, values))
        else:
            results.append(_count_terms(request, values))
    return results


_Key: TypeAlias = tuple[int, FacetValue]
"""A value with its kind first: keeps ``True``, ``1`` and ``"1"`` apart, merges ``1`` and
``1.0``, and sorts numbers before strings before booleans."""

_NUMBER, _STRING, _BOOLEAN = 0, 1, 2


def _units(
    hits: Sequence[Mapping[str, object]], *, group_by_document: bool
) -> list[list[Mapping[str, object]]]:
    if not group_by_document:
        return [[hit] for hit in hits]
    documents: defaultdict[object, list[Mapping[str, object]]] = defaultdict(list)
    for i, hit in enumerate(hits):
        document_id = hit.get("document_id")
        if document_id is None:
            msg = f"facets: hit {i} has no document_id, which group_by_document needs"
            raise HsearchError(msg)
        documents[document_id].append(hit)
    return list(documents.values())


def _unit_values(unit: Iterable[Mapping[str, object]], ref: FieldRef) -> set[_Key]:
    keys: set[_Key] = set()
    for hit in unit:
        value = lookup_value(ref, hit)
        if value is MISSING:
            continue
        for item in value if isinstance(value, list | tuple) else (value,):
            key = _key(item)
            if key is not None:
                keys.add(key)
    return keys


def _key(value: object) -> _Key | None:
    """Null elements, empty strings, nested objects and arrays, and NaN are not facet
    values."""
    if isinstance(value, bool):
        return (_BOOLEAN, value)
    if isinstance(value, str):
        return (_STRING, value) if value else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        value = int(value)  # 2000.0 and 2000 are one value, shown as 2000
    if isinstance(value, int) or (isinstance(value, float) and not math.isnan(value)):
        return (_NUMBER, value)
    return None


def _count_terms(request: FacetRequest, values: list[set[_Key]]) -> FacetResult:
    counts: Counter[_Key] = Counter()
    for keys in values:
        counts.update(keys)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ranked[: request.size]
    return FacetResult(
        field=request.field,
        buckets=tuple(FacetBucket(key[1], count) for key, count in shown),
        missing=sum(1 for keys in values if not keys),
        other=sum(count for _, count in ranked[request.size :]),
    )


def _count_ranges(request: FacetRequest, values: list[set[_Key]]) -> FacetResult:
    counts = [0] * len(request.ranges)
    other = 0
    for keys in values:
        numbers = [value for kind, value in keys if kind == _NUMBER]
        placed = False
        for i, bucket in enumerate(request.ranges):
            if any(_in_range(number, bucket) for number in numbers):
                counts[i] += 1
                placed = True
        if keys and not placed:
            other += 1
    return FacetResult(
        field=request.field,
        buckets=tuple(
            FacetBucket(bucket.name, count, from_=bucket.from_, to=bucket.to)
            for bucket, count in zip(request.ranges, counts, strict=True)
        ),
        missing=sum(1 for keys in values if not keys),
        other=other,
    )


def _in_range(number: FacetValue, bucket: FacetRange) -> bool:
    assert isinstance(number, int | float)  # only _NUMBER keys get here
    if bucket.from_ is not None and number < bucket.from_:
        return False
    return bucket.to is None or number < bucket.to


# --------------------------------------------------------------------------- helpers


def _is_finite_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value)


def _format_number(value: Number | None) -> str:
    if value is None:
        return "*"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def describe_type(value: object) -> str:
    """What kind of JSON value ``value`` is, for an error message (``a string``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    return "a list" if isinstance(value, list | tuple) else f"a {type(value).__name__}"


def shorten(value: object, limit: int = 64) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
