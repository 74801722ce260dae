"""Cache keys: equal values give equal digests in every process, and any difference,
down to a float's type or a set's member, gives another."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hsearch.cache.embeddings import decode_dense, decode_sparse, encode_dense, encode_sparse
from hsearch.cache.keys import cache_key, digest
from hsearch.types import SparseVector
from hsearch.vectorstore.filters import parse_filter

FILTER = {"and": [{"tags": {"contains_any": ["a", "b", "c"]}}, {"metadata.year": {"gte": 2001}}]}


def test_keys_are_versioned_and_namespaced() -> None:
    assert cache_key("ns", "result", "t1", 3, "abc") == "hsearch:v1:ns:result:t1:3:abc"


def test_digests_tell_values_apart() -> None:
    assert digest(parse_filter(FILTER)) == digest(parse_filter(FILTER))
    assert digest(1) != digest(1.0) != digest(True)
    assert digest(frozenset({"a", "b"})) == digest(frozenset({"b", "a"}))
    other = {"and": [{"tags": {"contains_any": ["a", "b"]}}, {"metadata.year": {"gte": 2001}}]}
    assert digest(parse_filter(FILTER)) != digest(parse_filter(other))


@pytest.mark.process
def test_digests_are_the_same_in_another_process() -> None:
    """String hashing is salted per process: a key built on hash() would differ."""
    code = (
        "from hsearch.cache.keys import digest;"
        "from hsearch.vectorstore.filters import parse_filter;"
        f"print(digest(parse_filter({FILTER!r}), frozenset({{'x', 'y', 'z'}})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == digest(parse_filter(FILTER), frozenset({"x", "y", "z"}))


def test_vectors_round_trip_bit_for_bit() -> None:
    dense = (0.1, -1 / 3, 2.5e-300, 0.0)
    assert decode_dense(encode_dense(dense)) == dense
    sparse = SparseVector((3, 17, 2**40), (1.0, 0.333333333333, 7.0))
    assert decode_sparse(encode_sparse(sparse)) == sparse
    empty = SparseVector((), ())
    assert decode_sparse(encode_sparse(empty)) == empty
