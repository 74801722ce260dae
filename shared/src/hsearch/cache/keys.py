"""Cache keys: versioned, namespaced, and digests of canonical values.

Every key reads ``hsearch:v1:<namespace>:<kind>:...``; ``v1`` changes when what is
stored under a kind changes shape, so an old process never reads a new value.
:func:`digest` hashes a value through :func:`canonical`, which is the same in every
process (no ``hash()``, whose string hashing is salted per process; set members
sorted), so processes sharing a Redis compute the same keys for equal values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from enum import Enum

__all__ = ["KEY_VERSION", "cache_key", "canonical", "digest"]

KEY_VERSION = "v1"


def cache_key(namespace: str, kind: str, *parts: str | int) -> str:
    return ":".join(("hsearch", KEY_VERSION, namespace, kind, *map(str, parts)))


def canonical(value: object) -> object:
    """``value`` as JSON-ready data that names its types: dataclasses by class and field,
    enums by class and value, sets sorted, floats exactly (``repr``)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"@": type(value).__qualname__, **fields}
    if isinstance(value, Enum):
        return {"@": type(value).__qualname__, "v": canonical(value.value)}
    if isinstance(value, float):
        return {"@f": repr(value)}  # exact, and 1.0 apart from 1
    if isinstance(value, bool | int | str) or value is None:
        return value
    return _container(value)


def _container(value: object) -> object:
    if isinstance(value, tuple | list):
        return [canonical(v) for v in value]
    if isinstance(value, frozenset | set):
        items = [canonical(v) for v in value]
        return {"@set": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, Mapping):
        pairs = [[canonical(k), canonical(v)] for k, v in value.items()]
        return {"@map": sorted(pairs, key=lambda p: json.dumps(p, sort_keys=True))}
    if isinstance(value, bytes):
        return {"@b": value.hex()}
    msg = f"no canonical form for a {type(value).__name__}"
    raise TypeError(msg)


def digest(*values: object) -> str:
    """A SHA-256 hex digest of ``values`` in canonical form."""
    text = json.dumps([canonical(v) for v in values], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
