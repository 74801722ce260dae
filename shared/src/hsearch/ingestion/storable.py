"""Values every store keeps: text with no NUL character and no lone surrogate, numbers
that JSON can write and a 64-bit integer holds.

Postgres refuses those two strings, in ``text`` and in ``jsonb`` alike ("\\u0000 cannot be
converted to text"; a lone surrogate has no UTF-8 form), while SQLite and the in-memory store take
them: without this check a document holding one is accepted by the embedded profile and
fails in production with a 500. A NaN or an infinity (which Python's JSON parser reads)
is no JSON: Postgres refuses it, and Milvus' client writes it as ``null``, so a document's
metadata would change without a word; an integer past 64 bits the Milvus client cannot
write at all, and every write of its document would fail. Refused up front instead,
naming the field."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

from hsearch.errors import FieldError

__all__ = ["unstorable"]

_INT64 = (-(2**63), 2**63 - 1)


def unstorable(value: object, field: str) -> Iterator[FieldError]:
    """A :class:`FieldError` for each string or number in ``value`` (a string or a
    number, or lists and objects of them, keys included) that a store cannot keep;
    ``field`` names ``value``."""
    if isinstance(value, str):
        problem = _problem(value)
        if problem:
            yield FieldError(field=field, message=problem)
    elif isinstance(value, float) and not math.isfinite(value):
        name = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        msg = f"{name} is not a finite number (JSON has no NaN or Infinity): it cannot be stored"
        yield FieldError(field=field, message=msg)
    elif isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
        msg = "an integer outside the signed 64-bit range cannot be stored"
        yield FieldError(field=field, message=msg)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            problem = _problem(str(key))
            if problem:
                yield FieldError(field=field, message=f"a key {problem}")
                continue
            yield from unstorable(item, f"{field}.{key}")
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for i, item in enumerate(value):
            yield from unstorable(item, f"{field}[{i}]")


def _problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode), which cannot be stored"
    return None
