"""A real TCP proxy the tests put between a search leg and Milvus (or a worker and its
broker), to make that leg slow, unreachable or frozen without touching the code under
test."""

from __future__ import annotations

import contextlib
import socket
import threading
from enum import StrEnum


class ProxyMode(StrEnum):
    PASS = "pass"  # forward bytes both ways
    STALL = "stall"  # accept, hold every byte: the peer waits until its deadline
    REFUSE = "refuse"  # close new and existing connections at once
    FREEZE = "freeze"  # hold every byte of the connections open now; new ones pass


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._server.getsockname()[1]
        self._mode = ProxyMode.PASS
        self._changed = threading.Condition()
        self._sockets: list[socket.socket] = []
        self._frozen: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept_loop, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: ProxyMode) -> None:
        with self._changed:
            if mode is ProxyMode.FREEZE:
                # The peers' connections stay open and answer nothing, as behind a
                # frozen server or a NAT that forgot them; a new connection passes.
                self._frozen.update(self._sockets)
                mode = ProxyMode.PASS
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
                    while (
                        self._mode is ProxyMode.STALL or src in self._frozen
                    ) and not self._closed:
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
