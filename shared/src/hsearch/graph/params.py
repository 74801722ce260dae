"""What a search asks of the graph leg (``"graph": {...}`` in a search request), checked.

Pure: the request's values in, a frozen :class:`GraphParams` out (part of the search's
plan, so of its cache key), or an :class:`~hsearch.errors.InvalidRequestError` naming
the field and what is allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from hsearch.errors import InvalidRequestError
from hsearch.graph.csr import Direction
from hsearch.graph.links import MAX_LINK_TYPE_LENGTH

__all__ = ["MAX_GRAPH_DEPTH", "MAX_SEEDS", "GraphParams", "GraphScoring", "parse_graph_params"]

_E = TypeVar("_E", bound=StrEnum)

MAX_GRAPH_DEPTH = 3
MAX_SEEDS = 100


class GraphScoring(StrEnum):
    """How the graph leg scores the documents the links lead to
    (:mod:`hsearch.graph.scoring`)."""

    PROXIMITY = "proximity"
    """``sum over seeds of w_seed / hops``, breadth-first within ``depth``."""
    PAGERANK = "pagerank"
    """Personalised PageRank from the seeds (local push; ``depth`` does not apply)."""
    BRIDGE = "bridge"
    """One hop from the heaviest seed to the documents the other legs found too, by
    their match with the query (``depth`` and ``alpha`` do not apply)."""


@dataclass(frozen=True, slots=True)
class GraphParams:
    scoring: GraphScoring = GraphScoring.PROXIMITY
    depth: int = 2
    """Hops followed from a seed (proximity)."""
    types: tuple[str, ...] | None = None
    """Follow only links of these types (sorted); ``None``: every type."""
    direction: Direction = Direction.BOTH
    """``out`` (along links), ``in`` (back-links), ``both``."""
    seeds: int = 10
    """How many of each other leg's best documents seed the walk."""
    include_seeds: bool = False
    """The seeds are ranked by the graph leg too (each scores its own weight plus what
    the other seeds give it); by default the leg ranks only documents the links lead
    to, the other legs having ranked the seeds already."""
    alpha: float = 0.15
    """PageRank's restart probability."""


def parse_graph_params(raw: Mapping[str, Any] | None, *, defaults: GraphParams) -> GraphParams:
    """A request's ``graph`` object over ``defaults``; raises InvalidRequestError."""
    if not raw:
        return defaults
    allowed = {"scoring", "depth", "types", "direction", "seeds", "include_seeds", "alpha"}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        msg = f"graph.{unknown[0]}: unknown field; allowed: {', '.join(sorted(allowed))}"
        raise InvalidRequestError(msg)
    values: dict[str, Any] = {}
    if "scoring" in raw:
        values["scoring"] = _choice("scoring", raw["scoring"], GraphScoring)
    if "direction" in raw:
        values["direction"] = _choice("direction", raw["direction"], Direction)
    if "depth" in raw:
        values["depth"] = _integer("depth", raw["depth"], 1, MAX_GRAPH_DEPTH)
    if "seeds" in raw:
        values["seeds"] = _integer("seeds", raw["seeds"], 1, MAX_SEEDS)
    if "include_seeds" in raw:
        if not isinstance(raw["include_seeds"], bool):
            raise InvalidRequestError("graph.include_seeds: true or false")
        values["include_seeds"] = raw["include_seeds"]
    if "alpha" in raw:
        alpha = raw["alpha"]
        if (
            isinstance(alpha, bool)
            or not isinstance(alpha, int | float)
            or not math.isfinite(alpha)
            or not 0 < alpha < 1
        ):
            raise InvalidRequestError("graph.alpha: a number strictly between 0 and 1")
        values["alpha"] = float(alpha)
    if "types" in raw and raw["types"] is not None:
        types = raw["types"]
        if (
            not isinstance(types, list)
            or not types
            or not all(isinstance(t, str) and 0 < len(t) <= MAX_LINK_TYPE_LENGTH for t in types)
        ):
            msg = (
                "graph.types: a non-empty list of link type names "
                f"(1 to {MAX_LINK_TYPE_LENGTH} characters each), or null for every type"
            )
            raise InvalidRequestError(msg)
        values["types"] = tuple(sorted(set(types)))
    fields = {name: getattr(defaults, name) for name in defaults.__dataclass_fields__}
    return GraphParams(**(fields | values))


def _choice(name: str, value: object, enum: type[_E]) -> _E:
    allowed = ", ".join(m.value for m in enum)
    if not isinstance(value, str) or value not in {m.value for m in enum}:
        raise InvalidRequestError(f"graph.{name}: {value!r} is not one of {allowed}")
    return enum(value)


def _integer(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRequestError(f"graph.{name}: an integer from {low} to {high}")
    return value
