"""``hsearch ingest``: read documents, send what the server has not accepted yet, wait
for the jobs, and report.

Documents go as NDJSON uploads (``POST /v1/documents:ndjson``), one job per request of
at most ``client.batch_documents`` documents and ``client.batch_bytes`` bytes, one
request at a time. After each accepted request the state of its inputs records the job
and the documents' content hashes (:mod:`hsearch.client.state`), so an interrupted run,
run again, sends only what was not accepted and waits for the jobs still running.

A request the server refuses as invalid or too large, naming lines (``errors[].line``),
loses those documents (reported as refused) and is sent again without them; one refused
without lines (over the server's request or batch limit) is sent again in halves, down
to single documents. Documents a job fails are reported with the job's error for them.

Waiting reads the jobs at a bounded total rate, however many there are
(:meth:`Uploader._poll`): on average at most one request per ``client.poll_interval_s``,
and fewer while nothing finishes. Those reads are charged to the key's ``ingest`` rate
limit like the uploads. Ctrl-C once an upload's answer is read waits until its job is
recorded in the report and the state files alike.
"""

from __future__ import annotations

import hashlib
import json
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsearch.client.files import FILE_FORMATS, ReadFailure, SourceDocument, read_documents
from hsearch.client.progress import Progress
from hsearch.client.state import UploadState
from hsearch_client import ApiError, Client, Job, JobStatus
from hsearch_client.models import Encoding

__all__ = ["Failure", "IngestOptions", "IngestReport", "Uploader"]

SHOWN_ERRORS = 10
"""Errors listed in the summary; the rest are counted."""

STALL_NOTE_S = 60.0
"""Waiting this long without a document finishing prints a hint (no worker running?)."""

UNFINISHED = (JobStatus.QUEUED, JobStatus.RUNNING)
"""The statuses listed to poll many jobs at once, in this order: a job that moves from
one to the next between the two lists is in the second."""

SLOWEST_POLL = 10.0
"""While no document finishes, the pause between polls grows (x1.5 a round) up to this
many times ``poll_interval_s``."""


@dataclass(frozen=True, slots=True)
class IngestOptions:
    batch_documents: int
    batch_bytes: int
    poll_interval_s: float
    wait: bool = False
    source: str | None = None
    restart: bool = False


@dataclass(frozen=True, slots=True)
class Failure:
    name: str
    """The document's external id, or where it was read when it has none."""
    stage: str
    """``unreadable`` (here: nothing could be read as a document), ``refused`` (by the
    API: a document's fields, a missing or blank ``text`` among them) or ``failed`` (in
    a job)."""
    error: str


