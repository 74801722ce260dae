"""The API's endpoints as methods, over one ``httpx.Client``.

Errors here are the client's own, outside :mod:`hsearch.errors`: those are what the
service raises and the API answers with; these report what an answer said (its status,
code, detail and fields) or that no answer came.

    ClientError
    ├── ApiError              the API answered with an error (status, code, detail, errors);
    │                         a 429 only once its waits are used up
    └── ApiUnavailableError   no usable answer: connection failed, or 502/503/504, after retries
"""

from __future__ import annotations

import email.utils
import json
import math
import re
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
RATE_LIMITED = 429
MAX_PAUSE_S = 10.0
"""The longest pause between two tries of a request, but a 429's."""
MAX_RATE_LIMIT_PAUSE_S = 60.0
"""Without ``retry_for_s``, the longest ``Retry-After`` of a 429 that is waited out (a
per-day limit can say hours: a command that gives up says so instead of hanging)."""
MIN_RATE_LIMIT_PAUSE_S = 0.5
_RETRY_AFTER_DETAIL = re.compile(r"retry after (\d+(?:\.\d+)?) s")
"""How the API's 429 detail says it (``hsearch.ratelimit.limiter``), for a proxy that
drops the header."""
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
class JobEncoding:
    """A job's document being encoded: its external id, chunks encoded and in all."""

    document: str
    done: int
    total: int


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
    encoding: JobEncoding | None = None
    """The large document a worker is encoding for the job, and how far it has got."""

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
            encoding=None
            if not data.get("encoding")
            else JobEncoding(
                document=str(data["encoding"]["document"]),
                done=int(data["encoding"]["done"]),
                total=int(data["encoding"]["total"]),
            ),
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
    failure (an API restarting takes longer than a few tries). A 429 (the key's rate
    limit, or a quota that lifts in time) is tried again after the pause its
    ``Retry-After`` header asks for (else the one its detail names), within the same
    bound; a 429 that names no wait, or one the bound cannot hold, is raised as
    :class:`ApiError` at once.
    ``on_retry`` hears of each pause before it is taken (what failed, how long the
    pause is). Any other error status raises :class:`ApiError` at once.

    ``requests`` counts the HTTP requests made, tries included (``--wait`` paces its
    polling by it).
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
        self.requests = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # Answers.

    def answer_events(
        self,
        query: str,
        *,
        passages: int | None = None,
        messages: list[dict[str, str]] | None = None,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``POST /v1/answer`` streamed: its server-sent events as ``(event, data)``, in
        order (``retrieval``, ``delta``, ``citation``, ``error``, ``done``). A refused
        request or an API that cannot answer raises :class:`ApiError` before any event."""
        body: dict[str, Any] = {"query": query, "stream": True}
        if passages is not None:
            body["passages"] = passages
        if messages:
            body["messages"] = messages
        self.requests += 1
        try:
            with self._http.stream(
                "POST", "/v1/answer", json=body, headers={"Accept": "text/event-stream"}
            ) as resp:
                if resp.is_error:
                    resp.read()
                    code, detail, errors = _error_of(resp)
                    raise ApiError(resp.status_code, code, detail, errors=errors)
                yield from _server_sent_events(resp.iter_lines())
        except httpx.TransportError as exc:
            msg = f"{self.base_url}: {type(exc).__name__}: {exc or 'no answer'}"
            raise ApiUnavailableError(msg) from exc

    # Search.

    def search(
        self,
        query: str,
        *,
        top_k: int = 10,
        group_by_document: bool = True,
        **fields: Any,
    ) -> dict[str, Any]:
        """``POST /v1/search``: one page of hits, as the API answers it.

        One hit per document by default (``group_by_document``: each document by its
        best chunk, with ``matching_chunks``), which is what a results page shows; pass
        ``group_by_document=False`` for every matching chunk (passages for RAG, or
        highlighting in a long document). The API's own default is chunks
        (docs/search.md, Documents or chunks). Any other request field (``mode``,
        ``filter``, ``offset`` or ``cursor``, ``sort``, ``facets``, ...) is sent as
        given, by its API name."""
        body = {"query": query, "top_k": top_k, "group_by_document": group_by_document}
        return self._call("POST", "/v1/search", json_body={**body, **fields})

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

    def document(self, external_id: str, *, include_text: bool = False) -> dict[str, Any]:
        """One document's fields; with ``include_text``, also its full ``text`` as it
        was submitted."""
        params: dict[str, str | int] = {"include": "text"} if include_text else {}
        return self._call("GET", f"/v1/documents/{_path(external_id)}", params=params)

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
        json_body: dict[str, Any] | None = None,
        params: dict[str, str | int] | None = None,
        ndjson: bool = False,
    ) -> dict[str, Any]:
        headers = {"Content-Type": NDJSON} if ndjson else {}
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers = {"Content-Type": "application/json"}
        where = f"{method} {self.base_url}{path}"
        tries = 0
        first_failure: float | None = None
        while True:
            tries += 1
            answer = self._once(method, path, content=content, params=params, headers=headers)
            if not isinstance(answer, _Failure):
                return answer
            if self._retry_for_s is None:
                pause, until = self._counted_pause(where, tries, answer), ""
            else:
                now = self._clock()
                first_failure = now if first_failure is None else first_failure
                pause, left = self._timed_pause(
                    where, tries, answer, retry_for_s=self._retry_for_s, waited=now - first_failure
                )
                until = f", for {left:.0f} s more"
            if self._on_retry is not None:
                what = "waiting for the API" if answer.limited is None else "rate limited"
                again = f"trying again in {round(pause, 1):g} s{until}"
                self._on_retry(f"{what}: {where}: {answer.last}; {again}")
            self._sleep(pause)

    def _once(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None,
        params: dict[str, str | int] | None,
        headers: dict[str, str],
    ) -> dict[str, Any] | _Failure:
        """One try: the answer's body, or what failed when it may pass another time."""
        self.requests += 1
        try:
            resp = self._http.request(method, path, content=content, params=params, headers=headers)
        except httpx.TransportError as exc:
            return _Failure(f"{type(exc).__name__}: {exc or 'no answer'}")
        if resp.status_code not in RETRIED_STATUSES | {RATE_LIMITED}:
            if resp.is_error:
                code, detail, errors = _error_of(resp)
                raise ApiError(resp.status_code, code, detail, errors=errors)
            data: dict[str, Any] = resp.json()
            return data
        code, detail, errors = _error_of(resp)
        if resp.status_code != RATE_LIMITED:
            return _Failure(f"{resp.status_code}: {detail}")
        limited = ApiError(resp.status_code, code, detail, errors=errors)
        asked = _retry_after(resp, detail)
        if asked is None:  # a quota that no wait lifts
            raise limited
        return _Failure(f"{resp.status_code} {code}: {detail}", limited=limited, asked=asked)

    def _counted_pause(self, where: str, tries: int, failure: _Failure) -> float:
        """The pause before another try, within ``retries``; else raises."""
        pause = _backoff(tries) if failure.asked is None else failure.asked
        if failure.limited is not None:
            if pause > MAX_RATE_LIMIT_PAUSE_S:
                raise _gave_up(failure.limited, f"over {MAX_RATE_LIMIT_PAUSE_S:g} s")
            if tries > self._retries:
                raise _gave_up(failure.limited, f"{tries} tries, client.retries {self._retries}")
        elif tries > self._retries:
            raise ApiUnavailableError(f"{where}: no answer after {tries} tries ({failure.last})")
        return pause

    @staticmethod
    def _timed_pause(
        where: str, tries: int, failure: _Failure, *, retry_for_s: float, waited: float
    ) -> tuple[float, float]:
        """The pause before another try and the time left, within ``retry_for_s`` of the
        first failure; else raises."""
        left = retry_for_s - waited
        if failure.limited is not None:
            asked = failure.asked or _backoff(tries)
            if asked > left:
                bound = f"{asked:g} s more would pass --retry-for {retry_for_s:g} s"
                raise _gave_up(failure.limited, bound)
            return asked, left
        if left <= 0:
            msg = (
                f"{where}: no answer after {tries} tries ({failure.last}); gave up after "
                f"{waited:.0f} s (--retry-for)"
            )
            raise ApiUnavailableError(msg)
        return min(_backoff(tries), left), left


@dataclass(frozen=True, slots=True)
class _Failure:
    """A try that may pass another time."""

    last: str
    """What was heard (said when waiting, and when giving up)."""
    limited: ApiError | None = None
    """A 429: raised when the bound ends the waits."""
    asked: float | None = None
    """The 429's ``Retry-After``, in seconds."""


def _backoff(tries: int) -> float:
    return min(MAX_PAUSE_S, 0.5 * 2.0 ** (tries - 1))


def _path(segment: str) -> str:
    """A path segment as sent: every character escaped but ``/`` (external ids are
    paths, and the API's document routes take them whole)."""
    return quote(segment, safe="/")


def _gave_up(limited: ApiError, bound: str) -> ApiError:
    """``limited`` (a 429), saying that the retries' bound ends the wait."""
    detail = f"{limited.detail} (not waited for: {bound})"
    return ApiError(limited.status, limited.code, detail, errors=limited.errors)


def _retry_after(resp: httpx.Response, detail: str) -> float | None:
    """The seconds a 429 asks to wait: its ``Retry-After`` (seconds or an HTTP date),
    else the ``retry after N s`` of its detail; ``None`` when it names none."""
    header = resp.headers.get("Retry-After", "").strip()
    seconds: float | None = None
    if header:
        try:
            seconds = float(header)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(header)
            except (TypeError, ValueError):
                when = None
            if when is not None and when.tzinfo is not None:
                seconds = float(math.ceil(when.timestamp() - time.time()))
    if seconds is None and (found := _RETRY_AFTER_DETAIL.search(detail)):
        seconds = float(found.group(1))
    # At least a moment: "0" (or a date just past) must not make a busy loop.
    return None if seconds is None else max(MIN_RATE_LIMIT_PAUSE_S, seconds)


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


def _server_sent_events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(event, data)`` of each event of a ``text/event-stream`` body (``data`` JSON)."""
    event, data = "message", ""
    for line in lines:
        if not line:
            if data:
                yield event, json.loads(data)
            event, data = "message", ""
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
    if data:
        yield event, json.loads(data)
