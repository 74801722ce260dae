"""Compiled filters against a real Milvus Lite (a ``.db`` file): every operator,
combinators, metadata paths and hostile strings return exactly the rows a Python
reference predicate picks, never another tenant's, and the Python evaluator
(:func:`hsearch.vectorstore.filters.matches`) agrees with Milvus row for row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from milvus_lite.server_manager import server_manager_instance
from pymilvus import DataType, MilvusClient

from hsearch.vectorstore.filters import matches, parse_filter
from hsearch.vectorstore.milvus_filters import compile_filter, quote_string
from hsearch.vectorstore.schema import (
    DENSE_FIELD,
    PRIMARY_FIELD,
    TENANT_FIELD,
    USER_FIELDS,
    FieldType,
)

pytestmark = pytest.mark.integration

COLLECTION = "filters"
STRINGS = "strings"
# Tenant ids are hostile too: the tenant condition must hold whatever they contain.
TENANT_A = 'acme" or tenant_id != "x'
TENANT_B = "beta\\"

TRICKY = [
    "",
    'a"b',
    "a\\b",
    'a\\"b',
    "\\",
    '"',
    '" or tenant_id != "',
    '") or (tenant_id != "beta\\\\") or ("',
    "new\nline",
    "cr\rlf\r\n",
    "tab\tx",
    "nul\x00x",
    "bell\x07 esc\x1b del\x7f",
    "\u2028\u2029\x85",
    "ünïcödé 😀 日本語 한국어",
    "single'quote",
    "a\\nb",
    "]) or ARRAY_CONTAINS(tags, [",
    "tenant_id",
]

Row = dict[str, Any]
Predicate = Callable[[Row], bool]


def _row(chunk_id: str, tenant: str, **fields: Any) -> Row:
    row: Row = {
        PRIMARY_FIELD: chunk_id,
        TENANT_FIELD: tenant,
        "document_id": f"doc-{chunk_id}",
        "external_id": f"ext-{chunk_id}",
        "source": "wiki",
        "lang": "en",
        "tags": [],
        "created_at": 0,
        "ordinal": 0,
        "metadata": {},
        DENSE_FIELD: [0.5, 0.5, 0.5, 0.5],
    }
    row.update(fields)
    return row


BASE: list[dict[str, Any]] = [
    {
        "source": "wiki", "lang": "en", "tags": ["faq", "howto"], "created_at": 100,
        "document_id": "doc-1",
        "metadata": {"year": 2000, "author": {"name": "Ada"}, "flag": True, "score": 0.5,
                     "arr": ["p", "q"]},
    },
    {
        "source": "wiki", "lang": "ja", "tags": ["faq"], "created_at": 200, "ordinal": 1,
        "document_id": "doc-1",
        "metadata": {"year": 2001.5, "author": {"name": "Grace"}, "flag": False, "arr": ["q"]},
    },
    {"source": "blog", "lang": "en", "tags": [], "created_at": -50, "document_id": "doc-2"},
    {
        "source": "blog", "lang": "de", "tags": ["howto", "news"], "created_at": 300,
        "document_id": "doc-2",
        "metadata": {"year": "2000", "author": "plain string", "arr": "p"},
    },
    {
        "source": "news", "lang": "en", "tags": ["news"], "created_at": 9_000_000_000_000,
        "ordinal": 2, "document_id": "doc-3",
        "metadata": {"year": None, "author": {"name": None}, "flag": 1, "arr": [1, 2]},
    },
    {
        "source": "news", "lang": "fr", "tags": ["faq", "news", "howto"], "created_at": 0,
        "ordinal": 3, "document_id": "doc-3",
        "metadata": {"year": 1999, "score": -2.5, "draft": True, "arr": [True]},
    },
    {
        "source": "wiki", "lang": "en", "tags": ["x"], "created_at": 150, "document_id": "doc-4",
        "metadata": {"year": 2000.0, "author": {"name": "Ada", "id": 7},
                     "nested": {"deep": {"k": "v"}}},
    },
    {
        "source": "blog", "lang": "ja", "tags": ["faq"], "created_at": 175, "document_id": "doc-5",
        "metadata": {"score": 10, "flag": "yes", "arr": []},
    },
    {
        "source": "news", "lang": "ja", "tags": ["x"], "created_at": 400, "document_id": "doc-6",
        "metadata": {"year": -7, "arr": [-7, "r", -2.5]},
    },
]  # fmt: skip


def _rows() -> list[Row]:
    rows: list[Row] = []
    for tenant, prefix in ((TENANT_A, "a"), (TENANT_B, "b")):
        rows += [_row(f"{prefix}{i:02d}", tenant, **fields) for i, fields in enumerate(BASE)]
        rows += [
            _row(
                f"{prefix}t{i:02d}",
                tenant,
                source=value,
                lang="xx",
                tags=[value, "tricky"],
                created_at=1000 + i,
                document_id="doc-tricky",
                metadata={"s": value},
            )
            for i, value in enumerate(TRICKY)
        ]
    return rows


ROWS = _rows()


def _datatype(kind: FieldType) -> DataType:
    return {
        FieldType.STRING: DataType.VARCHAR,
        FieldType.INT: DataType.INT64,
        FieldType.FLOAT: DataType.DOUBLE,
        FieldType.BOOL: DataType.BOOL,
        FieldType.STRING_ARRAY: DataType.ARRAY,
        FieldType.JSON: DataType.JSON,
    }[kind]


def _create(client: MilvusClient, name: str, rows: list[Row]) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field(PRIMARY_FIELD, DataType.VARCHAR, is_primary=True, max_length=128)
    schema.add_field(TENANT_FIELD, DataType.VARCHAR, max_length=64, is_partition_key=True)
    for spec in USER_FIELDS:
        extra: dict[str, Any] = {}
        if spec.type is FieldType.STRING:
            extra = {"max_length": spec.max_length or 512}
        elif spec.type is FieldType.STRING_ARRAY:
            extra = {
                "element_type": DataType.VARCHAR,
                "max_length": spec.max_length,
                "max_capacity": spec.max_capacity,
            }
        schema.add_field(spec.name, _datatype(spec.type), **extra)
    schema.add_field(DENSE_FIELD, DataType.FLOAT_VECTOR, dim=4)
    index = client.prepare_index_params()
    index.add_index(DENSE_FIELD, index_type="FLAT", metric_type="IP")
    client.create_collection(name, schema=schema, index_params=index)
    if rows:
        client.insert(name, rows)
    client.load_collection(name)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusClient]:
    path = tmp_path_factory.mktemp("milvus-filters") / "f.db"
    milvus = MilvusClient(str(path))
    _create(milvus, COLLECTION, ROWS)
    _create(milvus, STRINGS, [_row("decoy", TENANT_A, source="x", metadata={"s": "x"})])
    yield milvus
    milvus.close()
    # The embedded server pymilvus started for the file: stopped now, not by milvus_lite's
    # exit hook, which logs to streams that pytest has closed by then.
    server_manager_instance.release_server(str(path))


def query_ids(client: MilvusClient, expr: str, collection: str = COLLECTION) -> set[str]:
    found = client.query(collection, filter=expr, output_fields=[PRIMARY_FIELD, TENANT_FIELD])
    return {r[PRIMARY_FIELD] for r in found}


def expected_ids(predicate: Predicate, tenant: str) -> set[str]:
    return {r[PRIMARY_FIELD] for r in ROWS if r[TENANT_FIELD] == tenant and predicate(r)}


def tenant_ids(tenant: str) -> set[str]:
    return expected_ids(lambda _: True, tenant)


# --------------------------------------------------------------------------- reference

_NONE = object()


def md(row: Row, path: str) -> Any:
    """The metadata value at a dotted path; ``_NONE`` for missing or null."""
    value: Any = row["metadata"]
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            return _NONE
        value = value[key]
    return _NONE if value is None else value


def jn(row: Row, path: str) -> float | None:
    """A numeric metadata value (JSON booleans compare as numbers), else None."""
    value = md(row, path)
    return value if isinstance(value, int | float) else None


def js(row: Row, path: str) -> str | None:
    value = md(row, path)
    return value if isinstance(value, str) else None


def ja(row: Row, path: str) -> list[Any]:
    """A metadata array; contains* is false (not unknown) on anything else."""
    value = md(row, path)
    return value if isinstance(value, list) else []


def has(row: Row, path: str) -> bool:
    return md(row, path) is not _NONE


def holds(value: Any, test: Callable[[Any], bool]) -> bool:
    """A comparison on a value that may be unknown (None): unknown never holds."""
    return value is not None and test(value)


def between(value: Any, low: Any, high: Any) -> bool:
    return holds(value, lambda v: low <= v < high)


CASES: list[tuple[str, Any, Predicate]] = [
    # string fields
    ("eq", {"source": {"eq": "wiki"}}, lambda r: r["source"] == "wiki"),
    ("ne", {"source": {"ne": "wiki"}}, lambda r: r["source"] != "wiki"),
    ("in", {"source": {"in": ["blog", "news"]}}, lambda r: r["source"] in ("blog", "news")),
    ("nin", {"source": {"nin": ["blog", "news"]}}, lambda r: r["source"] not in ("blog", "news")),
    ("str gt", {"lang": {"gt": "en"}}, lambda r: r["lang"] > "en"),
    ("str gte", {"lang": {"gte": "en"}}, lambda r: r["lang"] >= "en"),
    ("str lt", {"lang": {"lt": "fr"}}, lambda r: r["lang"] < "fr"),
    ("str lte", {"lang": {"lte": "fr"}}, lambda r: r["lang"] <= "fr"),
    (
        "str range",
        {"source": {"range": {"gte": "b", "lt": "n"}}},
        lambda r: "b" <= r["source"] < "n",
    ),
    (
        "document_id",
        {"document_id": {"in": ["doc-1", "doc-3"]}},
        lambda r: r["document_id"] in ("doc-1", "doc-3"),
    ),
    ("external_id", {"external_id": {"eq": "ext-a03"}}, lambda r: r["external_id"] == "ext-a03"),
    # integer fields
    ("int eq", {"created_at": {"eq": 100}}, lambda r: r["created_at"] == 100),
    ("int eq float", {"created_at": {"eq": 100.0}}, lambda r: r["created_at"] == 100),
    ("int ne", {"created_at": {"ne": 100}}, lambda r: r["created_at"] != 100),
    ("int gt", {"created_at": {"gt": 150}}, lambda r: r["created_at"] > 150),
    ("int gte", {"created_at": {"gte": 150}}, lambda r: r["created_at"] >= 150),
    ("int lt", {"created_at": {"lt": 0}}, lambda r: r["created_at"] < 0),
    ("int lte", {"created_at": {"lte": 0}}, lambda r: r["created_at"] <= 0),
    ("int gt float", {"created_at": {"gt": 149.5}}, lambda r: r["created_at"] > 149.5),
    ("int big", {"created_at": {"eq": 9 * 10**12}}, lambda r: r["created_at"] == 9 * 10**12),
    (
        "int range",
        {"created_at": {"range": {"gte": 100, "lt": 300}}},
        lambda r: between(r["created_at"], 100, 300),
    ),
    ("int range open", {"created_at": {"range": {"gt": 175}}}, lambda r: r["created_at"] > 175),
    (
        "int in",
        {"created_at": {"in": [100, 200, -50]}},
        lambda r: r["created_at"] in (100, 200, -50),
    ),
    ("int nin", {"created_at": {"nin": [100, 200]}}, lambda r: r["created_at"] not in (100, 200)),
    ("ordinal", {"ordinal": {"gte": 2}}, lambda r: r["ordinal"] >= 2),
    (
        "many ops",
        {"created_at": {"gte": 100, "lt": 300, "ne": 150}},
        lambda r: between(r["created_at"], 100, 300) and r["created_at"] != 150,
    ),
    # string arrays
    ("contains", {"tags": {"contains": "faq"}}, lambda r: "faq" in r["tags"]),
    (
        "contains_any",
        {"tags": {"contains_any": ["news", "x"]}},
        lambda r: bool({"news", "x"} & set(r["tags"])),
    ),
    (
        "contains_all",
        {"tags": {"contains_all": ["faq", "howto"]}},
        lambda r: {"faq", "howto"} <= set(r["tags"]),
    ),
    ("not contains", {"not": {"tags": {"contains": "faq"}}}, lambda r: "faq" not in r["tags"]),
    # metadata: numbers, strings, cross-type comparisons, missing and null
    ("json eq num", {"metadata.year": {"eq": 2000}}, lambda r: jn(r, "year") == 2000),
    ("json eq str", {"metadata.year": {"eq": "2000"}}, lambda r: js(r, "year") == "2000"),
    (
        "json ne",
        {"metadata.year": {"ne": 2000}},
        lambda r: has(r, "year") and jn(r, "year") != 2000,
    ),
    (
        "json gt",
        {"metadata.year": {"gt": 1999.5}},
        lambda r: holds(jn(r, "year"), lambda v: v > 1999.5),
    ),
    (
        "json lte",
        {"metadata.year": {"lte": 2000}},
        lambda r: holds(jn(r, "year"), lambda v: v <= 2000),
    ),
    (
        "json not gt",
        {"not": {"metadata.year": {"gt": 1999.5}}},
        lambda r: holds(jn(r, "year"), lambda v: not v > 1999.5),
    ),
    (
        "json str order",
        {"metadata.year": {"gte": "1"}},
        lambda r: holds(js(r, "year"), lambda v: v >= "1"),
    ),
    (
        "json range",
        {"metadata.year": {"range": {"gte": 2000, "lt": 2001}}},
        lambda r: between(jn(r, "year"), 2000, 2001),
    ),
    (
        "json in",
        {"metadata.year": {"in": [2000, "2000"]}},
        lambda r: jn(r, "year") == 2000 or js(r, "year") == "2000",
    ),
    (
        "json nin",
        {"metadata.year": {"nin": [2000]}},
        lambda r: has(r, "year") and jn(r, "year") != 2000,
    ),
    ("json exists", {"metadata.year": {"exists": True}}, lambda r: has(r, "year")),
    ("json not exists", {"metadata.year": {"exists": False}}, lambda r: not has(r, "year")),
    ("nested eq", {"metadata.author.name": {"eq": "Ada"}}, lambda r: md(r, "author.name") == "Ada"),
    (
        "nested ne",
        {"metadata.author.name": {"ne": "Ada"}},
        lambda r: md(r, "author.name") not in (_NONE, "Ada"),
    ),
    ("nested exists", {"metadata.author.name": {"exists": True}}, lambda r: has(r, "author.name")),
    ("deep", {"metadata.nested.deep.k": {"eq": "v"}}, lambda r: md(r, "nested.deep.k") == "v"),
    ("bool eq true", {"metadata.flag": {"eq": True}}, lambda r: jn(r, "flag") == 1),
    ("bool eq false", {"metadata.flag": {"eq": False}}, lambda r: jn(r, "flag") == 0),
    ("bool ne", {"metadata.flag": {"ne": True}}, lambda r: has(r, "flag") and jn(r, "flag") != 1),
    ("json num vs bool", {"metadata.flag": {"eq": 1}}, lambda r: jn(r, "flag") == 1),
    ("score", {"metadata.score": {"lt": 1}}, lambda r: holds(jn(r, "score"), lambda v: v < 1)),
    ("json contains str", {"metadata.arr": {"contains": "p"}}, lambda r: "p" in ja(r, "arr")),
    (
        "json contains num",
        {"metadata.arr": {"contains": 1}},
        lambda r: any(isinstance(e, int | float) and e == 1 for e in ja(r, "arr")),
    ),
    (
        "json contains negative",
        {"metadata.arr": {"contains": -7}},
        lambda r: any(isinstance(e, int | float) and e == -7 for e in ja(r, "arr")),
    ),
    (
        "json contains_any",
        {"metadata.arr": {"contains_any": ["q", 2]}},
        lambda r: any(e in ("q", 2) for e in ja(r, "arr")),
    ),
    (
        "json contains_all",
        {"metadata.arr": {"contains_all": ["p", "q"]}},
        lambda r: {"p", "q"} <= set(ja(r, "arr")),
    ),
    (
        "json not contains",
        {"not": {"metadata.arr": {"contains": "p"}}},
        lambda r: "p" not in ja(r, "arr"),
    ),
    # three-valued logic
    ("missing eq", {"metadata.nope": {"eq": 1}}, lambda r: False),
    ("missing ne", {"metadata.nope": {"ne": 1}}, lambda r: False),
    ("not missing", {"not": {"metadata.nope": {"eq": 1}}}, lambda r: False),
    (
        "unknown or true",
        {"or": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "wiki"}}]},
        lambda r: r["source"] == "wiki",
    ),
    (
        "not (unknown and false)",
        {"not": {"and": [{"metadata.nope": {"eq": 1}}, {"source": {"eq": "zzz"}}]}},
        lambda r: True,
    ),
    (
        "ne or missing",
        {"or": [{"metadata.year": {"ne": 2000}}, {"metadata.year": {"exists": False}}]},
        lambda r: jn(r, "year") != 2000,
    ),
    # combinators
    (
        "and",
        {"and": [{"source": {"eq": "wiki"}}, {"lang": {"eq": "en"}}]},
        lambda r: r["source"] == "wiki" and r["lang"] == "en",
    ),
    (
        "or",
        {"or": [{"lang": {"eq": "ja"}}, {"tags": {"contains": "news"}}]},
        lambda r: r["lang"] == "ja" or "news" in r["tags"],
    ),
    ("not", {"not": {"source": {"eq": "wiki"}}}, lambda r: r["source"] != "wiki"),
    (
        "nested combinators",
        {
            "or": [
                {"and": [{"source": {"eq": "blog"}}, {"not": {"lang": {"in": ["de"]}}}]},
                {"created_at": {"gt": 1010}},
            ]
        },
        lambda r: (r["source"] == "blog" and r["lang"] != "de") or r["created_at"] > 1010,
    ),
]


def tricky_cases(i: int, v: str) -> list[tuple[str, Any, Predicate]]:
    """The cases of the i-th tricky value ``v`` (each predicate closes over its own ``v``)."""
    return [
        (f"tricky eq {i}", {"source": {"eq": v}}, lambda r: r["source"] == v),
        (f"tricky ne {i}", {"source": {"ne": v}}, lambda r: r["source"] != v),
        (f"tricky in {i}", {"source": {"in": ["zzz", v]}}, lambda r: r["source"] == v),
        (f"tricky tag {i}", {"tags": {"contains": v}}, lambda r: v in r["tags"]),
        (f"tricky json {i}", {"metadata.s": {"eq": v}}, lambda r: md(r, "s") == v),
        (f"tricky gte {i}", {"source": {"gte": v}}, lambda r: r["source"] >= v),
    ]


for _i, _value in enumerate(TRICKY):
    CASES += tricky_cases(_i, _value)


@pytest.mark.parametrize(("filter", "predicate"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter_returns_exactly_the_reference_rows(
    client: MilvusClient, filter: Any, predicate: Predicate
) -> None:
    node = parse_filter(filter)
    for tenant in (TENANT_A, TENANT_B):
        expected = expected_ids(predicate, tenant)
        assert query_ids(client, compile_filter(node, tenant_id=tenant)) == expected
        assert {
            r[PRIMARY_FIELD] for r in ROWS if r[TENANT_FIELD] == tenant and matches(node, r)
        } == expected


def test_cases_are_selective() -> None:
    """Guard against vacuous cases: most filters match some rows but not all."""
    everything = tenant_ids(TENANT_A)
    sizes = [len(expected_ids(predicate, TENANT_A)) for _, _, predicate in CASES]
    assert sum(1 for n in sizes if 0 < n < len(everything)) > 0.8 * len(CASES)


@pytest.mark.parametrize("value", TRICKY)
def test_tricky_strings_match_exactly_one_row(client: MilvusClient, value: str) -> None:
    index = TRICKY.index(value)
    for field in ("source", "metadata.s"):
        expr = compile_filter(parse_filter({field: {"eq": value}}), tenant_id=TENANT_A)
        assert query_ids(client, expr) == {f"at{index:02d}"}


def test_no_filter_is_the_whole_tenant(client: MilvusClient) -> None:
    assert query_ids(client, compile_filter(None, tenant_id=TENANT_A)) == tenant_ids(TENANT_A)
    empty = compile_filter(parse_filter({}), tenant_id=TENANT_B)
    assert query_ids(client, empty) == tenant_ids(TENANT_B)
    assert query_ids(client, compile_filter(None, tenant_id="nobody")) == set()


HOSTILE_FILTERS = [
    {"source": {"ne": '" or tenant_id != "'}},
    {"source": {"ne": f'") or ({TENANT_FIELD} == {quote_string(TENANT_B)}) or ("'}},
    {"or": [{"source": {"ne": "zzz"}}, {"not": {"source": {"eq": "zzz"}}}]},
    {"not": {"source": {"eq": "zzz"}}},
    {"metadata.s": {"ne": "\\"}},
    {"tags": {"contains_any": ['"]) or (true', "faq"]}},
]


@pytest.mark.parametrize("filter", HOSTILE_FILTERS)
def test_a_tenant_never_sees_another_tenants_rows(client: MilvusClient, filter: Any) -> None:
    for tenant in (TENANT_A, TENANT_B):
        found = query_ids(client, compile_filter(parse_filter(filter), tenant_id=tenant))
        assert found
        assert found <= tenant_ids(tenant)


# --------------------------------------------------------------------------- properties

_texts = st.sampled_from(
    ["wiki", "blog", "news", "en", "ja", "faq", "howto", "p", "q", "2000", *TRICKY]
)
_numbers = st.sampled_from([-50, 0, 1, 2, 100, 150, 175.5, 1999, 2000, 2000.0, 2001.5, -2.5, 10])
_json = _texts | _numbers | st.booleans()
_paths = st.sampled_from(
    [
        "metadata.year",
        "metadata.flag",
        "metadata.score",
        "metadata.author.name",
        "metadata.arr",
        "metadata.s",
        "metadata.nope",
        "metadata.author",
    ]
)


def _leaf() -> st.SearchStrategy[dict[str, Any]]:
    def op(names: list[str], values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        return st.builds(lambda o, v: {o: v}, st.sampled_from(names), values)

    lists = st.lists(_json, min_size=1, max_size=3)
    return st.one_of(
        st.builds(lambda f, o: {f: o}, st.sampled_from(["source", "lang"]),
                  op(["eq", "ne", "gt", "gte", "lt", "lte"], _texts)
                  | op(["in", "nin"], st.lists(_texts, min_size=1, max_size=3))),
        st.builds(lambda o: {"created_at": o},
                  op(["eq", "ne", "gt", "gte", "lt", "lte"], _numbers)
                  | op(["in", "nin"], st.lists(_numbers, min_size=1, max_size=3))),
        st.builds(lambda o: {"tags": o},
                  op(["contains"], _texts)
                  | op(["contains_any", "contains_all"], st.lists(_texts, min_size=1, max_size=3))),
        st.builds(lambda f, o: {f: o}, _paths,
                  op(["eq", "ne", "contains"], _json)
                  | op(["gt", "gte", "lt", "lte"], _texts | _numbers)
                  | op(["in", "nin", "contains_any", "contains_all"], lists)
                  | op(["exists"], st.booleans())),
    )  # fmt: skip


_filters = st.recursive(
    _leaf(),
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3).map(lambda cs: {"and": cs})
        | st.lists(inner, min_size=1, max_size=3).map(lambda cs: {"or": cs})
        | inner.map(lambda c: {"not": c})
    ),
    max_leaves=6,
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(filter=_filters, tenant=st.sampled_from([TENANT_A, TENANT_B]))
def test_python_evaluation_agrees_with_milvus(
    client: MilvusClient, filter: dict[str, Any], tenant: str
) -> None:
    node = parse_filter(filter)
    expected = {r[PRIMARY_FIELD] for r in ROWS if r[TENANT_FIELD] == tenant and matches(node, r)}
    assert query_ids(client, compile_filter(node, tenant_id=tenant)) == expected


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(value=st.text(max_size=100))
def test_any_string_round_trips_through_milvus(client: MilvusClient, value: str) -> None:
    client.upsert(STRINGS, [_row("probe", TENANT_A, source=value, metadata={"s": value})])
    for field in ("source", "metadata.s"):
        expr = compile_filter(parse_filter({field: {"eq": value}}), tenant_id=TENANT_A)
        found = client.query(STRINGS, filter=expr, output_fields=[PRIMARY_FIELD, "source"])
        expected = {"probe", "decoy"} if value == "x" else {"probe"}
        assert {r[PRIMARY_FIELD] for r in found} == expected
        assert value in {r["source"] for r in found}
