"""The uploader against a scripted API on a clock that moves only when the client
pauses: waiting for many jobs stays within the key's rate limit (one request per
``poll_interval_s`` on average, fewer while nothing finishes), a 429 is waited out, and
an interrupted upload is counted as the state file has it, or said to be uncertain."""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from hsearch.client.state import UploadState
from hsearch.client.upload import IngestOptions, IngestReport, Uploader
from hsearch_client import ApiError, Client, Retry
from tests.unit.client.clock import Clock
from tests.unit.client.documents import write_jsonl

URL = "http://api.test"


@dataclass
class FakeJob:
    id: uuid.UUID
    total: int
    done_at: float
    """When the worker has indexed it all; until then it is running, indexing evenly."""
    started_at: float
    stalled: bool = False
    """Nothing indexed until it is all done (a worker busy elsewhere)."""

    def json(self, now: float) -> dict[str, Any]:
        share = min(1.0, (now - self.started_at) / (self.done_at - self.started_at))
        share = 0.0 if self.stalled else share
        finished = now >= self.done_at
        return {
            "id": str(self.id),
            "status": "succeeded" if finished else "running",
            "total": self.total,
            "indexed": self.total if finished else int(self.total * share),
            "skipped": 0,
            "failed": 0,
            "errors": [],
        }


@dataclass
class FakeApi:
    """Accepts uploads as jobs that take ``job_s`` each, answers job reads and lists, and
    refuses requests over ``limit`` per minute of the clock with 429 and ``Retry-After``
    (as ``hsearch.ratelimit`` does, uploads and reads in one budget)."""

    clock: Clock
    job_s: float = 60.0
    limit: int = 600
    stalled: bool = False
    jobs: dict[uuid.UUID, FakeJob] = field(default_factory=dict)
    seen: list[tuple[float, str]] = field(default_factory=list)
    """(time, method and path) of every request let through."""
    refused: int = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        now = self.clock.now
        if sum(1 for t, _ in self.seen if now - t < 60) >= self.limit:
            self.refused += 1  # a refused request is not counted (nor is it in limits)
            detail = f"rate limit of {self.limit}/minute per key reached; retry after 2 s"
            return httpx.Response(
                429,
                headers={"Retry-After": "2"},
                json={"error": "rate_limited", "detail": detail},
            )
        self.seen.append((now, f"{request.method} {request.url.path}"))
        path = request.url.path
        if request.method == "POST" and path == "/v1/documents:ndjson":
            lines = [line for line in request.content.split(b"\n") if line.strip()]
            job = FakeJob(
                uuid.uuid4(),
                len(lines),
                done_at=now + self.job_s,
                started_at=now,
                stalled=self.stalled,
            )
            self.jobs[job.id] = job
            return httpx.Response(202, json={"job_id": str(job.id), "total": job.total})
        if path == "/v1/jobs":
            status = request.url.params.get("status")
            rows = [j.json(now) for j in self.jobs.values()]
            rows = [r for r in rows if status is None or r["status"] == status]
            return httpx.Response(200, json={"jobs": rows, "next_cursor": None})
        if found := re.fullmatch(r"/v1/jobs/([0-9a-f-]+)", path):
            asked = self.jobs.get(uuid.UUID(found.group(1)))
            if asked is None:
                return httpx.Response(404, json={"error": "job_not_found", "detail": "gone"})
            return httpx.Response(200, json=asked.json(now))
        return httpx.Response(404, json={"error": "not_found", "detail": path})


