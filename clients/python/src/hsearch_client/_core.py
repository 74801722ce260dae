"""What the sync and the async client share: requests as values, answers read into
bodies or errors, the retry decisions, and the server-sent events of an answer's
stream. No I/O here: each client sends, sleeps and reads in its own way."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, ValidationError

from hsearch_client.errors import (
    UNAVAILABLE_STATUSES,
    ApiError,
    ConnectionFailedError,
    FieldError,
    ResponseFormatError,
    ServiceUnavailableError,
    TooManyRequestsError,
    error_for,
)
from hsearch_client.models import (
    AnswerEvent,
    CitationEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    ProgressEvent,
    RetrievalEvent,
)

RATE_LIMITED = 429
JSON = "application/json"
NDJSON = "application/x-ndjson"
SSE = "text/event-stream"
_RETRY_AFTER_DETAIL = re.compile(r"retry after (\d+(?:\.\d+)?) s")
"""How the API's 429 detail names the wait, for a proxy that drops the header."""
T = TypeVar("T")
MIN_PAUSE_S = 0.5
"""The shortest wait before another try: ``Retry-After: 0`` must not make a busy loop."""


@dataclass(frozen=True, slots=True)
class Retry:
    """When a request is tried again, and for how long.

    A connection that fails, a 502/503/504 and a 429 may pass another time; any other
    error is raised at once. Between tries the client waits what the answer's
    ``Retry-After`` asks (a 429 that names no wait is a quota no wait lifts: raised at
    once), else doubling pauses from 0.5 s up to ``max_pause_s``. It tries at most
    ``retries`` times more, or, with ``retry_for_s``, for as long as that many seconds
    since the first failure (an API restarting takes longer than a few tries); a
    ``Retry-After`` longer than ``max_retry_after_s`` (a daily quota) is not waited for
    without ``retry_for_s``.
    """

    retries: int = 3
    retry_for_s: float | None = None
    max_pause_s: float = 10.0
    max_retry_after_s: float = 60.0

    def backoff(self, tries: int) -> float:
        return min(self.max_pause_s, MIN_PAUSE_S * 2.0 ** (tries - 1))


@dataclass(frozen=True, slots=True)
class Request:
    """One request, as both clients send it."""

    method: str
    path: str
    params: Mapping[str, str | int | Sequence[str]] | None = None
    """A sequence is the parameter repeated (``?type=a&type=b``)."""
    body: bytes | None = None
    content_type: str | None = None
    accept: str | None = None

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": self.content_type} if self.content_type else {}
        if self.accept:
            headers["Accept"] = self.accept
        return headers

    def where(self, base_url: str) -> str:
        return f"{self.method} {base_url}{self.path}"


def json_request(method: str, path: str, body: Mapping[str, Any]) -> Request:
    encoded = json.dumps(body, default=model_json).encode()
    return Request(method, path, body=encoded, content_type=JSON)


