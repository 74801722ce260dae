"""Unknown query parameters are refused, as unknown body fields are (``extra="forbid"``):
a misspelt ``?limt=10`` would otherwise be ignored in silence and the default served.
So is a parameter given twice that takes one value (``?limit=5&limit=50``), of which
FastAPI would keep the last without a word."""

from __future__ import annotations

from types import UnionType
from typing import Any, Union, get_args, get_origin

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from hsearch.errors import FieldError, InvalidRequestError

__all__ = ["refuse_unknown_query_parameters"]


def _known(route: APIRoute) -> dict[str, bool]:
    # A walk of a few dependencies per request (routes are not hashable to cache on).
    return _query_params(route.dependant)


def _query_params(dependant: Dependant) -> dict[str, bool]:
    """Each query parameter's name, and whether it takes several values (a list)."""
    params = {p.alias: _many(p.field_info.annotation) for p in dependant.query_params}
    for sub in dependant.dependencies:
        params |= _query_params(sub)
    return params


def _many(annotation: Any) -> bool:
    """Whether a parameter of this type takes several values: a list, optional or not
    (``list[str] | None``, as an optional filter is typed)."""
    if get_origin(annotation) in (Union, UnionType):
        return any(_many(arg) for arg in get_args(annotation))
    return get_origin(annotation) in (list, set, tuple)


async def refuse_unknown_query_parameters(request: Request) -> None:
    """422 ``invalid_request`` naming each query parameter the route does not take."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = _known(route)
    given = request.query_params
    errors = [
        FieldError(name, f"unknown query parameter (this route takes: {_names(known)})")
        for name in sorted(set(given) - set(known))
    ]
    errors += [
        FieldError(name, f"given {len(given.getlist(name))} times; it takes one value")
        for name in sorted(set(given) & set(known))
        if not known[name] and len(given.getlist(name)) > 1
    ]
    if errors:
        raise InvalidRequestError.of(errors)


def _names(known: dict[str, bool]) -> str:
    return ", ".join(sorted(known)) or "none"
