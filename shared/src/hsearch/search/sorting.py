"""Sorting the fused window by fields (pure, no I/O).

A search with ``sort`` ranks as any other (legs, fusion, ``min_score``, grouping,
reranking), then orders **the window** (the first ``candidates`` units of that ranking,
the list pages run through) by the sort clauses; pages, cursors and offsets are cut from
the sorted window. Sorting never reaches past the window: a hit no leg returned is not
in it, whatever its field says, so "newest first" means the newest of the best
``candidates`` results, and the response says so (its ``sort`` names the basis).

Clauses
-------
A clause is a field and an order (``asc`` or ``desc``). Sortable fields:

* ``_score``: the relevance order (the fused ranking, or the reranked one with
  ``rerank``); ``desc`` (its default) is best first;
* ``external_id``, ``title``, ``source``, ``lang`` (strings) and ``created_at`` (when the
  document was first indexed, in seconds);
* ``metadata.<key>[.<key>...]``: a metadata path, as filters and facets name it.

The other fields' default order is ``asc``. Clauses apply in order; units equal on every
clause keep their relevance order, so a sort ends with ``_score`` ``desc`` whether or not
it says so, and clauses after a ``_score`` clause are never reached. The normalised
form (:func:`validate_sort`) states that: it cuts the clauses after the first ``_score``
and appends ``_score`` ``desc`` when none is there; a sort by relevance alone is the
empty sort (the plain ranking), so both share one cache entry.

Values
------
Numbers sort by value (``2000`` and ``2000.0`` are equal), strings case-insensitively
(then by code point, so the order is total), booleans ``false`` before ``true``. A field
holding numbers in some units and strings in others puts numbers first, then strings,
then booleans (``asc``; ``desc`` is the exact reverse). Dates sort correctly as ISO 8601
strings written alike (``2024-05-01`` or ``2024-05-01T08:00:00Z``). A list sorts by its
smallest element ascending and its largest descending. A unit with no value (the field or
key absent, ``null``, an empty string or list, an object, NaN) sorts **last in either
order**.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import itemgetter
from typing import Final, TypeAlias, TypeVar

from hsearch.errors import InvalidRequestError
from hsearch.search.facets import describe_type, shorten
from hsearch.vectorstore.filters import MISSING, lookup_value, resolve_field
from hsearch.vectorstore.schema import METADATA_FIELD

__all__ = [
    "MAX_SORT_CLAUSES",
    "SCORE",
    "SORTABLE_FIELDS",
    "SortClause",
    "SortOrder",
    "parse_sort",
    "sort_window",
    "validate_sort",
]

_T = TypeVar("_T")


class SortOrder(StrEnum):
    ASC = "asc"
    DESC = "desc"


SCORE: Final = "_score"
"""The relevance order: the fused ranking (the reranked one with ``rerank``)."""

SORTABLE_FIELDS: Final = ("external_id", "title", "source", "lang", "created_at")
"""The stored fields a sort may name besides ``_score`` and metadata paths."""

MAX_SORT_CLAUSES: Final = 8

_ALLOWED = ", ".join((SCORE, *SORTABLE_FIELDS, f"{METADATA_FIELD}.<key>"))
_ORDERS = ", ".join(repr(o.value) for o in SortOrder)


@dataclass(frozen=True, slots=True)
class SortClause:
    """Order units by ``field`` (``_score``, a sortable field or a metadata path)."""

    field: str
    order: SortOrder

    def __str__(self) -> str:
        return f"{self.field}:{self.order.value}"


_BY_RELEVANCE: Final = (SortClause(SCORE, SortOrder.DESC),)


# --------------------------------------------------------------------------- parsing


def parse_sort(raw: object) -> tuple[SortClause, ...]:
    """Sort clauses from a request's JSON, validated and normalised (:func:`validate_sort`).

    ``raw`` is ``None`` (no sort) or a list whose items are a field (``"metadata.year"``,
    its default order), a field and an order (``"metadata.year:desc"``) or an object
    ``{"field": ..., "order"?: "asc" | "desc"}``. Raises
    :class:`~hsearch.errors.InvalidRequestError` naming the item (``sort[1].order``).
    """
    if raw is None:
        return ()
    if not isinstance(raw, list | tuple):
        msg = (
            'sort: expected a list of sort clauses, such as [{"field": "metadata.year", '
            f'"order": "desc"}}, "_score"], got {describe_type(raw)}'
        )
        raise InvalidRequestError(msg)
    if len(raw) > MAX_SORT_CLAUSES:
        msg = f"sort: at most {MAX_SORT_CLAUSES} sort clauses, got {len(raw)}"
        raise InvalidRequestError(msg)
    return validate_sort([_parse_clause(item, f"sort[{i}]") for i, item in enumerate(raw)])


def _parse_clause(raw: object, loc: str) -> SortClause:
    if isinstance(raw, str):
        field, colon, order = raw.rpartition(":")
        if not colon:
            return SortClause(raw, _order(None, raw, loc))
        return SortClause(field, _order(order, field, loc))
    if not isinstance(raw, Mapping):
        msg = (
            f'{loc}: expected a field ("metadata.year", "metadata.year:desc") or an object '
            f'such as {{"field": "metadata.year", "order": "desc"}}, got {describe_type(raw)}'
        )
        raise InvalidRequestError(msg)
    for key in raw:
        if key not in ("field", "order"):
            msg = f"{loc}: unknown key {shorten(key)}; allowed: field, order"
            raise InvalidRequestError(msg)
    if "field" not in raw:
        raise InvalidRequestError(f"{loc}.field: required; sortable: {_ALLOWED}")
    field = raw["field"]
    if not isinstance(field, str):
        msg = (
            f"{loc}.field: expected a field path, got {describe_type(field)}; sortable: {_ALLOWED}"
        )
        raise InvalidRequestError(msg)
    return SortClause(field, _order(raw.get("order"), field, f"{loc}.order"))


def _order(raw: object, field: str, loc: str) -> SortOrder:
    if raw is None:
        return SortOrder.DESC if field == SCORE else SortOrder.ASC
    if isinstance(raw, str) and raw in {o.value for o in SortOrder}:
        return SortOrder(raw)
    msg = f"{loc}: unknown order {shorten(raw)}; allowed: {_ORDERS}"
    raise InvalidRequestError(msg)


# --------------------------------------------------------------------------- validation


def validate_sort(clauses: Sequence[SortClause]) -> tuple[SortClause, ...]:
    """Check ``clauses`` and return their normalised form (the module docstring): the
    clauses up to the first ``_score`` one, ending with ``_score`` (``desc`` unless
    given), or ``()`` for the relevance order alone. Raises InvalidRequestError naming
    the clause (``sort[0].field``) and listing what is sortable."""
    if len(clauses) > MAX_SORT_CLAUSES:
        msg = f"sort: at most {MAX_SORT_CLAUSES} sort clauses, got {len(clauses)}"
        raise InvalidRequestError(msg)
    seen: set[str] = set()
    kept: list[SortClause] = []
    for i, clause in enumerate(clauses):
        loc = f"sort[{i}]"
        if not isinstance(clause.order, SortOrder):
            msg = f"{loc}.order: unknown order {shorten(clause.order)}; allowed: {_ORDERS}"
            raise InvalidRequestError(msg)
        _check_field(clause.field, f"{loc}.field")
        if clause.field in seen:
            msg = f"{loc}.field: {clause.field!r} is sorted on already; name each field once"
            raise InvalidRequestError(msg)
        seen.add(clause.field)
        if SCORE not in {c.field for c in kept}:
            kept.append(clause)
    if not any(c.field == SCORE for c in kept):
        kept.extend(_BY_RELEVANCE)
    normalised = tuple(kept)
    return () if normalised == _BY_RELEVANCE else normalised


def _check_field(field: object, loc: str) -> None:
    if not isinstance(field, str):
        msg = f"{loc}: expected a field path, got {describe_type(field)}; sortable: {_ALLOWED}"
        raise InvalidRequestError(msg)
    if field == SCORE or field in SORTABLE_FIELDS:
        return
    head = field.split(".", 1)[0]
    if head != METADATA_FIELD:
        msg = f"{loc}: field {shorten(field)} is not sortable; sortable: {_ALLOWED}"
        raise InvalidRequestError(msg)
    # The keys of a metadata path follow the filters' and facets' rules.
    resolve_field(field, location=loc, purpose="facet")


# --------------------------------------------------------------------------- sorting

_NUMBER, _STRING, _BOOLEAN = 0, 1, 2
_Key: TypeAlias = tuple[int, float | int | str | bool, str]
"""A value with its kind first (numbers, strings, booleans), then the value (a string
case-folded), then the string itself (so ``"a"`` and ``"A"`` keep one order)."""


def sort_window(
    units: Sequence[_T],
    clauses: Sequence[SortClause],
    *,
    fields: Callable[[_T], Mapping[str, object]],
) -> list[_T]:
    """``units`` (the window, in relevance order) ordered by ``clauses`` (normalised by
    :func:`validate_sort`; empty: the order is kept). ``fields`` gives a unit's stored
    fields (its best chunk's, when grouping by document: a document's fields are its
    chunks'). The sort is stable: units equal on every clause keep their order."""
    if not clauses:
        return list(units)
    # Python's sort is stable, so sorting by the last clause first and the first clause
    # last orders by all of them, each tie broken by the next clause. Each unit carries
    # its place in the relevance order, which is what ``_score`` sorts by.
    ordered = list(enumerate(units))
    for clause in reversed(clauses):
        descending = clause.order is SortOrder.DESC
        if clause.field == SCORE:
            ordered.sort(key=itemgetter(0), reverse=not descending)
            continue
        read = _reader(clause.field)
        present: list[tuple[tuple[int, _T], _Key]] = []
        missing: list[tuple[int, _T]] = []
        for entry in ordered:
            key = _value_key(read(fields(entry[1])), descending=descending)
            if key is None:
                missing.append(entry)
            else:
                present.append((entry, key))
        # reverse=True keeps equal keys in their order too (sorted() is stable both ways).
        present.sort(key=itemgetter(1), reverse=descending)
        ordered = [entry for entry, _ in present] + missing
    return [unit for _, unit in ordered]


def _reader(field: str) -> Callable[[Mapping[str, object]], object]:
    if field.split(".", 1)[0] != METADATA_FIELD:
        return lambda row: row.get(field)
    ref = resolve_field(field, location="sort", purpose="facet")
    return lambda row: lookup_value(ref, row)


def _value_key(value: object, *, descending: bool) -> _Key | None:
    """The key ``value`` sorts by; ``None`` when it has none (sorted last). A list sorts
    by its smallest element ascending, its largest descending."""
    if isinstance(value, list | tuple):
        keys = [k for k in (_scalar_key(item) for item in value) if k is not None]
        if not keys:
            return None
        return max(keys) if descending else min(keys)
    return _scalar_key(value)


def _scalar_key(value: object) -> _Key | None:
    if value is MISSING or value is None:
        return None
    if isinstance(value, bool):
        return (_BOOLEAN, value, "")
    if isinstance(value, int):
        return (_NUMBER, value, "")
    if isinstance(value, float):
        return None if math.isnan(value) else (_NUMBER, value, "")
    if isinstance(value, str):
        return (_STRING, value.casefold(), value) if value else None
    return None  # an object: no order