@dataclass
class IngestReport:
    read: int = 0
    sent: int = 0
    already_accepted: int = 0
    wait: bool = False
    """Whether the run was to wait for its jobs (``--wait``)."""
    jobs: list[uuid.UUID] = field(default_factory=list)
    """The jobs this run sent, in order."""
    unconfirmed: int = 0
    """Documents of the upload that Ctrl-C interrupted before its answer was read: the
    server may have accepted them (a job this run does not know)."""
    unfinished: dict[uuid.UUID, None] = field(default_factory=dict)
    """Jobs holding this run's documents that were not seen to finish (in order)."""
    waited: dict[uuid.UUID, Job] = field(default_factory=dict)
    """With ``--wait``: every job holding this run's documents, as it finished."""
    failures: list[Failure] = field(default_factory=list)
    unlisted_failures: int = 0
    """Failed in jobs, beyond the documents the API names per job (``hsearch jobs
    show``), or in a job that failed as a whole."""
    cancelled: int = 0
    """Not indexed because their job was cancelled."""
    job_errors: list[str] = field(default_factory=list)
    """Errors of jobs as a whole (a job that could not run)."""
    notes: list[str] = field(default_factory=list)
    passed_over: list[Path] = field(default_factory=list)
    """Files in the folders given that are of no type read in a folder."""
    read_with_warnings: list[tuple[str, str]] = field(default_factory=list)
    """Files read, and sent, whose library warned while reading them: (external id,
    what it said)."""

    @property
    def failed(self) -> int:
        return len(self.failures) + self.unlisted_failures + self.cancelled

    @property
    def exit_code(self) -> int:
        """1 when any document failed (unreadable, refused, failed or cancelled)."""
        return 1 if self.failed else 0

    def summary(self) -> list[str]:
        """The closing lines: counts, then the first errors by external id."""
        maybe = (
            f" (and maybe {self.unconfirmed} more: the request interrupted before its "
            "answer may have been accepted)"
            if self.unconfirmed
            else ""
        )
        lines = [
            f"documents: {self.read} read, {self.sent} sent in {len(self.jobs)} jobs{maybe}, "
            f"{self.already_accepted} already accepted"
        ]
        if self.passed_over:
            lines.append(_passed_over_line(self.passed_over))
        if self.read_with_warnings:
            noun = "file" if len(self.read_with_warnings) == 1 else "files"
            lines.append(f"read with a warning: {len(self.read_with_warnings)} {noun}")
            lines += [f"  {name}: {said}" for name, said in self.read_with_warnings[:SHOWN_ERRORS]]
            if len(self.read_with_warnings) > SHOWN_ERRORS:
                lines.append(f"  ... and {len(self.read_with_warnings) - SHOWN_ERRORS} more")
        stages = {s: sum(f.stage == s for f in self.failures) for s in _STAGES}
        if self.waited:
            indexed = sum(j.indexed for j in self.waited.values())
            unchanged = sum(j.skipped for j in self.waited.values())
            lines.append(
                f"jobs: {len(self.waited)} finished: {indexed} indexed, {unchanged} unchanged, "
                f"{stages['failed'] + self.unlisted_failures} failed, "
                f"{self.cancelled} cancelled"
            )
        if self.unfinished:
            left = list(self.unfinished)
            ids = " ".join(str(j) for j in left[:3]) + (" ..." if len(left) > 3 else "")
            if self.wait:  # stopped or interrupted while sending or waiting
                lines.append(
                    f"jobs not waited for to the end (run the same command again to resume "
                    f"waiting): {ids}"
                )
            else:
                lines.append(f"jobs sent (not waited for; run again with --wait): {ids}")
        if self.failed:
            counts = [f"{n} {s}" for s, n in stages.items() if n]
            if self.unlisted_failures:
                counts.append(f"{self.unlisted_failures} more failed in jobs")
            if self.cancelled:
                counts.append(f"{self.cancelled} cancelled")
            noun = "document" if self.failed == 1 else "documents"
            lines.append(f"FAILED: {self.failed} {noun} ({', '.join(counts)})")
            lines += [f"  {error}" for error in self.job_errors]
            lines += [f"  {f.name}: {f.stage}: {f.error}" for f in self.failures[:SHOWN_ERRORS]]
            if len(self.failures) > SHOWN_ERRORS:
                lines.append(f"  ... and {len(self.failures) - SHOWN_ERRORS} more")
        return lines


_STAGES = ("unreadable", "refused", "failed")


def _passed_over_line(files: list[Path]) -> str:
    """What the folders held that was not read: how many files of each type, the first
    few named, and what a folder is read for."""
    kinds = Counter(f.suffix.lower() or "(no extension)" for f in files)
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    named = ", ".join(str(f) for f in files[:3]) + (", ..." if len(files) > 3 else "")
    noun = "file" if len(files) == 1 else "files"
    read = ", ".join(sorted(FILE_FORMATS))
    return (
        f"passed over {len(files)} {noun} in the folders given ({counted}): {named}; "
        f"a folder is read for {read} files (give a .jsonl or .json file by itself)"
    )


@dataclass(frozen=True, slots=True)
class _Pending:
    source: SourceDocument
    line: bytes
    digest: str
    state: UploadState


