"""Local child processes: the Milvus Lite server, Celery workers and the API (uvicorn).

``hsearch run``, the integration suite and the relevance benchmark start the same
processes with the same commands; this module is the one place that knows them.

* :class:`Child` is a process in its own session (a terminal's Ctrl-C reaches only
  its parent, which stops children deliberately) that dies with its parent on Linux
  (``PR_SET_PDEATHSIG``), so nothing is left behind when the parent is killed.
* :func:`wait_until` polls a readiness check under a deadline; when the process exits
  or the deadline passes it raises :class:`~hsearch.errors.ConfigurationError` with
  the end of the process's log, which is where the reason is.
* ``start_*`` start a service, wait until it is ready and return it; a service that
  does not come up (or a Ctrl-C while waiting) is stopped before the error propagates.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

import httpx

from hsearch.errors import ConfigurationError

LOCALHOST = "127.0.0.1"
MILVUS_CHILD = "milvus"
"""The name of the Milvus Lite server's :class:`Child`."""
LOG_TAIL_CHARS = 4000
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def log_tail(log: Path | None, chars: int = LOG_TAIL_CHARS) -> str:
    """The last ``chars`` characters of ``log`` ("" when there is none yet)."""
    if log is None or not log.exists():
        return ""
    return log.read_text(errors="replace")[-chars:]


def wait_until(
    check: Callable[[], bool],
    *,
    timeout: float,
    what: str,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
    interval: float = 0.1,
) -> None:
    """Poll ``check`` until it holds; fail early if ``proc`` exits.

    Raises :class:`~hsearch.errors.ConfigurationError` naming ``what``, with the tail
    of ``log`` (the process's output) when one is given.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            msg = f"{what}: process exited with code {proc.returncode}"
            raise ConfigurationError(_with_tail(msg, log))
        time.sleep(interval)
    msg = f"{what}: not ready after {timeout:.0f}s"
    raise ConfigurationError(_with_tail(msg, log))


def _with_tail(message: str, log: Path | None) -> str:
    tail = log_tail(log)
    return f"{message}; end of {log}:\n{tail}" if tail else message


class Child:
    """A child process in its own session that dies with its parent on Linux; its
    output goes to ``log`` (appended) when one is given, else to ours."""

    def __init__(
        self, name: str, *, argv: list[str], env: Mapping[str, str], log: Path | None = None
    ) -> None:
        self.name = name
        self.log = log
        self._out: IO[bytes] | None = open(log, "ab") if log else None  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(  # noqa: S603 - argv is built here, not from user input
            argv,
            env=dict(env),
            stdout=self._out,
            stderr=subprocess.STDOUT if self._out else None,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_text(self) -> str:
        """Everything the process wrote so far ("" without a log file)."""
        return log_tail(self.log, chars=sys.maxsize)

    def wait_until(self, check: Callable[[], bool], *, timeout: float, what: str) -> None:
        """:func:`wait_until` for this process and its log."""
        wait_until(check, timeout=timeout, what=what, proc=self.proc, log=self.log)

    def terminate(self) -> None:
        """SIGTERM to the child's process group, without waiting."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM to the child's process group, SIGKILL after ``timeout`` seconds."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        if self._out is not None:
            self._out.close()


def free_port(host: str = LOCALHOST) -> int:
    """A port nothing listens on right now (the OS's choice)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def port_open(port: int, *, host: str = LOCALHOST) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


# -- commands ---------------------------------------------------------------------------


MILVUS_LITE_PORT_TAKEN = 3
"""The exit status of :func:`milvus_lite_command`'s server when its port is taken."""

FREE_PORT_TRIES = 3
"""Starts of a service on a free port of the OS's choice: another process may take the
port between the choice and the bind."""


def listening_line(pid: int, address: str) -> str:
    """What :func:`milvus_lite_command`'s server prints once it serves ``address``."""
    return f"milvus lite: pid {pid} listening on {address}"


