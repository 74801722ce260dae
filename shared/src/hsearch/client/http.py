"""The API's endpoints as methods, over one ``httpx.Client``.

Errors here are the client's own, outside :mod:`hsearch.errors`: those are what the
service raises and the API answers with; these report what an answer said (its status,
code, detail and fields) or that no answer came.

    ClientError
    ├── ApiError              the API answered with an error (status, code, detail, errors)
    └── ApiUnavailableError   no usable answer: connection failed, or 502/503/504, after retries
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import quote

import httpx

from hsearch.errors import FieldError
from hsearch.types import FINISHED_JOB_STATUSES, JobStatus

__all__ = [
    "FINISHED",
    "Accepted",
    "ApiClient",
    "ApiError",
    "ApiUnavailableError",
    "ClientError",
    "Job",
    "JobItemError",
]

NDJSON = "application/x-ndjson"
RETRIED_STATUSES = frozenset({502, 503, 504})
MAX_PAUSE_S = 10.0
"""The longest pause between two tries of a request."""
FINISHED = FINISHED_JOB_STATUSES
PAGE = 500
"""Rows per page when listing (the API's most)."""


class ClientError(Exception):
    """Root of the client's errors."""


class ApiError(ClientError):
    """The API answered with an error: its status, stable code, detail and, for an
    invalid request, the fields (with the upload line of each, when it names one)."""

    def __init__(
        self, status: int, code: str, detail: str, *, errors: tuple[FieldError, ...] = ()
    ) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors


class ApiUnavailableError(ClientError):
    """No usable answer after the retries: the API is down, unreachable or overloaded."""


@dataclass(frozen=True, slots=True)
class Accepted:
    job_id: uuid.UUID
    total: int


@dataclass(frozen=True, slots=True)
class JobItemError:
    external_id: str
    error: str


@dataclass(frozen=True, slots=True)
class Job:
    id: uuid.UUID
    status: JobStatus
    total: int | None
    """``None`` for a delete job not started yet (its documents are selected then)."""
    indexed: int
    skipped: int
    failed: int
    error: str | None
    errors: tuple[JobItemError, ...]
    """The first failed documents (the API lists up to 100; none in a list of jobs)."""
    raw: dict[str, Any]
    """The job as the API sent it, for display."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        return cls(
            id=uuid.UUID(data["id"]),
            status=JobStatus(data["status"]),
            total=None if data["total"] is None else int(data["total"]),
            indexed=int(data["indexed"]),
            skipped=int(data["skipped"]),
            failed=int(data["failed"]),
            error=data.get("error"),
            errors=tuple(
                JobItemError(external_id=e["external_id"], error=e["error"])
                for e in data.get("errors", ())
            ),
            raw=data,
        )

    @property
    def processed(self) -> int:
        return self.indexed + self.skipped + self.failed

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    @property
    def failed_ids(self) -> frozenset[str] | None:
        """The external ids of its failed documents, or ``None`` when the API listed
        only some of them (more than it lists)."""
        if len(self.errors) < self.failed:
            return None
        return frozenset(e.external_id for e in self.errors)


class ApiClient:
    """One connection to the API, with its credential.

    ``api_key`` is sent as ``Authorization: Bearer``; the API takes the tenant from
    it, never from a request. A connection error or a 502/503/504 is tried again with
    doubling pauses from 0.5 s (at most :data:`MAX_PAUSE_S`): up to ``retries`` times,
    or, with ``retry_for_s``, for as long as that many seconds since the request's first
    failure (an API restarting takes longer than a few tries). ``on_retry`` hears of
    each pause before it is taken (what failed, how long the pause is). Any other
    error status raises :class:`ApiError` at once.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 3,
        retry_for_s: float | None = None,
        on_retry: Callable[[str], None] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url, headers=headers, timeout=timeout_s, transport=transport
        )
        self._retries = retries
        self._retry_for_s = retry_for_s
        self._on_retry = on_retry
        self._sleep = sleep
        self._clock = clock
        self.base_url = base_url

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # Ingestion.

    def upload(self, body: bytes) -> Accepted:
        """``POST /v1/documents:ndjson``: ``body`` holds one JSON document per line."""
        data = self._call("POST", "/v1/documents:ndjson", content=body, ndjson=True)
        return Accepted(job_id=uuid.UUID(data["job_id"]), total=int(data["total"]))

    def job(self, job_id: uuid.UUID | str) -> Job:
        return Job.from_json(self._call("GET", f"/v1/jobs/{_path(str(job_id))}"))

    def cancel_job(self, job_id: uuid.UUID | str) -> Job:
        return Job.from_json(self._call("POST", f"/v1/jobs/{_path(str(job_id))}/cancel"))

    def jobs(self, *, status: str | None = None, limit: int | None = None) -> Iterator[Job]:
        """The tenant's jobs, newest first, page after page (at most ``limit``)."""
        params = {"status": status} if status else {}
        for row in self._pages("/v1/jobs", "jobs", params, limit):
            yield Job.from_json(row)

    # Documents.

    def document(self, external_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/documents/{_path(external_id)}")

    def delete_document(self, external_id: str) -> dict[str, Any]:
        return self._call("DELETE", f"/v1/documents/{_path(external_id)}")

    def documents(
        self, *, source: str | None = None, limit: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """The tenant's documents in external id order, page after page (at most
        ``limit``)."""
        params = {"source": source} if source is not None else {}
        yield from self._pages("/v1/documents", "documents", params, limit)

    # Transport.

    def _pages(
        self, path: str, key: str, params: dict[str, str], limit: int | None
    ) -> Iterator[dict[str, Any]]:
        cursor: str | None = None
        left = limit
        while left is None or left > 0:
            size = PAGE if left is None else min(left, PAGE)
            query: dict[str, str | int] = {**params, "limit": size}
            if cursor:
                query["cursor"] = cursor
            page = self._call("GET", path, params=query)
            rows: list[dict[str, Any]] = page[key][:size]
            yield from rows
            if left is not None:
                left -= len(rows)
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def _call(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: dict[str, str | int] | None = None,
        ndjson: bool = False,
    ) -> dict[str, Any]:
        headers = {"Content-Type": NDJSON} if ndjson else {}
        where = f"{method} {self.base_url}{path}"
        tries = 0
        first_failure: float | None = None
        while True:
            tries += 1
            try:
                resp = self._http.request(
                    method, path, content=content, params=params, headers=headers
                )
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc or 'no answer'}"
            else:
                if resp.status_code not in RETRIED_STATUSES:
                    if resp.is_error:
                        code, detail, errors = _error_of(resp)
                        raise ApiError(resp.status_code, code, detail, errors=errors)
                    data: dict[str, Any] = resp.json()
                    return data
                last = f"{resp.status_code}: {_error_of(resp)[1]}"
            pause = min(MAX_PAUSE_S, 0.5 * 2 ** (tries - 1))
            if self._retry_for_s is None:
                if tries > self._retries:
                    raise ApiUnavailableError(f"{where}: no answer after {tries} tries ({last})")
                until = ""
            else:
                now = self._clock()
                first_failure = now if first_failure is None else first_failure
                left = self._retry_for_s - (now - first_failure)
                if left <= 0:
                    msg = (
                        f"{where}: no answer after {tries} tries ({last}); gave up after "
                        f"{now - first_failure:.0f} s (--retry-for)"
                    )
                    raise ApiUnavailableError(msg)
                pause = min(pause, left)
                until = f", for {left:.0f} s more"
            if self._on_retry is not None:
                self._on_retry(
                    f"waiting for the API: {where}: {last}; trying again in {pause:g} s{until}"
                )
            self._sleep(pause)


def _path(segment: str) -> str:
    """A path segment as sent: every character escaped but ``/`` (external ids are
    paths, and the API's document routes take them whole)."""
    return quote(segment, safe="/")


def _error_of(resp: httpx.Response) -> tuple[str, str, tuple[FieldError, ...]]:
    try:
        body = resp.json()
    except ValueError:
        return "http_error", resp.text[:500] or resp.reason_phrase, ()
    if not isinstance(body, dict):
        return "http_error", str(body)[:500], ()
    errors = tuple(
        FieldError(
            field=str(e.get("field", "")), message=str(e.get("message", "")), line=e.get("line")
        )
        for e in body.get("errors", ())
        if isinstance(e, dict)
    )
    return str(body.get("error", "http_error")), str(body.get("detail", "")), errors
