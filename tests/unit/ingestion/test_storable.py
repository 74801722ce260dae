"""Strings Postgres cannot keep (NUL, lone surrogates) and numbers no store keeps (NaN,
infinities, integers past 64 bits) are named, wherever they sit."""

from __future__ import annotations

import math

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


def test_numbers_json_cannot_write_or_64_bits_cannot_hold_are_named_by_path() -> None:
    fine = {"a": 1.5, "b": -(2**63), "c": 2**63 - 1, "d": [0, -0.0, 1e308], "e": True}
    assert fields(fine) == []
    bad = {"nan": math.nan, "list": [1, math.inf], "deep": {"x": -math.inf}}
    assert fields(bad) == ["metadata.nan", "metadata.list[1]", "metadata.deep.x"]
    assert fields({"big": 2**63, "small": -(2**63) - 1}) == ["metadata.big", "metadata.small"]
    (error,) = unstorable({"x": math.nan}, "metadata")
    assert "not a finite number" in error.message
