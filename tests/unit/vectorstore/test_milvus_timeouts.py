"""The Milvus adapter tells a missed deadline from a failure, on pymilvus' own exceptions.

No server: the pymilvus clients are replaced by doubles whose ``search`` goes through
pymilvus' real retry decorator, so the exceptions are exactly those pymilvus raises
when its deadline fires, when gRPC's does, and when a connection is refused.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

import grpc
import pytest
from pymilvus import MilvusException
from pymilvus.decorators import retry_on_rpc_failure

from hsearch.errors import VectorStoreError, VectorStoreTimeoutError
from hsearch.types import SparseVector
from hsearch.vectorstore import milvus
from hsearch.vectorstore.milvus import MilvusVectorStore, missed_deadline

P = ParamSpec("P")
R = TypeVar("R")


def retried(method: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """pymilvus' real retry decorator, which keeps the signature (pymilvus is untyped)."""
    return cast("Callable[P, Awaitable[R]]", retry_on_rpc_failure()(method))


def rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class SyncClient:
    def __init__(self, **_: Any) -> None:
        pass

    def close(self) -> None:
        pass


class StalledClient:
    """Never answers: pymilvus' retry loop gives up at the call's ``timeout``."""

    def __init__(self, **_: Any) -> None:
        pass

    @retried
    async def search(self, *_: Any, timeout: float | None = None, **__: Any) -> Any:
        await asyncio.sleep(60)

    async def close(self) -> None:
        pass


class RefusedClient(StalledClient):
    """Every attempt is refused: pymilvus retries until the deadline, then gives up."""

    @retried
    async def search(self, *_: Any, timeout: float | None = None, **__: Any) -> Any:
        raise rpc_error(grpc.StatusCode.UNAVAILABLE, "connection refused")


class DeadlineExceededClient(StalledClient):
    """gRPC's own deadline: pymilvus does not retry it and raises it as it is."""

    @retried
    async def search(self, *_: Any, timeout: float | None = None, **__: Any) -> Any:
        raise rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")


def store_with(monkeypatch: pytest.MonkeyPatch, client: type[StalledClient]) -> MilvusVectorStore:
    monkeypatch.setattr(milvus, "MilvusClient", SyncClient)
    monkeypatch.setattr(milvus, "AsyncMilvusClient", client)
    return MilvusVectorStore("http://milvus.invalid:19530", collection="chunks")


async def search(store: MilvusVectorStore, timeout: float) -> None:
    await store.search_dense((1.0, 0.0), tenant_id="t", filter=None, limit=5, timeout=timeout)


async def test_pymilvus_missing_its_deadline_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_with(monkeypatch, StalledClient)
    with pytest.raises(VectorStoreTimeoutError, match=r"missed its 0\.020s deadline") as info:
        await search(store, 0.02)
    assert "Retry timeout" in info.value.message  # pymilvus' own words are kept
    assert isinstance(info.value, VectorStoreError)  # callers that only know the base
    assert info.value.code == "vector_store_timeout"


async def test_grpc_deadline_exceeded_is_a_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_with(monkeypatch, DeadlineExceededClient)
    with pytest.raises(VectorStoreTimeoutError, match="Deadline Exceeded"):
        await search(store, 1.0)


async def test_a_refused_connection_stays_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # pymilvus retries until the deadline and then says "Retry timeout", but what
    # failed is the connection: no attempt ran out of time, so it is not a timeout.
    store = store_with(monkeypatch, RefusedClient)
    with pytest.raises(VectorStoreError, match="search on dense failed") as info:
        await search(store, 0.05)
    assert not isinstance(info.value, VectorStoreTimeoutError)


def test_missed_deadline_reads_the_whole_chain() -> None:
    assert missed_deadline(TimeoutError())
    assert missed_deadline(rpc_error(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))
    assert missed_deadline(MilvusException(message="gRPC call timed out (DEADLINE_EXCEEDED): x"))
    assert not missed_deadline(rpc_error(grpc.StatusCode.UNAVAILABLE, "refused"))
    assert not missed_deadline(MilvusException(message="collection not loaded"))
    assert not missed_deadline(OSError("reset by peer"))
    # pymilvus re-raises "from" the exception itself: the chain loops back.
    looped = MilvusException(message="Retry timeout: 0.1s")
    looped.__cause__ = looped
    assert not missed_deadline(looped)
    looped.__context__ = TimeoutError()
    assert missed_deadline(looped)


class RestartedServer:
    """A Milvus server just restarted: the collection is released. A load takes a
    moment, and a second load asked for while one runs answers at once, before the
    collection is loaded (what Milvus does for a load already in progress)."""

    def __init__(self) -> None:
        self.loaded = False
        self.loading = False
        self.loads = 0

    async def load(self) -> None:
        self.loads += 1
        if self.loading or self.loaded:
            return
        self.loading = True
        await asyncio.sleep(0.05)
        self.loaded, self.loading = True, False


def restarted_client(server: RestartedServer) -> type[StalledClient]:
    class Client(StalledClient):
        async def search(self, *_: Any, **__: Any) -> Any:
            if not server.loaded:
                raise MilvusException(code=milvus.COLLECTION_NOT_LOADED, message="released")
            return [[{"entity": {"chunk_id": "c1"}, "distance": 1.0}]]

        async def load_collection(self, *_: Any, **__: Any) -> None:
            await server.load()

    return Client


async def test_both_legs_finding_the_collection_released_reload_it_and_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = RestartedServer()
    store = store_with(monkeypatch, restarted_client(server))
    dense, sparse = await asyncio.gather(
        store.search_dense((1.0, 0.0), tenant_id="t", filter=None, limit=1, timeout=2.0),
        store.search_sparse(
            SparseVector((7,), (1.0,)), tenant_id="t", filter=None, limit=1, timeout=2.0
        ),
    )
    assert [h.chunk_id for h in dense] == ["c1"]
    assert [h.chunk_id for h in sparse] == ["c1"]
    assert server.loaded


async def test_a_collection_that_stays_released_fails_the_leg_at_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = RestartedServer()
    server.loading = True  # a load that never finishes
    store = store_with(monkeypatch, restarted_client(server))
    started = asyncio.get_running_loop().time()
    with pytest.raises(VectorStoreError):
        await search(store, 0.3)
    assert asyncio.get_running_loop().time() - started < 1.0
    assert server.loads > 1, "tried again within its deadline"
