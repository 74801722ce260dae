"""What an upload has had accepted, so that running it again sends only the rest.

One state file per input (a folder or a file given to ``hsearch ingest``), server and
credential (the key decides the tenant: another key is another index), under
``client.state_dir``. It records, per document, the hash of what was sent and the job
that holds it, and per job how it ended. A document counts as accepted when the same
content (same hash) is held by a job that is still running, or that finished without
failing it; anything else is sent again.

The file is an append-only log of JSON lines, written with one ``write`` per accepted
request and flushed to disk: an interruption at any point loses at most the line being
written (a torn last line is ignored). Opening it replays the log and writes it back
compacted. A lost, unreadable or ignored (``--restart``) state only costs time: every
document is sent again and the server skips the unchanged ones (same content hash), so
the outcome is the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hsearch.types import JobStatus

__all__ = ["JobOutcome", "UploadState", "state_path"]

VERSION = 1
_ACCEPTING = frozenset({JobStatus.SUCCEEDED, JobStatus.PARTIAL})


@dataclass(frozen=True, slots=True)
class JobOutcome:
    status: str
    """The job's final status, or ``missing`` when the API no longer knows it."""
    failed: frozenset[str] | None
    """The external ids it failed; ``None`` when not all of them are known."""

    def accepted(self, external_id: str) -> bool:
        return (
            self.status in _ACCEPTING and self.failed is not None and external_id not in self.failed
        )


@dataclass
class _Sent:
    digest: str
    job: uuid.UUID


def state_path(directory: Path, *, server: str, api_key: str | None, root: Path) -> Path:
    """The state file of ``root`` uploaded to ``server`` with ``api_key``; the key is
    hashed, never stored."""
    credential = hashlib.sha256(api_key.encode()).hexdigest() if api_key else "-"
    key = "\n".join([server.rstrip("/"), credential, str(root.resolve())])
    return directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.jsonl"


@dataclass
class UploadState:
    path: Path
    root: str
    server: str
    documents: dict[str, _Sent] = field(default_factory=dict)
    outcomes: dict[uuid.UUID, JobOutcome] = field(default_factory=dict)
    warning: str | None = None
    """Why an existing state file could not be used (it was started afresh)."""

    @classmethod
    def open(
        cls, directory: Path, *, server: str, api_key: str | None, root: Path, restart: bool
    ) -> UploadState:
        """The state of ``root`` (empty when there is none, or with ``restart``),
        compacted on disk."""
        path = state_path(directory, server=server, api_key=api_key, root=root)
        state = cls(path=path, root=str(root.resolve()), server=server)
        if path.exists() and not restart:
            try:
                state._replay(path.read_bytes().split(b"\n"))
            except (ValueError, KeyError, TypeError) as exc:
                state.documents.clear()
                state.outcomes.clear()
                state.warning = f"state file {path} unreadable ({exc}): every document is sent"
        directory.mkdir(parents=True, exist_ok=True)
        state._compact()
        return state

    # Queries.

    def holder(self, external_id: str, digest: str) -> uuid.UUID | None:
        """The job holding this very content of ``external_id`` if the server has
        accepted it (running, or finished without failing it); else ``None``."""
        sent = self.documents.get(external_id)
        if sent is None or sent.digest != digest:
            return None
        outcome = self.outcomes.get(sent.job)
        if outcome is None or outcome.accepted(external_id):
            return sent.job
        return None

    def unfinished_jobs(self) -> set[uuid.UUID]:
        """Jobs still holding documents whose outcome is not recorded."""
        return {s.job for s in self.documents.values() if s.job not in self.outcomes}

    def finished(self, job_id: uuid.UUID) -> bool:
        return job_id in self.outcomes

    # Commands: each appends one line.

    def record_sent(self, job_id: uuid.UUID, documents: Iterable[tuple[str, str]]) -> None:
        """``documents`` (external id, content hash) are held by the accepted ``job_id``."""
        sent = [[external_id, digest] for external_id, digest in documents]
        for external_id, digest in sent:
            self.documents[external_id] = _Sent(digest=digest, job=job_id)
        self._append({"job": str(job_id), "sent": sent})

    def record_outcome(
        self, job_id: uuid.UUID, *, status: str, failed: frozenset[str] | None
    ) -> None:
        if job_id in self.outcomes:
            return
        self.outcomes[job_id] = JobOutcome(status=status, failed=failed)
        listed = sorted(failed) if failed is not None else None
        self._append({"job": str(job_id), "status": status, "failed": listed})

    # The file.

    def _replay(self, lines: list[bytes]) -> None:
        records: list[dict[str, Any]] = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError:
                if i == len(lines) - 1 or not any(rest.strip() for rest in lines[i + 1 :]):
                    break  # the torn last line of an interrupted write
                raise
        header, *rest = records
        if header.get("version") != VERSION:
            msg = f"version {header.get('version')!r}, expected {VERSION}"
            raise ValueError(msg)
        for record in rest:
            job = uuid.UUID(record["job"])
            if "sent" in record:
                for external_id, digest in record["sent"]:
                    self.documents[str(external_id)] = _Sent(digest=str(digest), job=job)
            else:
                failed = record["failed"]
                self.outcomes[job] = JobOutcome(
                    status=str(record["status"]),
                    failed=None if failed is None else frozenset(map(str, failed)),
                )

    def _compact(self) -> None:
        """Rewrite the log with what it holds now: one line per job still holding
        documents, then the outcomes of those jobs."""
        by_job: dict[uuid.UUID, list[list[str]]] = {}
        for external_id, sent in self.documents.items():
            by_job.setdefault(sent.job, []).append([external_id, sent.digest])
        lines = [{"version": VERSION, "server": self.server, "root": self.root}]
        lines += [{"job": str(job), "sent": docs} for job, docs in by_job.items()]
        for job in by_job:
            if (outcome := self.outcomes.get(job)) is not None:
                failed = None if outcome.failed is None else sorted(outcome.failed)
                lines.append({"job": str(job), "status": outcome.status, "failed": failed})
        self.outcomes = {j: o for j, o in self.outcomes.items() if j in by_job}
        temporary = self.path.with_suffix(".tmp")
        with temporary.open("w", encoding="utf-8") as out:
            out.write("".join(_line(x) for x in lines))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, self.path)

    def _append(self, record: dict[str, Any]) -> None:
        with self.path.open("a", encoding="utf-8") as log:
            log.write(_line(record))
            log.flush()
            os.fsync(log.fileno())


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
