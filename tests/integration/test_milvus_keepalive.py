"""hsearch's gRPC options keep Milvus Lite from closing idle connections with GOAWAY
``too_many_pings`` (docs/operations.md, "gRPC keepalive").

Milvus Lite refuses pings on a connection without calls more often than every 2 h and
closes it at the third refused one. Waiting for that with real periods takes minutes, so
both connections here ping every second and without gRPC's client-side cap of two
pings between data frames (``grpc.http2.max_pings_without_data`` 0). The first one
keeps pymilvus's ``keepalive_permit_without_calls``: it shows that such a connection is
closed on this server, and how long that takes. The second, with hsearch's options,
must stay open for twice as long.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import grpc
import pytest
from pymilvus import MilvusClient

from hsearch.vectorstore.milvus import grpc_options

pytestmark = pytest.mark.integration

FAST_PINGS = {**grpc_options(keepalive_s=1.0), "grpc.http2.max_pings_without_data": 0}
CLOSE_TIMEOUT_S = 30.0


class WatchedClient:
    """A dedicated pymilvus connection whose gRPC channel states are recorded."""

    def __init__(self, uri: str, options: dict[str, Any]) -> None:
        self.client = MilvusClient(uri=uri, grpc_options=options, dedicated=True)
        self.left_ready = threading.Event()
        self.states: list[grpc.ChannelConnectivity] = []
        # pymilvus has no public handle on its channel; its states are the only sign
        # of a GOAWAY the client survives (the next call reconnects).
        self.client._handler._channel.subscribe(self._record)

    def _record(self, state: grpc.ChannelConnectivity) -> None:
        self.states.append(state)
        if state is not grpc.ChannelConnectivity.READY and self.states.count(
            grpc.ChannelConnectivity.READY
        ):
            self.left_ready.set()

    def close(self) -> None:
        self.client.close()


def test_an_idle_connection_is_not_closed_for_too_many_pings(milvus_uri: str) -> None:
    control = WatchedClient(milvus_uri, {**FAST_PINGS, "grpc.keepalive_permit_without_calls": 1})
    try:
        control.client.list_collections()
        started = time.monotonic()
        assert control.left_ready.wait(CLOSE_TIMEOUT_S), (
            f"pinging an idle connection every second was never refused: {control.states}"
        )
        time_to_close = time.monotonic() - started
    finally:
        control.close()

    ours = WatchedClient(milvus_uri, FAST_PINGS)
    try:
        ours.client.list_collections()
        assert not ours.left_ready.wait(2 * time_to_close + 1), (
            f"hsearch's options: the idle connection was closed: {ours.states}"
        )
        assert ours.client.list_collections() is not None
    finally:
        ours.close()
