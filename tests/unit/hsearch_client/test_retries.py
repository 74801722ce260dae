"""The client over a scripted transport: retries with backoff for what may pass (the
waits ``Retry-After`` asks for, a bounded count or time), errors with the API's code,
detail and fields for what will not, escaped ids, paging; the async client alike."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest

from hsearch_client import (
    ApiError,
    ApiUnavailableError,
    AsyncClient,
    Client,
    ConnectionFailedError,
    FieldError,
    Retry,
)
from hsearch_client.errors import (
    DocumentNotFoundError,
    InvalidRequestError,
    NotFoundError,
    OverloadedError,
    QuotaExceededError,
    RateLimitedError,
    ServiceUnavailableError,
)
from tests.unit.client.clock import Clock

JOB_ID = uuid.UUID(int=7)
JOB = {"id": str(JOB_ID), "status": "queued", "total": 1, "indexed": 0, "skipped": 0, "failed": 0}


def client(
    handler: Callable[[httpx.Request], httpx.Response], *, retries: int = 3
) -> tuple[Client, list[float]]:
    pauses: list[float] = []
    api = Client(
        "http://api.test",
        api_key="k",
        retry=Retry(retries=retries),
        transport=httpx.MockTransport(handler),
        sleep=pauses.append,
    )
    return api, pauses


def test_an_upload_is_tried_again_after_503_and_connection_errors() -> None:
    answers = iter(["refuse", "503", "202"])

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["content-type"] == "application/x-ndjson"
        assert request.headers["authorization"] == "Bearer k"
        answer = next(answers)
        if answer == "refuse":
            raise httpx.ConnectError("refused", request=request)
        if answer == "503":
            return httpx.Response(503, json={"error": "backend_unavailable", "detail": "x"})
        return httpx.Response(202, json={"job_id": str(JOB_ID), "total": 1})

    api, pauses = client(handler)
    accepted = api.upload_ndjson(b'{"external_id": "a", "text": "A."}\n')
    assert (accepted.job_id, accepted.total) == (JOB_ID, 1)
    assert pauses == [0.5, 1.0]


def test_no_answer_after_the_retries_says_what_was_last_heard() -> None:
    api, pauses = client(lambda _: httpx.Response(502, text="bad gateway"), retries=2)
    with pytest.raises(ApiUnavailableError) as caught:
        api.get_job(JOB_ID)
    assert str(caught.value) == (
        f"GET http://api.test/v1/jobs/{JOB_ID}: no answer after 3 tries (502: bad gateway)"
    )
    assert pauses == [0.5, 1.0]
    # An answer, though not a usable one: an ApiError too, with its status.
    assert isinstance(caught.value, ServiceUnavailableError)
    assert (caught.value.status, caught.value.code) == (502, "http_error")


def test_no_connection_after_the_retries_is_a_connection_failure() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    api, pauses = client(refuse, retries=1)
    with pytest.raises(ConnectionFailedError) as caught:
        api.search("q")
    assert not isinstance(caught.value, ApiError)
    assert str(caught.value) == (
        "POST http://api.test/v1/search: no answer after 2 tries (ConnectError: refused)"
    )
    assert pauses == [0.5]


def test_a_503_is_tried_again_after_its_retry_after() -> None:
    overloaded = httpx.Response(
        503, headers={"Retry-After": "1"}, json={"error": "overloaded", "detail": "busy"}
    )
    answers = iter([overloaded, overloaded, httpx.Response(200, json=JOB)])
    api, pauses = client(lambda _: next(answers))
    assert api.get_job(JOB_ID).status == "queued"
    assert pauses == [1.0, 1.0], "the wait the API asked for, not the backoff"
    api, pauses = client(lambda _: overloaded, retries=1)
    with pytest.raises(OverloadedError) as caught:
        api.get_job(JOB_ID)
    assert (caught.value.status, caught.value.retry_after, pauses) == (503, 1.0, [1.0])


def test_with_retry_for_s_a_request_is_tried_for_that_long_saying_so() -> None:
    clock = Clock()
    said: list[str] = []
    down_until = 30.0  # an API restarting: refused, then 503, then up

    def handler(request: httpx.Request) -> httpx.Response:
        if clock.now < 10:
            raise httpx.ConnectError("refused", request=request)
        if clock.now < down_until:
            return httpx.Response(503, json={"error": "overloaded", "detail": "starting"})
        return httpx.Response(
            200,
            json={
                "id": str(JOB_ID),
                "status": "queued",
                "total": 1,
                "indexed": 0,
                "skipped": 0,
                "failed": 0,
            },
        )

    api = Client(
        "http://api.test",
        retry=Retry(retries=0, retry_for_s=120),  # the count is not what counts here
        on_retry=said.append,
        transport=httpx.MockTransport(handler),
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    assert api.get_job(JOB_ID).status == "queued"
    # Doubling pauses, at most MAX_PAUSE_S each, until the API answered.
    assert clock.pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert said[0] == (
        f"waiting for the API: GET http://api.test/v1/jobs/{JOB_ID}: ConnectError: refused; "
        "trying again in 0.5 s, for 120 s more"
    )
    assert said[-1].endswith("503: starting; trying again in 10 s, for 94 s more")


def test_a_pause_cut_short_by_retry_for_s_is_said_in_tenths() -> None:
    clock = Clock()
    said: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    api = Client(
        "http://api.test",
        retry=Retry(retries=0, retry_for_s=3.2371),
        on_retry=said.append,
        transport=httpx.MockTransport(refuse),
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    with pytest.raises(ApiUnavailableError):
        api.get_job(JOB_ID)
    assert clock.pauses[:3] == [0.5, 1.0, pytest.approx(1.7371)]  # the last one: what is left
    assert said[2].endswith("trying again in 1.7 s, for 2 s more")


def test_with_retry_for_s_it_gives_up_once_that_time_has_passed() -> None:
    clock = Clock()
    api = Client(
        "http://api.test",
        retry=Retry(retry_for_s=25),
        transport=httpx.MockTransport(lambda _: httpx.Response(503, text="down")),
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    with pytest.raises(ApiUnavailableError) as caught:
        api.get_job(JOB_ID)
    # The last pause is cut to what was left: it gives up at 25 s, not later.
    assert clock.pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 9.5]
    assert str(caught.value) == (
        f"GET http://api.test/v1/jobs/{JOB_ID}: no answer after 7 tries (503: down); "
        "gave up after 25 s (--retry-for)"
    )


def test_an_error_answer_carries_the_api_s_code_detail_and_fields() -> None:
    body = {
        "error": "invalid_request",
        "detail": "line 2: tags[0]: too short",
        "errors": [{"field": "tags[0]", "message": "too short", "line": 2}],
    }
    api, pauses = client(lambda _: httpx.Response(422, json=body))
    with pytest.raises(InvalidRequestError) as caught:
        api.upload_ndjson(b"{}\n{}\n")
    error = caught.value
    assert (error.status, error.code, error.detail) == (422, "invalid_request", body["detail"])
    assert error.errors == (FieldError(field="tags[0]", message="too short", line=2),)
    assert pauses == [], "a refusal is not tried again"


def test_external_ids_are_escaped_but_their_slashes() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.raw_path.decode())
        if request.method == "DELETE":
            return httpx.Response(200, json={"external_id": "x", "deleted_chunks": 1})
        return httpx.Response(200, json={"external_id": "x", "status": "indexed"})

    api, _ = client(handler)
    api.get_document("guide/a b?#%.md")
    api.delete_document("guide/a b?#%.md")
    assert seen == ["/v1/documents/guide/a%20b%3F%23%25.md"] * 2


def test_lists_follow_the_cursor_up_to_the_limit() -> None:
    pages = {None: (["a", "b"], "c1"), "c1": (["c", "d"], "c2"), "c2": (["e"], None)}
    asked: list[tuple[str | None, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        asked.append((cursor, request.url.params["limit"]))
        ids, following = pages[cursor]
        rows = [{"external_id": i, "status": "indexed"} for i in ids]
        return httpx.Response(200, json={"documents": rows, "next_cursor": following})

    api, _ = client(handler)
    assert [d.external_id for d in api.list_documents()] == ["a", "b", "c", "d", "e"]
    asked.clear()
    assert [d.external_id for d in api.list_documents(limit=3)] == ["a", "b", "c"]
    assert asked == [(None, "3"), ("c1", "1")]


def rate_limited(retry_after: str | None = "2", detail: str = "limit reached") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(429, headers=headers, json={"error": "rate_limited", "detail": detail})


def test_a_429_is_tried_again_after_its_retry_after_saying_so() -> None:
    answers = iter([rate_limited("3"), rate_limited("1"), httpx.Response(200, json=JOB)])
    said: list[str] = []
    pauses: list[float] = []
    api = Client(
        "http://api.test",
        on_retry=said.append,
        transport=httpx.MockTransport(lambda _: next(answers)),
        sleep=pauses.append,
    )
    assert api.get_job(JOB_ID).status == "queued"
    assert pauses == [3.0, 1.0], "the pauses the API asked for, not the backoff"
    assert said[0] == (
        f"rate limited: GET http://api.test/v1/jobs/{JOB_ID}: 429 rate_limited: limit "
        "reached; trying again in 3 s"
    )
    assert api.requests == 3


def test_a_429_without_the_header_waits_as_long_as_its_detail_says() -> None:
    # A proxy may drop the header; the API's detail names the wait too.
    detail = "rate limit of 600/minute ...; retry after 4 s"
    answers = iter([rate_limited(None, detail), httpx.Response(200, json=JOB)])
    api, pauses = client(lambda _: next(answers))
    api.get_job(JOB_ID)
    assert pauses == [4.0]


def test_a_429_that_names_no_wait_is_an_error_at_once() -> None:
    # A quota that no wait lifts (quota_exceeded without Retry-After).
    api, pauses = client(
        lambda _: httpx.Response(
            429, json={"error": "quota_exceeded", "detail": "at most 1000 documents"}
        )
    )
    with pytest.raises(QuotaExceededError) as caught:
        api.upload_ndjson(b"{}\n")
    assert (caught.value.status, caught.value.retry_after, pauses) == (429, None, [])


def test_a_429_is_waited_for_within_client_retries_then_raised() -> None:
    api, pauses = client(lambda _: rate_limited("2"), retries=2)
    with pytest.raises(RateLimitedError) as caught:
        api.get_job(JOB_ID)
    assert pauses == [2.0, 2.0]
    assert (caught.value.status, caught.value.code) == (429, "rate_limited")
    assert caught.value.detail == "limit reached (not waited for: 3 tries, client.retries 2)"


def test_a_429_asking_for_longer_than_a_minute_is_not_waited_for_without_retry_for() -> None:
    api, pauses = client(lambda _: rate_limited("3600"))
    with pytest.raises(ApiError) as caught:
        api.get_job(JOB_ID)
    assert pauses == []
    assert caught.value.detail == "limit reached (not waited for: over 60 s)"


def test_with_retry_for_s_a_429_is_waited_for_until_that_time_is_spent() -> None:
    clock = Clock()
    api = Client(
        "http://api.test",
        retry=Retry(retry_for_s=10),
        transport=httpx.MockTransport(lambda _: rate_limited("4")),
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    with pytest.raises(ApiError) as caught:
        api.get_job(JOB_ID)
    # 4 s twice; a third wait would end past the 10 s: not begun.
    assert clock.pauses == [4.0, 4.0]
    assert (
        caught.value.detail
        == "limit reached (not waited for: 4 s more would pass --retry-for 10 s)"
    )


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (404, "document_not_found", DocumentNotFoundError),
        (422, "invalid_filter", InvalidRequestError),
        (404, "a_code_of_a_later_version", NotFoundError),  # by its status
        (418, "teapot", ApiError),
    ],
)
def test_an_error_is_raised_as_the_class_of_its_code_else_of_its_status(
    status: int, code: str, raised: type[ApiError]
) -> None:
    api, _ = client(lambda _: httpx.Response(status, json={"error": code, "detail": "d"}))
    with pytest.raises(raised) as caught:
        api.get_document("x")
    assert (caught.value.status, caught.value.code, caught.value.detail) == (status, code, "d")


async def test_the_async_client_retries_alike() -> None:
    answers = iter(
        [rate_limited("3"), httpx.Response(503, text="down"), httpx.Response(200, json=JOB)]
    )
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    async with AsyncClient(
        "http://api.test",
        transport=httpx.MockTransport(lambda _: next(answers)),
        sleep=sleep,
    ) as api:
        job = await api.get_job(JOB_ID)
    assert (job.id, job.status, pauses) == (JOB_ID, "queued", [3.0, 1.0])
    assert api.requests == 3
