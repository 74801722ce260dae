"""The worker reads the job's turn from the task header the sender set
(:data:`~hsearch.ingestion.queue.TURN_TASK_HEADER`); a message without one, or with one
that is not a number, runs as a message of the previous release did."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from celery.app.task import Context

from hsearch.ingestion.queue import TURN_TASK_HEADER
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
