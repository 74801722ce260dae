"""The worker reads the job's turn from the task header the sender set
(:data:`~hsearch.ingestion.queue.TURN_TASK_HEADER`); a message without one, or with one
that is not a number, runs as a message of the previous release did. A task's failure
handler never raises."""

from __future__ import annotations

import logging
import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from celery.app.task import Context

from hsearch.errors import EncoderMismatchError, VectorStoreError
from hsearch.ingestion.queue import TURN_TASK_HEADER
from hsearch_ingest import signals
from hsearch_ingest.tasks import ingest as ingest_module
from hsearch_ingest.tasks.ingest import ingest_job, sent_turn


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        (SimpleNamespace(**{TURN_TASK_HEADER: 3}), 3),
        (SimpleNamespace(headers={TURN_TASK_HEADER: 0}), 0),
        (SimpleNamespace(**{TURN_TASK_HEADER: None}, headers={TURN_TASK_HEADER: 2}), 2),
        (SimpleNamespace(headers=None), None),
        (SimpleNamespace(), None),
        (SimpleNamespace(**{TURN_TASK_HEADER: "3"}), None),
        (SimpleNamespace(**{TURN_TASK_HEADER: True}), None),
    ],
)
def test_the_turn_comes_from_the_task_header(request_: object, expected: int | None) -> None:
    assert sent_turn(request_) == expected


def test_a_retry_carries_the_turn_of_the_message_it_retries() -> None:
    """Celery's own request context (as a worker builds it from a message carrying the
    header) and the message of an autoretry (a turn failed: the retry runs that turn)."""
    request = Context(
        {"id": "task-1", "retries": 0, "args": [], "kwargs": {"job_id": "j"}, TURN_TASK_HEADER: 3}
    )
    assert sent_turn(request) == 3
    retry = ingest_job.signature_from_request(request, args=(), kwargs={"job_id": "j"})
    assert retry.options["headers"][TURN_TASK_HEADER] == 3


class FailingIndexer:
    def __init__(self) -> None:
        self.failed: list[uuid.UUID] = []

    def fail_job(self, job_id: uuid.UUID, *, error: str) -> None:
        self.failed.append(job_id)
        raise RuntimeError("database unreachable")


def test_the_failure_handler_never_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception in it stopped the worker's consumer (the process exited, again at
    every re-delivery of a message whose job id is no UUID) or left the message
    unacknowledged for good (from a retry's timer)."""
    indexer = FailingIndexer()
    monkeypatch.setattr(ingest_module, "get_indexing_service", lambda: indexer)
    handler: Any = ingest_job.on_failure
    caplog.set_level(logging.ERROR)
    handler(ValueError("bad"), "task-1", (), {"job_id": "not-a-uuid"}, None)
    assert "ingest.task.bad_job_id task_id=task-1 job_id='not-a-uuid'" in caplog.text
    assert indexer.failed == []
    job = uuid.uuid4()
    handler(RuntimeError("boom"), "task-2", (), {"job_id": str(job)}, None)
    assert indexer.failed == [job]
    assert f"ingest.job.not_marked_failed job_id={job}" in caplog.text


def test_a_worker_builds_its_services_again_while_a_backing_service_is_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Milvus down as the worker starts: it waits for it, spaced out, rather than take
    tasks it could not index with no sweeper running."""
    attempts = iter([VectorStoreError("no Milvus"), VectorStoreError("no Milvus"), None])
    ready = object()

    def build() -> object:
        error = next(attempts)
        if error is not None:
            raise error
        return ready

    slept: list[float] = []
    monkeypatch.setattr(signals, "get_services", build)
    assert signals.services_when_ready(sleep=slept.append) is ready
    assert slept == [1.0, 2.0]


def test_a_worker_that_cannot_be_built_for_another_reason_exits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def build() -> object:
        raise EncoderMismatchError("the collection was built by another encoder")

    monkeypatch.setattr(signals, "get_services", build)
    with pytest.raises(SystemExit):
        signals.services_when_ready(sleep=lambda _: None)
