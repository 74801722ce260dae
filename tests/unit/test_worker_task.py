"""The worker reads the job's turn from the task header the sender set
(:data:`~hsearch.ingestion.queue.TURN_TASK_HEADER`); a message without one, or with one
that is not a number, runs as a message of the previous release did."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from hsearch.ingestion.queue import TURN_TASK_HEADER
from hsearch_ingest.tasks.ingest import sent_turn


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
