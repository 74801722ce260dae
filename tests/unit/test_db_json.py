"""JSON columns are written and read with orjson, and with the standard library for what
orjson refuses, so every value reads back as the standard library alone gave it."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sqlalchemy import Column, Integer, MetaData, Table, insert, select

from hsearch.db.base import JSONType
from hsearch.db.engine import create_db_engine, json_dumps, json_loads


def test_values_read_back_as_the_standard_library_reads_them() -> None:
    values: list[object] = [
        {"tags": ["a", "日本"], "n": 1, "x": 1.5, "ok": True, "none": None},
        ["chunk-1", "chunk-2"],
        {"big": 2**70},  # past 64 bits: orjson refuses, json writes it
        {1: "int key"},  # json writes the key as a string
        {-3: 1, 2**63 - 1: 2, 7: 3},  # a document's term ids: orjson, keys as strings
        {"deep": [[{"k": "\u00e9"}]]},
    ]
    for value in values:
        assert json_loads(json_dumps(value)) == json.loads(json.dumps(value))


def test_integer_keys_are_written_as_strings_by_orjson() -> None:
    # A document's term counts keep their integer term ids as keys: written compact, as
    # the document row read back (string keys) would be.
    assert json_dumps({12: 1, -5: 2}) == '{"12":1,"-5":2}'
    assert json_dumps({12: 1, -5: 2}) == json_dumps({"12": 1, "-5": 2})


def test_what_an_earlier_version_wrote_is_read() -> None:
    # json.dumps wrote NaN and Infinity, which are no JSON and which orjson refuses, and
    # integers past 64 bits, which orjson would read as floats.
    assert math.isnan(json_loads(json.dumps({"x": math.nan}))["x"])
    for big in (2**64 + 1, -(2**70), 10**25):
        value = json_loads(json.dumps({"n": [big]}))["n"][0]
        assert (type(value), value) == (int, big)
    assert json_loads(b'{"n": 18446744073709551617}') == {"n": 2**64 + 1}
    assert json_loads('{"y": Infinity}') == {"y": math.inf}
    assert json_loads(b'{"z": 1}') == {"z": 1}


def test_the_engine_writes_and_reads_json_columns_with_them(tmp_path: Path) -> None:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'json.db'}")
    table = Table("t", MetaData(), Column("id", Integer, primary_key=True), Column("v", JSONType))
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(insert(table), [{"id": 1, "v": {"a": [1, 2]}}, {"id": 2, "v": {"b": 2**70}}])
        text = conn.exec_driver_sql("SELECT v FROM t WHERE id = 1").scalar()
        assert text == '{"a":[1,2]}'  # orjson's compact form
        assert [r.v for r in conn.execute(select(table.c.v).order_by(table.c.id))] == [
            {"a": [1, 2]},
            {"b": 2**70},
        ]
    engine.dispose()
