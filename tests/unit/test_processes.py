"""Local child processes: readiness waits that explain failures, clean stops, ports."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from hsearch.errors import ConfigurationError
from hsearch.local import processes
from hsearch.local.processes import (
    MILVUS_LITE_PORT_TAKEN,
    Child,
    api_command,
    free_port,
    milvus_lite_command,
    port_open,
    start_milvus_lite,
    stop_all,
    wait_until,
    worker_command,
)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_wait_until_returns_once_the_check_holds() -> None:
    calls = iter([False, False, True])
    wait_until(lambda: next(calls), timeout=5, what="thing", interval=0.01)


@pytest.mark.process
def test_a_process_that_exits_fails_the_wait_with_its_log_tail(tmp_path: Path) -> None:
    log = tmp_path / "boom.log"
    child = Child(
        "boom", argv=python("print('address already in use', flush=True); exit(3)"), env={}, log=log
    )
    try:
        with pytest.raises(ConfigurationError) as info:
            child.wait_until(lambda: False, timeout=30, what="Boom server")
    finally:
        child.stop()
    message = info.value.message
    assert message.startswith("Boom server: process exited with code 3")
    assert "address already in use" in message
    assert str(log) in message


def test_a_timeout_names_what_was_awaited_and_shows_the_log(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    log.write_text("x" * 5000 + "still loading the model")
    with pytest.raises(ConfigurationError, match=r"Slow thing: not ready after 0s") as info:
        wait_until(lambda: False, timeout=0.05, what="Slow thing", log=log, interval=0.01)
    assert info.value.message.endswith("still loading the model")
    assert "x" * 5000 not in info.value.message, "only the tail"


def test_without_a_log_the_message_has_no_tail() -> None:
    with pytest.raises(ConfigurationError) as info:
        wait_until(lambda: False, timeout=0, what="Quiet thing")
    assert info.value.message == "Quiet thing: not ready after 0s"


@pytest.mark.process
def test_stop_ends_the_child_and_closes_its_log(tmp_path: Path) -> None:
    log = tmp_path / "sleeper.log"
    child = Child(
        "sleeper",
        argv=python("import time; print('up', flush=True); time.sleep(60)"),
        env={},
        log=log,
    )
    child.wait_until(lambda: "up" in child.log_text(), timeout=30, what="sleeper")
    assert child.alive()
    child.stop(timeout=10)
    assert not child.alive()
    assert child.proc.returncode == -15  # SIGTERM
    assert child.log_text() == "up\n"


def test_free_port_and_port_open() -> None:
    port = free_port()
    assert not port_open(port)
    with socket.socket() as server:
        server.bind(("127.0.0.1", port))
        server.listen()
        assert port_open(port)


def test_milvus_lite_refuses_a_taken_port_up_front(tmp_path: Path) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"port 127.0.0.1:{port} is taken"):
            start_milvus_lite(tmp_path / "milvus", log=tmp_path / "milvus.log", port=port)
    assert not (tmp_path / "milvus.log").exists(), "nothing was started"


def milvus_lite_children() -> set[int]:
    pids = set()
    for proc in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # exited meanwhile
            if any("milvus_lite" in part for part in proc.cmdline()):
                pids.add(proc.pid)
    return pids


@pytest.mark.process
def test_a_service_that_does_not_come_up_is_stopped(tmp_path: Path) -> None:
    before = milvus_lite_children()  # the integration suite's server, in a full run
    with pytest.raises(ConfigurationError, match="Milvus Lite server: not ready after 0s"):
        start_milvus_lite(tmp_path / "milvus", log=tmp_path / "milvus.log", timeout=0)
    assert milvus_lite_children() - before == set()


def test_commands() -> None:
    worker = worker_command("w1@%h", loglevel="INFO")
    assert worker[1:6] == ["-m", "celery", "-A", "hsearch_ingest.celery_app:app", "worker"]
    assert worker[-2:] == ["-n", "w1@%h"]
    assert "--without-gossip" not in worker
    # Tasks run in the worker process: no pool child that could die while it lives on.
    assert worker[worker.index("--pool") + 1] == "solo"
    assert "--concurrency" not in worker
    standalone = worker_command("w1@%h", loglevel="INFO", standalone=True)
    assert standalone[-3:] == ["--without-gossip", "--without-mingle", "--without-heartbeat"]
    assert api_command(host="127.0.0.1", port=8000)[1:] == [
        "-m", "uvicorn", "hsearch_api.main:create_app", "--factory",
        "--host", "127.0.0.1", "--port", "8000",
    ]  # fmt: skip


@pytest.mark.process
def test_the_worker_app_runs_tasks_in_the_worker_process() -> None:
    """Whatever command starts it (compose, Kubernetes, by hand): Celery's CLI takes the
    app's ``worker_pool`` over its ``prefork`` default, and its ``worker_concurrency``
    over the machine's core count, so that it holds one message (multiplier x
    concurrency), the one it runs. In a subprocess, since importing the app configures
    logging."""
    code = (
        "from hsearch_ingest.celery_app import app; c = app.conf; "
        "print(c.worker_pool, c.worker_concurrency, c.worker_prefetch_multiplier)"
    )
    done = subprocess.run(python(code), capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["solo", "1", "1"]


@pytest.mark.process
def test_a_second_milvus_lite_on_a_taken_port_fails_instead_of_sharing_it(
    tmp_path: Path,
) -> None:
    """gRPC binds with SO_REUSEPORT by default: a second server on a port one serves
    would start and get half the connections. Ours refuses the port (and exits)."""
    first, uri = start_milvus_lite(tmp_path / "a", log=tmp_path / "a.log")
    try:
        port = int(uri.rsplit(":", 1)[1])
        second = Child(
            "milvus",
            argv=milvus_lite_command(tmp_path / "b", host="127.0.0.1", port=port),
            env=os.environ,
            log=tmp_path / "b.log",
        )
        assert second.proc.wait(60) == MILVUS_LITE_PORT_TAKEN
        second.stop()
        assert "cannot listen on" in (tmp_path / "b.log").read_text()
        assert first.alive()
    finally:
        first.stop()


@pytest.mark.process
def test_a_free_port_taken_before_the_bind_is_chosen_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process takes the free port between its choice and the server's bind:
    the server's start fails on it, and a new free port is chosen."""
    taken, uri = start_milvus_lite(tmp_path / "a", log=tmp_path / "a.log")
    try:
        taken_port = int(uri.rsplit(":", 1)[1])
        choices = iter([taken_port])
        monkeypatch.setattr(
            processes, "free_port", lambda host="127.0.0.1": next(choices, None) or free_port(host)
        )
        child, second_uri = start_milvus_lite(tmp_path / "b", log=tmp_path / "b.log")
        try:
            assert second_uri != uri
            assert "cannot listen on" in (tmp_path / "b.log").read_text()
        finally:
            child.stop()
    finally:
        taken.stop()


