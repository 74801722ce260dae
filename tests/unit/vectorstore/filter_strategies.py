"""Hypothesis strategies for request filters (raw JSON), shared by the parser and the
Milvus rendering tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from hsearch.vectorstore.filters import INT64_MAX, INT64_MIN

HOSTILE = [
    '" or tenant_id != "',
    '") or (tenant_id != "t2") or ("',
    "\\",
    '\\"',
    '"',
    "'",
    ") or (1 == 1",
    "]) or ARRAY_CONTAINS(tags, [",
    "\n",
    "\r\n",
    "a\\nb",
    "tenant_id",
    "\x00",
    "\u2028",
    "日本語",
]

texts = st.text(max_size=24) | st.sampled_from(HOSTILE)
ints = st.integers(INT64_MIN, INT64_MAX)
numbers = ints | st.floats(allow_nan=False, allow_infinity=False)
json_values = texts | numbers | st.booleans()
keys = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
meta_paths = st.lists(keys, min_size=1, max_size=3).map(lambda ks: "metadata." + ".".join(ks))
STRING_FIELDS = ["source", "lang", "document_id", "external_id"]
INT_FIELDS = ["created_at", "ordinal"]


def _ranges(values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    one = st.builds(lambda b, v: {b: v}, st.sampled_from(["gt", "gte", "lt", "lte"]), values)
    two = (
        st.tuples(values, values)
        .map(sorted)
        .flatmap(
            lambda pair: st.sampled_from([("gt", "lt"), ("gte", "lte"), ("gte", "lt")]).map(
                lambda b: {b[0]: pair[0], b[1]: pair[1]}
            )
        )
    )
    return one | two


def _ops(
    values: st.SearchStrategy[Any], ordered: st.SearchStrategy[Any]
) -> st.SearchStrategy[dict[str, Any]]:
    lists = st.lists(values, min_size=1, max_size=4)
    return st.one_of(
        st.builds(lambda op, v: {op: v}, st.sampled_from(["eq", "ne"]), values),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["gt", "gte", "lt", "lte"]), ordered),
        st.builds(lambda op, v: {op: v}, st.sampled_from(["in", "nin"]), lists),
    )


leaves = st.one_of(
    st.builds(
        lambda f, ops: {f: ops},
        st.sampled_from(STRING_FIELDS),
        _ops(texts, texts) | _ranges(texts).map(lambda r: {"range": r}),
    ),
    st.builds(
        lambda f, ops: {f: ops},
        st.sampled_from(INT_FIELDS),
        _ops(numbers, numbers) | _ranges(numbers).map(lambda r: {"range": r}),
    ),
    st.builds(
        lambda op, v: {"tags": {op: v}},
        st.sampled_from(["contains_any", "contains_all"]),
        st.lists(texts, min_size=1, max_size=4),
    ),
    texts.map(lambda v: {"tags": {"contains": v}}),
    st.builds(
        lambda p, ops: {p: ops},
        meta_paths,
        st.one_of(
            _ops(json_values, texts | numbers),
            _ranges(numbers).map(lambda r: {"range": r}),
            _ranges(texts).map(lambda r: {"range": r}),
            json_values.map(lambda v: {"contains": v}),
            st.lists(json_values, min_size=1, max_size=3).map(lambda v: {"contains_any": v}),
            st.lists(json_values, min_size=1, max_size=3).map(lambda v: {"contains_all": v}),
            st.booleans().map(lambda v: {"exists": v}),
        ),
    ),
)


def _trees(depth: int) -> st.SearchStrategy[dict[str, Any]]:
    if depth == 0:
        return leaves
    below = _trees(depth - 1)
    return st.one_of(
        leaves,
        st.lists(below, min_size=1, max_size=3).map(lambda cs: {"and": cs}),
        st.lists(below, min_size=1, max_size=3).map(lambda cs: {"or": cs}),
        below.map(lambda c: {"not": c}),
    )


filters = _trees(4)

json_garbage = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "and",
                    "or",
                    "not",
                    "source",
                    "tags",
                    "created_at",
                    "metadata.a",
                    "tenant_id",
                    "eq",
                    "ne",
                    "in",
                    "nin",
                    "gt",
                    "lt",
                    "range",
                    "gte",
                    "contains",
                    "contains_any",
                    "exists",
                    "metadata",
                    "x",
                ]
            )
            | texts,
            inner,
            max_size=2,
        )
    ),
    max_leaves=12,
)
