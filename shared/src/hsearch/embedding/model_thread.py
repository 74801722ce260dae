"""One thread per process for every call into the model library (torch).

torch spreads one call over every core with OpenMP, and GNU OpenMP keeps a pool of
threads for each thread that calls it. Once a process holds more OpenMP threads than it
has cores, OpenMP stops spinning between parallel regions: its threads sleep and wake
at every one (libgomp's "throttled" spin). A model called from two threads (loaded and
warmed on one, then used by the indexer's encode thread, the query batcher's or a
web server's) thus has two pools; on 2 cores that was 2,900 sleeps instead of ~50 per
300 chunks and an encoder 4 % slower, before any other work of the process competed
with it (docs/adr/0023-model-calls-on-one-thread.md).

So the adapters that call torch (:class:`~hsearch.embedding.offline.OfflineEmbedder`,
:class:`~hsearch.embedding.bge_m3.BgeM3Embedder`,
:class:`~hsearch.rerank.flag.FlagRerankerAdapter`) load their model
(:func:`load_on_model_thread`) and run every forward pass (:func:`run_on_model_thread`)
there: one pool, and one call at a time (torch already spreads one call over every
core; concurrent calls only contend). A call made from the model thread itself runs at
once (no self-deadlock). A forked child (a prefork pool's process) gets a thread of its
own at its first call.

Loading also turns transformers' progress bars off: its "Loading weights" bar, written
to stderr, landed between a worker's JSON log lines and in the command line's output.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

__all__ = ["MODEL_THREAD_NAME", "load_on_model_thread", "on_model_thread", "run_on_model_thread"]

MODEL_THREAD_NAME = "hsearch-model"

_P = ParamSpec("_P")
_R = TypeVar("_R")

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_ident: int | None = None


def _remember_ident() -> None:
    global _ident  # noqa: PLW0603 - one model thread per process
    _ident = threading.get_ident()


def _model_executor() -> ThreadPoolExecutor:
    global _executor  # noqa: PLW0603 - one model thread per process
    with _lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(
                max_workers=1, thread_name_prefix=MODEL_THREAD_NAME, initializer=_remember_ident
            )
        return _executor


def on_model_thread() -> bool:
    """Whether the caller is this process's model thread."""
    return _ident is not None and threading.get_ident() == _ident


def run_on_model_thread(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """``fn(*args, **kwargs)`` run on the process's model thread; its result, or its
    exception raised here. The caller waits (an interrupt stops the wait, not the call)."""
    if on_model_thread():
        return fn(*args, **kwargs)
    return _model_executor().submit(fn, *args, **kwargs).result()


def load_on_model_thread(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """:func:`run_on_model_thread` for loading a model, with transformers' progress bars
    turned off first (for the whole process: nothing here wants them)."""
    from transformers.utils import logging as transformers_logging  # noqa: PLC0415 (heavy)

    transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # untyped library
    return run_on_model_thread(fn, *args, **kwargs)


def _forget_after_fork() -> None:
    """In a forked child the parent's model thread does not exist: start afresh."""
    global _executor, _ident, _lock  # noqa: PLW0603 - one model thread per process
    _executor = None
    _ident = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
