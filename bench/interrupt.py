"""How a benchmark's command starts and stops: progress on stderr, and Ctrl-C or SIGTERM
unwinding through the ``finally`` blocks that stop the servers it started.

Light on purpose (no hsearch import): ``bench.relevance`` sets the signals before it
imports the code it measures.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

T = TypeVar("T")

INTERRUPTED = 130
"""The exit status of a run cut short by Ctrl-C or SIGTERM (a shell's 128 + SIGINT)."""


def progress(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def unwind_on_signals() -> None:
    """Ctrl-C and SIGTERM raise KeyboardInterrupt in the main thread (SIGINT explicitly:
    a shell starting us in the background would have ignored it)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _terminate)


def run_and_print(run: Callable[[], T], render: Callable[[T], str]) -> int:
    """``run()`` with :func:`unwind_on_signals`; prints ``render(result)`` on stdout and
    returns 0, or :data:`INTERRUPTED` when a signal cut it short."""
    unwind_on_signals()
    try:
        result = run()
    except KeyboardInterrupt:
        progress("interrupted")
        return INTERRUPTED
    print(render(result), flush=True)
    return 0