def milvus_lite_command(data_dir: Path, *, host: str, port: int) -> list[str]:
    """The command that serves Milvus Lite over gRPC from ``data_dir`` (the embedded
    profile's Milvus): Milvus Lite's server bound without ``SO_REUSEPORT``, so that a
    taken port fails the start instead of splitting data between two servers
    (:mod:`hsearch.local.milvus_lite_server`)."""
    return [
        sys.executable,
        "-m",
        "hsearch.local.milvus_lite_server",
        "--data-dir",
        str(data_dir),
        "--host",
        host,
        "--port",
        str(port),
    ]


def worker_command(node: str, *, loglevel: str, standalone: bool = False) -> list[str]:
    """A Celery ingest worker named ``node`` (``name@%h``): one task at a time, no
    prefetch (tasks acknowledge late), run by the worker process itself (the ``solo``
    pool). A prefork pool's child can be killed while its parent lives on, and the
    parent does not always notice: it keeps the lost task as running and consumes
    nothing more (docs/adr/0022-one-process-per-worker.md). With no child, a
    ``kill -9`` of the worker is the death of the process its supervisor watches.

    ``standalone`` leaves out gossip, mingle and heartbeats: a worker that never talks
    to other workers starts faster (the test suite's).
    """
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "hsearch_ingest.celery_app:app",
        "worker",
        "-Q",
        "ingest",
        "--pool",
        "solo",
        "--prefetch-multiplier",
        "1",
        "--loglevel",
        loglevel,
        "-n",
        node,
    ]
    if standalone:
        argv += ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    return argv


def model_server_command(
    model: Path, *, alias: str, host: str, port: int, threads: int, context: int
) -> list[str]:
    """The local model server (:mod:`hsearch.llm.server`): llama.cpp serving ``model``
    (named on the command line, so ``ps`` shows what it serves) as ``alias`` over an
    OpenAI-compatible API on ``host:port``."""
    return [
        sys.executable,
        "-m",
        "hsearch.llm.server",
        "--model",
        str(model),
        "--alias",
        alias,
        "--host",
        host,
        "--port",
        str(port),
        "--threads",
        str(threads),
        "--context",
        str(context),
    ]


def api_command(*, host: str, port: int, workers: int = 1) -> list[str]:
    """The API (uvicorn on the app factory), in ``workers`` processes (with
    ``PROMETHEUS_MULTIPROC_DIR`` set, ``/metrics`` adds up all of theirs)."""
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "hsearch_api.main:create_app",
        "--factory",
        "--host",
        host,
        "--port",
        str(port),
    ]
    if workers > 1:
        argv += ["--workers", str(workers)]
    return argv


# -- services ---------------------------------------------------------------------------


def _started(child: Child, check: Callable[[], bool], *, timeout: float, what: str) -> Child:
    """``child`` once ``check`` holds; stopped if it never does or the wait is cut short."""
    try:
        child.wait_until(check, timeout=timeout, what=what)
    except BaseException:
        child.stop()
        raise
    return child


def start_milvus_lite(
    data_dir: Path,
    *,
    log: Path,
    host: str = LOCALHOST,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
) -> tuple[Child, str]:
    """A Milvus Lite gRPC server on ``port`` (a free one by default), once it accepts
    connections; returns it and its URI.

    A taken ``port`` is refused up front: the readiness check would otherwise be
    answered by whatever already listens there. The server binds without
    ``SO_REUSEPORT``, so a port taken between that check (or the choice of a free port)
    and its bind fails its start rather than sharing the port with another server; a
    free port is then chosen again, up to :data:`FREE_PORT_TRIES` times.
    """
    chosen = port
    if chosen is not None and port_open(chosen, host=host):
        msg = (
            f"port {host}:{chosen} is taken; stop what runs there or set HSEARCH_MILVUS__LITE_PORT"
        )
        raise ConfigurationError(msg)
    data_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, (1 if chosen is not None else FREE_PORT_TRIES) + 1):
        bound = chosen if chosen is not None else free_port(host)
        child = Child(
            MILVUS_CHILD,
            argv=milvus_lite_command(data_dir, host=host, port=bound),
            env=os.environ if env is None else env,
            log=log,
        )
        try:
            # Ready once this child says it serves the port: an open port alone may be
            # another process's, which took the free port first.
            line = listening_line(child.proc.pid, f"{host}:{bound}")
            _started(
                child,
                lambda: line in child.log_text(),  # noqa: B023 - called within the turn
                timeout=timeout,
                what="Milvus Lite server",
            )
        except ConfigurationError:
            taken = child.proc.returncode == MILVUS_LITE_PORT_TAKEN
            if chosen is None and taken and attempt < FREE_PORT_TRIES:
                continue  # another process took the free port first: choose again
            raise
        return child, f"http://{host}:{bound}"
    raise AssertionError("unreachable")  # the last turn returns or raises


