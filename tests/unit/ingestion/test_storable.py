"""Strings Postgres cannot keep (NUL, lone surrogates) are named, wherever they sit."""

from __future__ import annotations

from hsearch.ingestion.storable import unstorable


def fields(value: object) -> list[str]:
    return [e.field for e in unstorable(value, "metadata")]


def test_nul_and_lone_surrogates_are_named_by_path() -> None:
    assert fields("fine, 日本語 \U0001f600") == []
    assert fields("a\x00b") == ["metadata"]
    assert fields("\ud800") == ["metadata"]
    assert fields({"a": [1, "x", {"b": "\x00"}], "c": True, "d": None}) == ["metadata.a[2].b"]
    assert fields({"k\x00": 1}) == ["metadata"]
    assert fields(None) == []
    (error,) = unstorable({"k\x00": 1}, "metadata")
    assert error.message.startswith("a key contains a NUL character")
