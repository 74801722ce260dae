"""The process's model thread: every call into the model library runs on one thread."""

from __future__ import annotations

import multiprocessing
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from hsearch.embedding.model_thread import (
    MODEL_THREAD_NAME,
    on_model_thread,
    run_on_model_thread,
)


def _where() -> tuple[int, str, bool]:
    thread = threading.current_thread()
    return threading.get_ident(), thread.name, on_model_thread()


def test_calls_from_many_threads_all_run_on_one_model_thread() -> None:
    with ThreadPoolExecutor(max_workers=4) as callers:
        seen = list(callers.map(lambda _: run_on_model_thread(_where), range(40)))
    seen.append(run_on_model_thread(_where))  # and from this (the main) thread
    assert len({ident for ident, _, _ in seen}) == 1
    assert all(name.startswith(MODEL_THREAD_NAME) and flag for _, name, flag in seen)
    assert seen[0][0] != threading.get_ident()
    assert not on_model_thread()


def test_arguments_results_and_errors_pass_through() -> None:
    assert run_on_model_thread(divmod, 17, 5) == (3, 2)
    assert run_on_model_thread(sorted, [3, 1, 2], reverse=True) == [3, 2, 1]
    with pytest.raises(ZeroDivisionError):
        run_on_model_thread(divmod, 1, 0)
    assert run_on_model_thread(divmod, 4, 2) == (2, 0)  # an error does not stop the thread


def test_a_call_made_on_the_model_thread_runs_at_once() -> None:
    def outer() -> tuple[int, int]:
        return threading.get_ident(), run_on_model_thread(threading.get_ident)

    # Nested through the executor it would wait for itself forever.
    with ThreadPoolExecutor(max_workers=1) as caller:
        outer_ident, inner_ident = caller.submit(run_on_model_thread, outer).result(timeout=10)
    assert outer_ident == inner_ident


def _child(conn: multiprocessing.connection.Connection) -> None:
    try:
        conn.send(run_on_model_thread(_where))
    finally:
        conn.close()


@pytest.mark.process
def test_a_forked_child_gets_a_model_thread_of_its_own() -> None:
    # The parent's model thread exists and is idle: without a fresh start in the child,
    # its executor would count on that thread, absent there, and the call would hang.
    run_on_model_thread(threading.get_ident)
    ctx = multiprocessing.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(send,))
    child.start()
    send.close()
    try:
        assert receive.poll(30), "the child's call never returned"
        _ident, name, flag = receive.recv()
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    assert name.startswith(MODEL_THREAD_NAME)
    assert flag