def start_worker(
    env: Mapping[str, str],
    *,
    node: str,
    log: Path,
    loglevel: str = "INFO",
    standalone: bool = False,
    timeout: float = 120.0,
) -> Child:
    """A Celery ingest worker (:func:`worker_command`), once it reports ready."""
    child = Child(
        node.split("@", 1)[0],
        argv=worker_command(node, loglevel=loglevel, standalone=standalone),
        env=env,
        log=log,
    )
    return _started(
        child, lambda: " ready." in child.log_text(), timeout=timeout, what="Celery worker"
    )


def start_api(
    env: Mapping[str, str],
    *,
    log: Path | None,
    host: str = LOCALHOST,
    port: int | None = None,
    workers: int = 1,
    timeout: float = 180.0,
) -> tuple[Child, str]:
    """The API (:func:`api_command`) on ``port`` (a free one by default), once
    ``/readyz`` answers 200; returns it and its base URL."""
    port = free_port(host) if port is None else port
    base = f"http://{host}:{port}"

    def ready() -> bool:
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    argv = api_command(host=host, port=port, workers=workers)
    child = Child("api", argv=argv, env=env, log=log)
    return _started(child, ready, timeout=timeout, what="API"), base


LAST_STOP_S = 0.5
"""Of :func:`stop_all`'s time, what is kept for the services the others use."""


MODEL_CHILD = "model"
"""The name of the local model server's :class:`Child`."""


def model_server_ready(base: str) -> bool:
    """Whether the model server at ``base`` (``http://host:port``) answers its health
    check (llama.cpp's ``/health`` is 200 once the model is loaded)."""
    try:
        return httpx.get(f"{base}/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def start_model_server(
    model: Path,
    *,
    alias: str,
    host: str = LOCALHOST,
    port: int = 0,
    threads: int = 1,
    context: int = 2048,
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 120.0,
) -> tuple[Child, str]:
    """The local model server, ready; and its OpenAI-compatible base URL (``.../v1``).
    ``port`` 0 takes a free one."""
    bound = port or free_port(host)
    argv = model_server_command(
        model, alias=alias, host=host, port=bound, threads=threads, context=context
    )
    child = Child(MODEL_CHILD, argv=argv, env=env if env is not None else os.environ, log=log)
    base = f"http://{host}:{bound}"
    _started(child, lambda: model_server_ready(base), timeout=timeout, what="the model server")
    return child, f"{base}/v1"


def stop_all(children: Sequence[Child], *, timeout: float, last: Sequence[Child] = ()) -> None:
    """Stop ``children``, then ``last`` (the services they use: Milvus), all within
    ``timeout`` seconds: SIGTERM to every process group of ``children`` at once, SIGKILL
    to what is still running :data:`LAST_STOP_S` before the end; then the same for
    ``last`` in what is left. The workers' last writes thus still reach Milvus, rather
    than failing and being retried against a server that is going away. A Celery
    worker's warm shutdown would wait for its running task; the job it held is resumed
    after a restart (its lease expires: hsearch.ingestion.worker.leases)."""
    deadline = time.monotonic() + timeout
    first_deadline = deadline - (min(LAST_STOP_S, timeout / 2) if last else 0.0)
    for group, until in ((children, first_deadline), (last, deadline)):
        for child in group:
            child.terminate()
        for child in group:
            child.stop(timeout=max(0.0, until - time.monotonic()))
