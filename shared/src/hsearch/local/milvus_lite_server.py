"""The embedded profile's Milvus Lite gRPC server, bound without ``SO_REUSEPORT``.

``python -m milvus_lite server`` builds a grpcio server with gRPC's default options, and
on Linux gRPC binds with ``SO_REUSEPORT``: a second server on a port one already serves
starts without an error, and the kernel spreads new connections between the two. Each
process then talks to whichever server its connection reached, so a second ``hsearch
run`` on the same port, or two starts that picked the same free port at once, split one
deployment's data between two servers without a word (a worker started later finds no
collection on its server, creates one and writes there; the others never see it).

This entry point serves the same Milvus Lite (its servicer and database, as
``milvus_lite.adapter.grpc.server`` does) with ``grpc.so_reuseport`` 0, so a taken port
fails the start: the process exits with
:data:`~hsearch.local.processes.MILVUS_LITE_PORT_TAKEN`. Run it as
``python -m hsearch.local.milvus_lite_server --data-dir D --host H --port P``
(:func:`hsearch.local.processes.milvus_lite_command`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from concurrent import futures

import grpc
from milvus_lite.adapter.grpc.servicer import MilvusServicer
from milvus_lite.db import MilvusLite
from pymilvus.grpc_gen import milvus_pb2_grpc

from hsearch.local.processes import MILVUS_LITE_PORT_TAKEN, listening_line

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
"""What Milvus Lite's own server and Milvus standalone accept per message."""

SERVER_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
)


def serve(data_dir: str, *, host: str, port: int, max_workers: int = 10) -> int:
    """Serve ``data_dir`` on ``host:port`` until interrupted; returns the exit status
    (``MILVUS_LITE_PORT_TAKEN`` when the address is taken)."""
    db = MilvusLite(data_dir)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers), options=list(SERVER_OPTIONS)
    )
    milvus_pb2_grpc.add_MilvusServiceServicer_to_server(MilvusServicer(db), server)
    address = f"{host}:{port}"
    try:
        server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio's "Failed to bind"
        db.close()
        sys.stderr.write(f"milvus lite: cannot listen on {address} ({exc}): is it taken?\n")
        return MILVUS_LITE_PORT_TAKEN
    server.start()
    # The line start_milvus_lite waits for: this process, not another, serves the port.
    sys.stdout.write(f"{listening_line(os.getpid(), address)} (data in {data_dir})\n")
    sys.stdout.flush()
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop(grace=5)
        db.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--max-workers", type=int, default=10)
    args = parser.parse_args(argv)
    return serve(args.data_dir, host=args.host, port=args.port, max_workers=args.max_workers)


if __name__ == "__main__":
    sys.exit(main())
