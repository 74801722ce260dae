"""A real TCP proxy the tests put between a search leg and Milvus, to make that leg
slow or unreachable without touching the code under test."""

from __future__ import annotations

import contextlib
import socket
import threading
from enum import StrEnum


class ProxyMode(StrEnum):
    PASS = "pass"  # forward bytes both ways
    STALL = "stall"  # accept, hold every byte: the peer waits until its deadline
    REFUSE = "refuse"  # close new and existing connections at once


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._mode = ProxyMode.PASS
        self._changed = threading.Condition()
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: ProxyMode) -> None:
        with self._changed:
            self._mode = mode
            self._changed.notify_all()
        if mode is ProxyMode.REFUSE:
            self._drop_all()

    def close(self) -> None:
        self._closed = True
        self.set_mode(ProxyMode.REFUSE)
        self._server.close()

    def _drop_all(self) -> None:
        for s in list(self._sockets):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()
        self._sockets.clear()

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self._mode is ProxyMode.REFUSE:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._changed:
                    while self._mode is ProxyMode.STALL and not self._closed:
                        self._changed.wait()
                    if self._mode is ProxyMode.REFUSE:
                        break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