def model_json(value: object) -> Any:
    """What ``json`` does not encode itself, within a request's body: a model
    (:class:`~hsearch_client.models.DocumentInput`, :class:`~hsearch_client.models.Link`,
    ...) as the API reads it, the fields left ``None`` not sent so that the server's
    defaults apply; any other mapping as a dict."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return dict(value)
    msg = f"{type(value).__name__} is not JSON serializable"
    raise TypeError(msg)


@dataclass(frozen=True, slots=True)
class Failure:
    """A try that may pass another time."""

    last: str
    """What was heard: said when waiting, and when giving up."""
    error: ApiError | None = None
    """The error answer, raised when the retries end (``None``: no answer at all)."""
    asked: float | None = None
    """The wait the answer asked for (``Retry-After``), in seconds."""


@dataclass(slots=True)
class Attempts:
    """The retries of one request: how many tries, since when it fails."""

    retry: Retry
    where: str
    clock: Callable[[], float]
    tries: int = 0
    first_failure: float | None = None
    said: list[str] = field(default_factory=list)

    def pause(self, failure: Failure) -> tuple[float, str]:
        """The wait before the next try and what to say of it; raises the failure's
        error (or :class:`ConnectionFailedError`) when the bound is reached."""
        if self.retry.retry_for_s is None:
            pause, until = self._counted(failure), ""
        else:
            now = self.clock()
            self.first_failure = now if self.first_failure is None else self.first_failure
            pause, left = self._timed(failure, now - self.first_failure)
            until = f", for {left:.0f} s more"
        limited = failure.error is not None and failure.error.status == RATE_LIMITED
        what = "rate limited" if limited else "waiting for the API"
        again = f"trying again in {round(pause, 1):g} s{until}"
        return pause, f"{what}: {self.where}: {failure.last}; {again}"

    def _counted(self, failure: Failure) -> float:
        retry = self.retry
        pause = retry.backoff(self.tries) if failure.asked is None else failure.asked
        if failure.asked is not None and pause > retry.max_retry_after_s:
            raise _gave_up(failure, f"over {retry.max_retry_after_s:g} s")
        if self.tries > retry.retries:
            if _limited(failure):
                raise _gave_up(failure, f"{self.tries} tries, client.retries {retry.retries}")
            raise _unavailable(failure, f"{self.where}: no answer after {self.tries} tries")
        return pause

    def _timed(self, failure: Failure, waited: float) -> tuple[float, float]:
        retry_for_s = self.retry.retry_for_s or 0.0
        left = retry_for_s - waited
        if failure.asked is not None:
            if failure.asked > left:
                bound = f"{failure.asked:g} s more would pass --retry-for {retry_for_s:g} s"
                if _limited(failure):
                    raise _gave_up(failure, bound)
                raise _unavailable(failure, f"{self.where}: no answer after {self.tries} tries")
            return failure.asked, left
        if _limited(failure):  # a 429 always names its wait, else it was raised at once
            return self.retry.backoff(self.tries), left
        if left <= 0:
            head = f"{self.where}: no answer after {self.tries} tries"
            raise _unavailable(failure, head, f"; gave up after {waited:.0f} s (--retry-for)")
        return min(self.retry.backoff(self.tries), left), left


def _limited(failure: Failure) -> bool:
    return isinstance(failure.error, TooManyRequestsError)


def _gave_up(failure: Failure, bound: str) -> ApiError:
    """The 429 (or 503) that ends the waits, saying which bound ended them."""
    error = failure.error
    assert error is not None  # only answers that named a wait get here
    detail = f"{error.detail} (not waited for: {bound})"
    return type(error)(
        error.status, error.code, detail, errors=error.errors, retry_after=error.retry_after
    )


def _unavailable(failure: Failure, head: str, tail: str = "") -> Exception:
    """No usable answer: the last error answer (a 502/503/504, as
    :class:`ServiceUnavailableError`) or no answer at all."""
    message = f"{head} ({failure.last}){tail}"
    error = failure.error
    if error is None:
        return ConnectionFailedError(message)
    return type(error)(
        error.status,
        error.code,
        error.detail,
        errors=error.errors,
        retry_after=error.retry_after,
        message=message,
    )


def transport_failure(exc: httpx.TransportError) -> Failure:
    return Failure(f"{type(exc).__name__}: {exc or 'no answer'}")


def read_answer(resp: httpx.Response) -> Any | Failure:
    """The body of a successful answer (JSON; ``None`` when empty), a :class:`Failure`
    for what may pass another time, else raises the answer's :class:`ApiError`."""
    status = resp.status_code
    if not resp.is_error:
        if not resp.content:
            return None
        try:
            return resp.json()
        except ValueError as exc:
            msg = f"{resp.request.method} {resp.request.url}: {status} with a body not JSON"
            raise ResponseFormatError(msg) from exc
    error = error_of(resp)
    if status in UNAVAILABLE_STATUSES:
        return Failure(f"{status}: {error.detail}", error=error, asked=error.retry_after)
    if status == RATE_LIMITED and error.retry_after is not None:
        return Failure(
            f"{status} {error.code}: {error.detail}", error=error, asked=error.retry_after
        )
    raise error


