"""JSON Merge Patch: the examples of RFC 7396, Appendix A, and the inputs left alone."""

from __future__ import annotations

from typing import Any

import pytest

from hsearch.ingestion.merge import merge_patch

# (target, patch, result) from RFC 7396 Appendix A, those whose target and patch are
# objects (the metadata field is always one).
RFC_EXAMPLES: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "result"), RFC_EXAMPLES)
def test_rfc_7396_examples(
    target: dict[str, Any], patch: dict[str, Any], result: dict[str, Any]
) -> None:
    assert merge_patch(target, patch) == result


def test_nested_objects_merge_at_any_depth_and_others_are_kept() -> None:
    target = {"year": 2001, "rank": 3, "author": {"name": "Ada", "org": {"id": 1, "x": 2}}}
    patch = {"rank": None, "author": {"org": {"x": None, "y": 5}}, "new": [1, 2]}
    assert merge_patch(target, patch) == {
        "year": 2001,
        "author": {"name": "Ada", "org": {"id": 1, "y": 5}},
        "new": [1, 2],
    }


def test_inputs_are_not_changed() -> None:
    target = {"a": {"b": 1}}
    patch = {"a": {"b": None, "c": 2}}
    merge_patch(target, patch)
    assert target == {"a": {"b": 1}}
    assert patch == {"a": {"b": None, "c": 2}}