class Uploader:
    """One ``hsearch ingest`` run against one API (see the module's docstring)."""

    def __init__(
        self,
        client: Client,
        *,
        state_dir: Path,
        api_key: str | None,
        progress: Progress,
        options: IngestOptions,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._state_dir = state_dir
        self._api_key = api_key
        self._progress = progress
        self._options = options
        self._clock = clock
        self._sleep = sleep
        self.report = IngestReport(wait=options.wait)
        self._batch: list[_Pending] = []
        self._batch_ids: set[str] = set()
        self._batch_bytes = 0
        self._in_flight: set[uuid.UUID] = set()
        self._states: dict[uuid.UUID, list[UploadState]] = {}

    def run(self, paths: Sequence[Path]) -> IngestReport:
        """Send what ``paths`` hold and the server has not accepted; with ``wait``,
        wait for every job holding them. Raises :class:`ClientError` when the API cannot
        be used (unreachable, or refusing the credential): what was accepted until then
        is recorded, so running again resumes."""
        paths = _each_once(paths)
        states = [self._open(path) for path in paths]
        for job_id, job in self._poll(set(self._states)).items():
            if job is None or job.finished:
                self._record(job_id, job)
        for path, state in zip(paths, states, strict=True):
            for item in read_documents(
                path, source=self._options.source, passed_over=self.report.passed_over
            ):
                if isinstance(item, ReadFailure):
                    name = item.external_id or item.origin
                    self.report.failures.append(Failure(name, "unreadable", item.error))
                    continue
                self.report.read += 1
                if item.warnings:
                    said = "; ".join(item.warnings)
                    self.report.read_with_warnings.append((item.external_id, said))
                self._consider(item, state)
        self._flush()
        if self._options.wait:
            self._wait(set(self.report.jobs) | self._in_flight)
        return self.report

    # Reading: what to send.

    def _open(self, path: Path) -> UploadState:
        state = UploadState.open(
            self._state_dir,
            server=self._client.base_url,
            api_key=self._api_key,
            root=path,
            restart=self._options.restart,
        )
        if state.warning:
            self._note(state.warning)
        for job_id in state.unfinished_jobs():  # read at once, after every input is open
            self._states.setdefault(job_id, []).append(state)
        return state

    def _consider(self, item: SourceDocument, state: UploadState) -> None:
        line = _ndjson_line(item.document)
        digest = hashlib.sha256(line).hexdigest()
        holder = state.holder(item.external_id, digest)
        if holder is not None:
            self.report.already_accepted += 1
            if not state.finished(holder):
                self._in_flight.add(holder)
                self.report.unfinished[holder] = None
            return
        pending = _Pending(source=item, line=line, digest=digest, state=state)
        full = len(self._batch) >= self._options.batch_documents
        over = self._batch_bytes + len(line) > self._options.batch_bytes
        # A repeated id goes in the next request: the later version is then newer.
        if self._batch and (full or over or item.external_id in self._batch_ids):
            self._flush()
        self._batch.append(pending)
        self._batch_ids.add(item.external_id)
        self._batch_bytes += len(line)

    # Sending.

    def _flush(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        self._batch_ids = set()
        if batch:
            self._send(batch)

    def _send(self, batch: list[_Pending]) -> None:
        try:
            self._upload(batch)
        except ApiError as exc:
            if exc.status not in (413, 422):
                raise
            self._refused(batch, exc)

    def _upload(self, batch: list[_Pending]) -> None:
        """Sends ``batch`` and records its job in the report and the state files. Ctrl-C
        while the request is under way leaves the batch counted as perhaps accepted
        (``unconfirmed``); once the answer is read, it waits until both records agree."""
        recorded = False
        try:
            accepted = self._client.upload_ndjson(b"".join(p.line for p in batch))
            with _interrupts_deferred():
                self._accepted(batch, accepted.job_id)
                recorded = True
        except KeyboardInterrupt:
            if not recorded:
                self.report.unconfirmed = len(batch)
            raise
        self._progress.sent(documents=self.report.sent, jobs=len(self.report.jobs))

    def _accepted(self, batch: list[_Pending], job_id: uuid.UUID) -> None:
        self.report.jobs.append(job_id)
        self.report.unfinished[job_id] = None
        self.report.sent += len(batch)
        for state in {id(p.state): p.state for p in batch}.values():
            self._states.setdefault(job_id, []).append(state)
            state.record_sent(
                job_id, [(p.source.external_id, p.digest) for p in batch if p.state is state]
            )

    def _refused(self, batch: list[_Pending], exc: ApiError) -> None:
        named: dict[int, list[str]] = {}
        for error in exc.errors:
            if error.line is not None and 1 <= error.line <= len(batch):
                named.setdefault(error.line, []).append(
                    f"{error.field}: {error.message}" if error.field else error.message
                )
        if named:
            for line, messages in named.items():
                failed = batch[line - 1].source
                self.report.failures.append(
                    Failure(failed.external_id, "refused", "; ".join(messages))
                )
            rest = [p for i, p in enumerate(batch, start=1) if i not in named]
            if rest:
                self._send(rest)
        elif len(batch) > 1:
            half = len(batch) // 2
            self._send(batch[:half])
            self._send(batch[half:])
        else:
            failed = batch[0].source
            self.report.failures.append(Failure(failed.external_id, "refused", exc.detail))

    # Waiting.

    def _wait(self, job_ids: set[uuid.UUID]) -> None:
        if not job_ids:
            return
        latest: dict[uuid.UUID, Job] = {}
        unfinished = set(job_ids)
        last_change = self._clock()
        last_done = -1
        noted_at: float | None = None
        stretch = 1.0
        while True:
            requests = self._client.requests
            for job_id, job in sorted(self._poll(unfinished).items()):
                if job is None:  # gone (purged): its documents were not all accepted
                    unfinished.discard(job_id)
                    self._record(job_id, None)
                    continue
                latest[job_id] = job
                if job.finished:
                    unfinished.discard(job_id)
                    self._record(job_id, job)
                    self.report.waited[job_id] = job
                    self._collect_failures(job)
            # Ingest jobs know their total from the start (only a delete job's is None).
            done = sum(j.processed if not j.finished else (j.total or 0) for j in latest.values())
            total = sum(j.total or 0 for j in latest.values())
            failed = sum(j.failed for j in latest.values())
            self._progress.indexing(done=done, total=total, failed=failed)
            if not unfinished:
                return
            now = self._clock()
            if done != last_done:
                last_done, last_change, stretch = done, now, 1.0
            else:
                stretch = min(SLOWEST_POLL, stretch * 1.5)
            # Said once when nothing has finished for a while, and again every while
            # as long as a worker reports a large document's encoding moving on.
            stalled = now - last_change
            encoding = _encoding([latest[j] for j in sorted(unfinished) if j in latest])
            if stalled >= STALL_NOTE_S and (
                noted_at is None or (encoding is not None and now - noted_at >= STALL_NOTE_S)
            ):
                self._note(_stall_note(stalled, encoding, [latest.get(j) for j in unfinished]))
                noted_at = now
            spent = max(1, self._client.requests - requests)
            self._sleep(self._options.poll_interval_s * spent * stretch)

    def _poll(self, job_ids: set[uuid.UUID]) -> dict[uuid.UUID, Job | None]:
        """Each of ``job_ids`` as the API has it now (``None``: it no longer knows it),
        in few requests: a read per job for one or two jobs; for more, the lists of the
        tenant's queued and running jobs (a request per 500), then a read of each job
        in neither (it has finished, and only a job's own read lists its failed
        documents)."""
        if len(job_ids) <= len(UNFINISHED):
            return {job_id: self._read_job(job_id) for job_id in job_ids}
        found: dict[uuid.UUID, Job | None] = {}
        for status in UNFINISHED:
            found |= {
                job.id: job for job in self._client.list_jobs(status=status) if job.id in job_ids
            }
        for job_id in job_ids - found.keys():
            found[job_id] = self._read_job(job_id)
        return found

    def _collect_failures(self, job: Job) -> None:
        for error in job.errors:
            self.report.failures.append(Failure(error.external_id, "failed", error.error))
        self.report.unlisted_failures += max(0, job.failed - len(job.errors))
        left = (job.total or 0) - job.processed  # never reached by a worker
        if job.status == JobStatus.CANCELLED:
            self.report.cancelled += left
        elif left:
            self.report.unlisted_failures += left
        if job.error:
            self.report.job_errors.append(f"job {job.id}: {job.status}: {job.error}")

    def _read_job(self, job_id: uuid.UUID) -> Job | None:
        try:
            return self._client.get_job(job_id)
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def _record(self, job_id: uuid.UUID, job: Job | None) -> None:
        self.report.unfinished.pop(job_id, None)
        status = "missing" if job is None else str(job.status)
        failed = None if job is None else job.failed_ids
        for state in self._states.get(job_id, ()):
            state.record_outcome(job_id, status=status, failed=failed)

    def _note(self, text: str) -> None:
        self.report.notes.append(text)
        self._progress.note(text)


@contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Ctrl-C (SIGINT) held back until the block has run, then raised: what the block
    records (the report, the state files) ends whole. Only the main thread receives
    signals; elsewhere the block simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: caught.append(signum))
    try:
        yield
    finally:  # None: a handler not set from Python, which cannot be set back
        signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)
    if caught:
        if callable(previous):
            previous(signal.SIGINT, None)
        elif previous != signal.SIG_IGN:
            raise KeyboardInterrupt