@pytest.mark.process
def test_the_services_stop_after_those_using_them(tmp_path: Path) -> None:
    """A worker stopping still reaches Milvus: the service gets SIGTERM only once the
    worker has exited (here after a last second of work), all within the timeout."""
    service = Child(
        "service",
        argv=python("import time; print('up', flush=True); time.sleep(60)"),
        env={},
        log=tmp_path / "service.log",
    )
    # On SIGTERM the user works one more second, then says whether the service is up
    # (a service that has exited is a zombie of this test until it is reaped).
    user_code = (
        "import signal, sys, time\n"
        "def service_up():\n"
        "    try:\n"
        f"        with open('/proc/{service.proc.pid}/stat') as stat:\n"
        "            return stat.read().split()[2] != 'Z'\n"
        "    except FileNotFoundError:\n"
        "        return False\n"
        "def last_write(*_):\n"
        "    time.sleep(1)\n"
        "    print('service up' if service_up() else 'service gone', flush=True)\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, last_write)\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    user = Child("user", argv=python(user_code), env={}, log=tmp_path / "user.log")
    service.wait_until(lambda: "up" in service.log_text(), timeout=30, what="service")
    user.wait_until(lambda: "up" in user.log_text(), timeout=30, what="user")
    started = time.monotonic()
    stop_all([user], last=[service], timeout=3)
    assert time.monotonic() - started < 5  # hsearch run's promise for Ctrl-C
    assert not user.alive()
    assert not service.alive()
    assert user.log_text().splitlines()[-1] == "service up"
    assert user.proc.returncode == 0  # it finished its last second of work
    assert service.proc.returncode == -15  # SIGTERM, not SIGKILL
