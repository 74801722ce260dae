"""pymilvus's record of a collection create another process won is dropped; every other
RPC error it logs is kept (hsearch.vectorstore.milvus._LostCreateRace)."""

from __future__ import annotations

import logging

import pytest

import hsearch.vectorstore.milvus  # noqa: F401  (installs the filter)

PYMILVUS = logging.getLogger("pymilvus.decorators")


@pytest.mark.parametrize(
    "message",
    [
        "RPC error: [create_collection], <MilvusException: (code=1, message=collection "
        "'hsearch_chunks_v1' already exists)>, <elapsed:1.7ms>\nTraceback:\n...",
        "RPC error: [create_alias], <MilvusException: (code=1, message=alias "
        "'hsearch_chunks' already exists)>, <elapsed:0.9ms>",
    ],
)
def test_a_lost_create_race_is_not_logged(caplog: pytest.LogCaptureFixture, message: str) -> None:
    with caplog.at_level(logging.ERROR, logger=PYMILVUS.name):
        PYMILVUS.error(message)
    assert caplog.records == []


@pytest.mark.parametrize(
    "message",
    [
        "RPC error: [search], <MilvusException: (code=1, message=collection not loaded)>",
        "RPC error: [create_collection], <MilvusException: (code=1100, message=invalid parameter)>",
        "RPC error: [insert], <MilvusException: (code=1, message=entity already exists)>",
    ],
)
def test_other_rpc_errors_are_kept(caplog: pytest.LogCaptureFixture, message: str) -> None:
    with caplog.at_level(logging.ERROR, logger=PYMILVUS.name):
        PYMILVUS.error(message)
    assert [r.getMessage() for r in caplog.records] == [message]
