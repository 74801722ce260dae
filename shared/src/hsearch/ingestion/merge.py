"""JSON Merge Patch (RFC 7396), what ``PATCH /v1/documents/{id}`` applies to ``metadata``.

A key the patch sets replaces the stored value, a key set to ``null`` is removed, a key
the patch does not name is kept, and an object meets an object by the same rules, key by
key, at any depth. Anything else (a list, a string, a number) replaces what was there:
lists are values, not merged element by element. Pure: no I/O, the inputs are not changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_patch"]


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``target`` with ``patch`` applied per RFC 7396, as a new dict."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            below = merged.get(key)
            merged[key] = merge_patch(below if isinstance(below, Mapping) else {}, value)
        else:
            merged[key] = value
    return merged
