"""Every pymilvus connection hsearch opens carries channel options that Milvus Lite's
ping policy accepts (docs/operations.md, "gRPC keepalive")."""

from __future__ import annotations

from typing import Any

import pytest

from hsearch.config import MilvusSettings
from hsearch.types import SparseVector
from hsearch.vectorstore import milvus
from hsearch.vectorstore.factory import create_vector_store
from hsearch.vectorstore.milvus import grpc_options

LITE_MIN_PING_INTERVAL_MS = 300_000
"""gRPC's default server policy (Milvus Lite): one ping per 5 min while a call is open."""


def test_no_pings_without_calls_and_none_more_often_than_lite_accepts() -> None:
    options = grpc_options()
    assert options["grpc.keepalive_permit_without_calls"] == 0
    assert options["grpc.keepalive_time_ms"] >= LITE_MIN_PING_INTERVAL_MS


def test_the_setting_sets_the_ping_period_only() -> None:
    options = grpc_options(keepalive_s=600)
    assert options["grpc.keepalive_time_ms"] == 600_000
    assert options["grpc.keepalive_permit_without_calls"] == 0


CREATED: list[dict[str, Any]] = []
"""The keyword arguments of every client :class:`Recorder` stood in for."""


class Recorder:
    def __init__(self, **kwargs: Any) -> None:
        CREATED.append(kwargs)

    def close(self) -> None:
        pass

    async def search(self, *_: Any, **__: Any) -> list[list[dict[str, Any]]]:
        return [[]]

    async def query(self, *_: Any, **__: Any) -> list[dict[str, Any]]:
        return []


async def test_every_client_of_the_store_gets_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    CREATED.clear()
    monkeypatch.setattr(milvus, "MilvusClient", Recorder)
    monkeypatch.setattr(milvus, "AsyncMilvusClient", Recorder)
    store = create_vector_store(
        MilvusSettings(grpc_keepalive_s=450), uri="http://milvus.invalid:19530"
    )
    await store.search_dense((1.0, 0.0), tenant_id="t", filter=None, limit=5, timeout=1)
    await store.search_sparse(
        SparseVector(indices=(1,), values=(1.0,)),
        tenant_id="t",
        filter=None,
        limit=5,
        timeout=1,
    )
    assert len(CREATED) == 3  # the store's own client and one per search leg
    assert all(kw["grpc_options"] == grpc_options(keepalive_s=450) for kw in CREATED)