def _each_once(paths: Sequence[Path]) -> list[Path]:
    """``paths`` in order, without a second spelling of one already there."""
    seen: set[Path] = set()
    out: list[Path] = []
    for path in paths:
        if path.resolve() not in seen:
            seen.add(path.resolve())
            out.append(path)
    return out


def _ndjson_line(document: dict[str, Any]) -> bytes:
    """The document as one NDJSON line, in one spelling (sorted keys), so the same
    content always has the same hash."""
    text = json.dumps(document, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return (text + "\n").encode()


def _encoding(jobs: list[Job]) -> Encoding | None:
    """The large document a worker reports encoding for one of ``jobs``, if any."""
    return next((job.encoding for job in jobs if job.encoding is not None), None)


def _stall_note(stalled_s: float, encoding: Encoding | None, jobs: list[Job | None]) -> str:
    """What the command says when no document has finished for ``stalled_s``: what
    the worker is doing, when it reports it (a document of thousands of chunks takes
    minutes), else whether a worker has the jobs at all."""
    waiting = "(Ctrl-C stops waiting; the jobs go on, and running this again resumes waiting)"
    head = f"no document finished for {stalled_s:.0f} s"
    if encoding is not None:
        return (
            f"{head}: the worker is encoding document {encoding.document!r}: "
            f"{encoding.done:,}/{encoding.total:,} chunks {waiting}"
        )
    if any(job is not None and job.status == JobStatus.RUNNING for job in jobs):
        return f"{head}: a worker is running the job {waiting}"
    return f"{head}: is an ingest worker running? {waiting}"
