"""Text every store keeps: no NUL character and no lone surrogate.

Postgres refuses both, in ``text`` and in ``jsonb`` alike ("\\u0000 cannot be converted to
text"; a lone surrogate has no UTF-8 form), while SQLite and the in-memory store take
them: without this check a document holding one is accepted by the embedded profile and
fails in production with a 500. Refused up front instead, naming the field."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from hsearch.errors import FieldError

__all__ = ["unstorable"]


def unstorable(value: object, field: str) -> Iterator[FieldError]:
    """A :class:`FieldError` for each string in ``value`` (a string, or lists and objects
    of them, keys included) that a store cannot keep; ``field`` names ``value``."""
    if isinstance(value, str):
        problem = _problem(value)
        if problem:
            yield FieldError(field=field, message=problem)
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