def error_of(resp: httpx.Response) -> ApiError:
    """The error an answer's body describes (``http_error`` when it is not the API's)."""
    code, detail = "http_error", resp.text[:500] or resp.reason_phrase
    errors: tuple[FieldError, ...] = ()
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        code = str(body.get("error", code))
        detail = str(body.get("detail", ""))
        errors = tuple(
            FieldError(
                field=str(e.get("field", "")),
                message=str(e.get("message", "")),
                line=e.get("line") if isinstance(e.get("line"), int) else None,
            )
            for e in body.get("errors") or ()
            if isinstance(e, dict)
        )
    elif body is not None:
        detail = str(body)[:500]
    status = resp.status_code
    waits = status == RATE_LIMITED or status in UNAVAILABLE_STATUSES
    retry_after = retry_after_of(resp, detail) if waits else None
    cls = error_for(status, code)
    if status in UNAVAILABLE_STATUSES and not issubclass(cls, ServiceUnavailableError):
        cls = ServiceUnavailableError
    return cls(status, code, detail, errors=errors, retry_after=retry_after)


def retry_after_of(resp: httpx.Response, detail: str) -> float | None:
    """The seconds an answer asks to wait: its ``Retry-After`` (seconds or an HTTP
    date), else for a 429 the ``retry after N s`` of its detail; ``None`` when it names
    none."""
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
    if (
        seconds is None
        and resp.status_code == RATE_LIMITED
        and (found := _RETRY_AFTER_DETAIL.search(detail))
    ):
        seconds = float(found.group(1))
    if seconds is None or not math.isfinite(seconds):
        return None
    return max(MIN_PAUSE_S, seconds)


def path_segment(segment: str) -> str:
    """A path segment as sent: every character escaped but ``/`` (external ids are
    paths, and the API's document routes take them whole)."""
    return quote(segment, safe="/")


def given(**fields: Any) -> dict[str, Any]:
    """The fields that were given (not ``None``): what is left out takes the server's
    default."""
    return {k: v for k, v in fields.items() if v is not None}


class EventReader:
    """The events of a ``text/event-stream`` body, fed line by line (``data`` is JSON)."""

    def __init__(self) -> None:
        self._event = "message"
        self._data: list[str] = []

    def feed(self, line: str) -> tuple[str, Any] | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (a keep-alive)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def close(self) -> tuple[str, Any] | None:
        return self._dispatch()

    def _dispatch(self) -> tuple[str, Any] | None:
        event, data = self._event, self._data
        self._event, self._data = "message", []
        if not data:
            return None
        return event, json.loads("\n".join(data))

    def events(self, lines: Iterable[str]) -> Iterator[tuple[str, Any]]:
        for line in lines:
            if (found := self.feed(line)) is not None:
                yield found
        if (found := self.close()) is not None:
            yield found


_EVENTS: dict[str, Callable[[Any], AnswerEvent]] = {
    "progress": ProgressEvent.model_validate,
    "retrieval": RetrievalEvent.model_validate,
    "delta": DeltaEvent.model_validate,
    "citation": CitationEvent.model_validate,
    "error": ErrorEvent.model_validate,
    "done": lambda data: DoneEvent.model_validate({"answer": data}),
}


def answer_event(name: str, data: Any) -> AnswerEvent | None:
    """The typed event of an answer's stream; ``None`` for an event this version does
    not know (the API may add some)."""
    read = _EVENTS.get(name)
    if read is None:
        return None
    try:
        return read(data)
    except ValidationError as exc:
        msg = f"the answer's {name!r} event is not what the API sends: {exc}"
        raise ResponseFormatError(msg) from exc


def parse(model: Callable[[Any], T], data: Any, where: str) -> T:
    """``data`` read as ``model``; an answer of another shape raises
    :class:`ResponseFormatError` naming the request."""
    try:
        return model(data)
    except ValidationError as exc:
        msg = f"{where}: the answer is not what the API sends: {exc}"
        raise ResponseFormatError(msg) from exc
