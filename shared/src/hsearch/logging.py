"""Logging set-up shared by the API, the workers and the CLI.

Every process writes one JSON object a line (python-json-logger) on stderr by default,
or a plain line (``log_format = text``). Each record carries the id of the request it
serves (:data:`request_id`): the API takes it from a well-formed ``X-Request-Id``
header or makes one, sends it with the job's Celery task (a task header) and stores it
on the job, so one id finds a document's way from the request to the worker
(docs/metrics.md, Logs).

What is logged: dotted event names with ``key=value`` details (``search.done tenant=...
took_ms=...``). Never API keys, tokens or a query's text; the API's own request line
(``http.request``) names the route template, not the path and its query string, in
place of uvicorn's access line.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import uuid
from collections.abc import Iterator
from contextvars import ContextVar

from pythonjsonlogger.json import JsonFormatter

__all__ = [
    "REQUEST_ID_HEADER",
    "bind_request_id",
    "configure_logging",
    "current_request_id",
    "new_request_id",
    "valid_request_id",
]

REQUEST_ID_HEADER = "X-Request-Id"

_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")

request_id: ContextVar[str | None] = ContextVar("hsearch_request_id", default=None)
"""The id of the request (or the task it sent) this context serves."""

# Third-party chatter that drowns our own events at INFO.
_NOISY = ("httpx", "httpcore", "urllib3", "filelock", "sentence_transformers", "transformers")
_MARK = "_hsearch_handler"


def valid_request_id(value: str | None) -> str | None:
    """``value`` if it is an acceptable request id (1 to 128 letters, digits and
    ``._:-``, starting with a letter or a digit), else None: a caller's id is echoed into
    logs and headers only when it cannot carry anything else."""
    if value is None or not _REQUEST_ID.match(value):
        return None
    return value


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    return request_id.get()


@contextlib.contextmanager
def bind_request_id(value: str | None) -> Iterator[None]:
    """Log records made inside carry ``value`` as ``request_id`` (None: none)."""
    token = request_id.set(value)
    try:
        yield
    finally:
        request_id.reset(token)


class _RequestContext(logging.Filter):
    """Adds ``request_id`` and ``event`` (the message's dotted first word) to records."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        if not hasattr(record, "event"):
            message = record.getMessage()
            first = message.split(" ", 1)[0]
            record.event = first if "." in first and first.islower() else None
        return True


def _formatter(log_format: str) -> logging.Formatter:
    if log_format == "text":
        return logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
    return JsonFormatter(
        ["asctime", "levelname", "name", "message", "event", "request_id", "process"],
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        datefmt="%Y-%m-%dT%H:%M:%S%z",
    )


def configure_logging(level: str = "INFO", log_format: str = "json") -> None:
    """Log ``level`` and up from every logger to stderr as ``log_format`` (``json`` or
    ``text``); calling it again replaces the handler it installed."""
    root = logging.getLogger()
    root.setLevel(level.upper())
    for handler in [h for h in root.handlers if getattr(h, _MARK, False)]:
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    setattr(handler, _MARK, True)
    handler.addFilter(_RequestContext())
    handler.setFormatter(_formatter(log_format))
    root.addHandler(handler)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # uvicorn's loggers go through ours (one format); its access line, which holds the
    # raw path and query string, is replaced by the API's own ``http.request`` line.
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    access = logging.getLogger("uvicorn.access")
    access.handlers.clear()
    access.propagate = False
    access.disabled = True