class Lines:
    """A progress that keeps its notes."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def sent(self, *, documents: int, jobs: int) -> None:
        pass

    def indexing(self, *, done: int, total: int, failed: int) -> None:
        pass

    def note(self, text: str) -> None:
        self.notes.append(text)

    def close(self) -> None:
        pass


def documents(path: Path, count: int) -> Path:
    return write_jsonl(
        path, [{"external_id": f"doc-{i}", "text": f"Document {i}."} for i in range(count)]
    )


def uploader(
    api: FakeApi,
    tmp_path: Path,
    *,
    batch: int,
    wait: bool = True,
    retry_for_s: float = 120,
    handler: Callable[[httpx.Request], httpx.Response] | None = None,
) -> tuple[Uploader, Client, list[str]]:
    said: list[str] = []
    client = Client(
        URL,
        api_key="k",
        retry=Retry(retry_for_s=retry_for_s),
        on_retry=said.append,
        transport=httpx.MockTransport(handler or api.handler),
        sleep=api.clock.sleep,
        clock=lambda: api.clock.now,
    )
    options = IngestOptions(
        batch_documents=batch, batch_bytes=8 * 1024 * 1024, poll_interval_s=1.0, wait=wait
    )
    run = Uploader(
        client,
        state_dir=tmp_path / "state",
        api_key="k",
        progress=Lines(),
        options=options,
        clock=lambda: api.clock.now,
        sleep=api.clock.sleep,
    )
    return run, client, said


def test_waiting_for_many_jobs_stays_within_the_rate_limit(tmp_path: Path) -> None:
    # The reported run: 6000 documents in 12 jobs of 500 under 600 requests a minute,
    # the jobs indexing for a minute or more. Reading each job every second is 12
    # requests a second (720 a minute): refused with 429 after 50 s.
    clock = Clock()
    api = FakeApi(clock, job_s=90.0)
    run, client, said = uploader(api, tmp_path, batch=500)
    report = run.run([documents(tmp_path / "c6.jsonl", 6000)])

    assert api.refused == 0, said
    assert (report.sent, len(report.jobs), len(report.waited)) == (6000, 12, 12)
    assert report.summary()[-1] == (
        "jobs: 12 finished: 6000 indexed, 0 unchanged, 0 failed, 0 cancelled"
    )
    uploads = [t for t, what in api.seen if what.startswith("POST")]
    reads = [t for t, what in api.seen if what.startswith("GET")]
    waited = clock.now - uploads[-1]
    # One request per second on average (poll_interval_s), the last round aside (no
    # pause follows it): the two lists, then a read of each job that finished in it (a
    # job's own read names its failed documents).
    assert len(reads) <= waited + 2 + 12, (len(reads), waited)
    per_minute = max(sum(1 for u in reads if t <= u < t + 60) for t in reads)
    assert per_minute <= 60 + 12
    assert client.requests == len(api.seen) + api.refused


def test_while_nothing_finishes_the_polls_grow_sparser(tmp_path: Path) -> None:
    clock = Clock()
    api = FakeApi(clock, job_s=300.0, stalled=True)
    run, _, _ = uploader(api, tmp_path, batch=10)
    report = run.run([documents(tmp_path / "docs.jsonl", 1)])
    assert report.summary()[-1].startswith("jobs: 1 finished: 1 indexed")
    pauses = clock.pauses
    assert pauses[:3] == [1.0, 1.5, 2.25]
    assert max(pauses) == 10.0, "at most SLOWEST_POLL times poll_interval_s"
    assert len(pauses) < 300 / 5, "far fewer reads than one a second"


def test_a_429_while_waiting_is_waited_out_saying_so(tmp_path: Path) -> None:
    clock = Clock()
    api = FakeApi(clock, job_s=10.0, limit=3)  # the upload and two reads a minute
    run, _, said = uploader(api, tmp_path, batch=10)
    report = run.run([documents(tmp_path / "docs.jsonl", 5)])
    assert report.summary()[-1] == (
        "jobs: 1 finished: 5 indexed, 0 unchanged, 0 failed, 0 cancelled"
    )
    assert api.refused > 0
    assert said[0].startswith(f"rate limited: GET {URL}/v1/jobs/")
    assert said[0].endswith(
        "429 rate_limited: rate limit of 3/minute per key reached; retry after 2 s; "
        "trying again in 2 s, for 120 s more"
    )


def test_a_429_past_the_retry_bound_stops_the_run_without_asking_for_wait_again(
    tmp_path: Path,
) -> None:
    clock = Clock()
    api = FakeApi(clock, job_s=10.0, limit=2)
    run, _, _ = uploader(api, tmp_path, batch=2, retry_for_s=0)
    with pytest.raises(ApiError) as caught:
        run.run([documents(tmp_path / "docs.jsonl", 6)])
    assert caught.value.status == 429
    assert caught.value.detail.endswith("(not waited for: 2 s more would pass --retry-for 0 s)")
    lines = run.report.summary()
    assert lines[0] == "documents: 6 read, 4 sent in 2 jobs, 0 already accepted"
    assert lines[1].startswith(
        "jobs not waited for to the end (run the same command again to resume waiting): "
    )
    assert not any("--wait" in line for line in lines)


def test_without_wait_the_summary_says_how_to_wait(tmp_path: Path) -> None:
    report = IngestReport(wait=False, jobs=[uuid.UUID(int=1)], sent=1, read=1)
    report.unfinished[uuid.UUID(int=1)] = None
    assert report.summary()[1] == (
        "jobs sent (not waited for; run again with --wait): 00000000-0000-0000-0000-000000000001"
    )


def recorded_documents(tmp_path: Path, source: Path) -> int:
    state = UploadState.open(
        tmp_path / "state", server=URL, api_key="k", root=source, restart=False
    )
    return len(state.documents)


@pytest.fixture
def interrupt_after_record(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Ctrl-C arrives just after the state file has recorded an accepted request (its
    line is written and synced), before anything else: the moment the reported run
    was interrupted (the state knew one job more than the summary)."""
    record_sent = UploadState.record_sent
    calls: list[int] = []

    def recorded_then_interrupted(self: UploadState, *args: Any, **kwargs: Any) -> None:
        record_sent(self, *args, **kwargs)
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(UploadState, "record_sent", recorded_then_interrupted)
    return calls


def test_ctrl_c_as_a_request_is_recorded_counts_it(
    tmp_path: Path, interrupt_after_record: list[int]
) -> None:
    api = FakeApi(Clock())
    run, _, _ = uploader(api, tmp_path, batch=4, wait=False)
    source = documents(tmp_path / "docs.jsonl", 12)
    with pytest.raises(KeyboardInterrupt):
        run.run([source])
    assert len(api.jobs) == 2
    assert recorded_documents(tmp_path, source) == 8
    assert run.report.summary()[0] == "documents: 9 read, 8 sent in 2 jobs, 0 already accepted"


def test_ctrl_c_while_the_answer_is_read_says_the_batch_may_be_accepted(
    tmp_path: Path,
) -> None:
    api = FakeApi(Clock())

    def answer_then_interrupt(request: httpx.Request) -> httpx.Response:
        response = api.handler(request)
        if len(api.jobs) == 2:  # the server accepted the second request
            raise KeyboardInterrupt
        return response

    run, _, _ = uploader(api, tmp_path, batch=4, wait=False, handler=answer_then_interrupt)
    source = documents(tmp_path / "docs.jsonl", 12)
    with pytest.raises(KeyboardInterrupt):
        run.run([source])
    assert len(api.jobs) == 2
    assert recorded_documents(tmp_path, source) == 4
    assert run.report.summary()[0] == (
        "documents: 9 read, 4 sent in 1 jobs (and maybe 4 more: the request interrupted "
        "before its answer may have been accepted), 0 already accepted"
    )
