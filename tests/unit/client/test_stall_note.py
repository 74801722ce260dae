"""What ``hsearch ingest --wait`` says when no document finishes for a while: what the
worker reports doing, not a question whether a worker runs."""

from __future__ import annotations

import uuid
from typing import Any

from hsearch.client.upload import _encoding, _stall_note
from hsearch_client import Job


def job(status: str, encoding: dict[str, Any] | None = None) -> Job:
    return Job.model_validate(
        {
            "id": str(uuid.uuid4()),
            "status": status,
            "total": 1,
            "indexed": 0,
            "skipped": 0,
            "failed": 0,
            "error": None,
            "errors": [],
            "encoding": encoding,
        }
    )


def test_a_worker_encoding_a_large_document_is_named_with_its_chunks() -> None:
    running = job("running", {"document": "big.md", "done": 1200, "total": 3400})
    encoding = _encoding([job("queued"), running])
    assert encoding is not None
    note = _stall_note(61, encoding, [running])
    assert "encoding document 'big.md': 1,200/3,400 chunks" in note
    assert "is an ingest worker running" not in note


def test_a_running_job_without_a_report_is_not_a_missing_worker() -> None:
    running = job("running")
    assert _encoding([running]) is None
    assert "a worker is running the job" in _stall_note(60, None, [running])


def test_queued_jobs_still_ask_for_a_worker() -> None:
    assert "is an ingest worker running?" in _stall_note(60, None, [job("queued"), None])
