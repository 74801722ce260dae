"""Log records: JSON or text, with the request id bound to the context and the event
name; request ids accepted only when they cannot carry anything else."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from hsearch.logging import (
    bind_request_id,
    configure_logging,
    current_request_id,
    new_request_id,
    valid_request_id,
)


@pytest.mark.parametrize("good", ["a", "req-1", "0f3e.trace:span_9", "A" * 128])
def test_well_formed_request_ids_are_kept(good: str) -> None:
    assert valid_request_id(good) == good


@pytest.mark.parametrize("bad", [None, "", "-x", "a b", "a\nb", "é", "A" * 129, '{"x":1}'])
def test_others_are_refused(bad: str | None) -> None:
    assert valid_request_id(bad) is None


def test_a_new_id_is_well_formed_and_unique() -> None:
    first, second = new_request_id(), new_request_id()
    assert valid_request_id(first) == first
    assert first != second


def captured(log_format: str) -> Iterator[io.StringIO]:
    configure_logging("INFO", log_format)
    root = logging.getLogger()
    ours = next(h for h in root.handlers if getattr(h, "_hsearch_handler", False))
    assert isinstance(ours, logging.StreamHandler)
    out = io.StringIO()
    ours.setStream(out)
    yield out
    configure_logging("INFO", "json")


@pytest.fixture
def json_out() -> Iterator[io.StringIO]:
    yield from captured("json")


@pytest.fixture
def text_out() -> Iterator[io.StringIO]:
    yield from captured("text")


def test_json_lines_carry_the_bound_request_id_and_the_event(json_out: io.StringIO) -> None:
    log = logging.getLogger("hsearch.test")
    with bind_request_id("r-1"):
        assert current_request_id() == "r-1"
        log.info("ingest.job.finished job_id=%s status=%s", "j", "succeeded")
    log.info("plain words here")
    assert current_request_id() is None
    first, second = (json.loads(line) for line in json_out.getvalue().splitlines())
    assert first["request_id"] == "r-1"
    assert first["event"] == "ingest.job.finished"
    assert first["message"] == "ingest.job.finished job_id=j status=succeeded"
    assert (first["level"], first["logger"]) == ("INFO", "hsearch.test")
    assert second["request_id"] is None
    assert second["event"] is None


def test_text_lines_carry_it_too(text_out: io.StringIO) -> None:
    with bind_request_id("r-2"):
        logging.getLogger("hsearch.test").warning("search.done took_ms=1")
    assert "[r-2] search.done took_ms=1" in text_out.getvalue()


def test_configuring_again_replaces_the_handler() -> None:
    configure_logging("INFO", "json")
    configure_logging("INFO", "json")
    root = logging.getLogger()
    assert sum(1 for h in root.handlers if getattr(h, "_hsearch_handler", False)) == 1
    assert logging.getLogger("uvicorn.access").disabled
