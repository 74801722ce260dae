"""FastAPI runs a plain-function dependency in a worker thread: one hop per dependency
per request, which on a cached search cost more than the search itself. Only a
dependency that blocks may be one."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts

from hsearch_api.deps import get_unit_of_work
from hsearch_api.main import create_app
from tests.unit.api.conftest import api_settings

BLOCKING: frozenset[Callable[..., Any]] = frozenset({get_unit_of_work})
"""Opens and commits the request's transaction: blocking I/O, so a worker thread."""


def dependencies(dependant: Dependant) -> Iterator[Callable[..., Any]]:
    for sub in dependant.dependencies:
        if sub.call is not None:
            yield sub.call
        yield from dependencies(sub)


def runs_on_the_loop(call: Callable[..., Any]) -> bool:
    if inspect.isclass(call):
        return False
    if inspect.iscoroutinefunction(call) or inspect.isasyncgenfunction(call):
        return True
    dunder = getattr(call, "__call__", None)  # noqa: B004 - an instance, e.g. HTTPBearer
    return dunder is not None and inspect.iscoroutinefunction(dunder)


def test_no_route_hops_to_a_thread_for_a_dependency_that_does_not_block(tmp_path: Path) -> None:
    app = create_app(settings=api_settings(tmp_path))
    contexts = iter_route_contexts(app.routes)
    routes = [c.original_route for c in contexts if isinstance(c.original_route, APIRoute)]
    assert {"search", "create_documents"} <= {r.name for r in routes}
    threaded = {
        f"{route.path}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in dependencies(route.dependant)
        if call not in BLOCKING and not runs_on_the_loop(call)
    }
    # The app's own dependencies run before every route's.
    app_wide = [d.dependency for d in app.router.dependencies if d.dependency is not None]
    assert app_wide, "the app declares dependencies of its own"
    threaded |= {
        f"app: {getattr(call, '__qualname__', call)}"
        for call in app_wide
        if call not in BLOCKING and not runs_on_the_loop(call)
    }
    assert threaded == set()
