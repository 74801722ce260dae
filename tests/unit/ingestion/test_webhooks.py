"""Job webhooks on embedded parts (SQLite, the in-memory store, the fake encoder) and
an in-process HTTP transport standing for the receiver: signed per Standard Webhooks,
delivered once, retried with backoff, given up, never sent to private addresses, never
sent twice at once."""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker
from standardwebhooks import Webhook

from hsearch.config import IngestSettings, WebhookSettings
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.errors import InvalidRequestError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.ingestion.webhooks import EVENT_TYPE, WebhookSender
from hsearch.ingestion.worker.leases import JobSweeper
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import make_service

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
TENANT = "t1"
URL = "https://hooks.example.com/hsearch?token=abc"
PUBLIC = "93.184.216.34"


class Clock:
    def __init__(self) -> None:
        # Starts at the wall clock: receivers refuse signatures more than 5 min off.
        self.now = datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Receiver:
    """Answers each request with the next status of ``answers`` (the last repeats)."""

    def __init__(self, *answers: int, during: Callable[[], None] | None = None) -> None:
        self.answers = list(answers) or [204]
        self.requests: list[httpx.Request] = []
        self.during = during

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.during is not None:
            self.during()
        status = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return httpx.Response(status)


def settings(**changes: object) -> WebhookSettings:
    return WebhookSettings.model_validate({"secret": SECRET, **changes})


def sender(
    sessions: sessionmaker[Session],
    receiver: Receiver,
    clock: Clock,
    *,
    resolves_to: str = PUBLIC,
    **changes: object,
) -> WebhookSender:
    return WebhookSender(
        sessions,
        settings=settings(**changes),
        client=httpx.Client(transport=httpx.MockTransport(receiver)),
        resolve=lambda _host: [resolves_to],
        clock=clock,
    )


def submit(
    sessions: sessionmaker[Session],
    url: str | None = URL,
    *,
    webhooks: WebhookSettings | None = None,
) -> uuid.UUID:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        jobs = JobService(uow, settings=IngestSettings(), webhooks=webhooks or settings())
        documents = [DocumentInput(external_id="a", text="Rivers flow to the sea.")]
        return jobs.submit(tenant_id=TENANT, documents=documents, webhook_url=url).id


def finished_job(sessions: sessionmaker[Session], url: str = URL) -> uuid.UUID:
    job_id = submit(sessions, url)
    status = make_service(sessions, InMemoryVectorStore()).process_job(job_id)
    assert status is JobStatus.SUCCEEDED
    return job_id


def view(sessions: sessionmaker[Session], job_id: uuid.UUID) -> JobView:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        return JobService(uow, settings=IngestSettings()).get(job_id, tenant_id=TENANT)


def test_an_ended_job_is_delivered_once_signed_per_standard_webhooks(
    sessions: sessionmaker[Session],
) -> None:
    job_id = finished_job(sessions)
    receiver, clock = Receiver(200), Clock()
    webhooks = sender(sessions, receiver, clock)
    assert webhooks.deliver_due() == 1
    assert webhooks.deliver_due() == 0, "delivered: never sent again"

    (request,) = receiver.requests
    assert str(request.url) == URL
    assert request.headers["webhook-id"] == str(job_id)
    # Any Standard Webhooks implementation verifies it with the shared secret.
    event = Webhook(SECRET).verify(request.content, dict(request.headers))
    assert event["type"] == EVENT_TYPE
    assert event["data"]["job_id"] == str(job_id)
    assert (event["data"]["status"], event["data"]["indexed"]) == ("succeeded", 1)
    assert event["data"]["searchable_at"] is not None
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + base64.b64encode(b"x" * 32).decode()).verify(
            request.content, dict(request.headers)
        )

    state = view(sessions, job_id).webhook
    assert state is not None
    assert (state.attempts, state.error, state.next_attempt_at) == (1, None, None)
    assert state.delivered_at is not None


def test_a_failed_delivery_is_retried_with_backoff_until_delivered(
    sessions: sessionmaker[Session],
) -> None:
    job_id = finished_job(sessions)
    receiver, clock = Receiver(500, 503, 200), Clock()
    webhooks = sender(sessions, receiver, clock, backoff_s=30)

    assert webhooks.deliver_due() == 0
    state = view(sessions, job_id).webhook
    assert state is not None
    assert (state.attempts, state.error) == (1, "HTTP 500")
    assert state.next_attempt_at is not None
    assert state.next_attempt_at.replace(tzinfo=UTC) == clock.now + timedelta(seconds=30)

    clock.advance(29)
    assert webhooks.deliver_due() == 0
    assert len(receiver.requests) == 1, "not due before its backoff"
    clock.advance(1)
    assert webhooks.deliver_due() == 0  # 503; the wait doubles
    state = view(sessions, job_id).webhook
    assert state is not None
    assert state.next_attempt_at is not None
    assert state.next_attempt_at.replace(tzinfo=UTC) == clock.now + timedelta(seconds=60)
    clock.advance(60)
    assert webhooks.deliver_due() == 1
    state = view(sessions, job_id).webhook
    assert state is not None
    assert (state.attempts, state.error, len(receiver.requests)) == (3, None, 3)
    # Every attempt carries the same id: the receiver deduplicates retries by it.
    assert {r.headers["webhook-id"] for r in receiver.requests} == {str(job_id)}


def test_a_delivery_is_given_up_after_the_last_attempt(sessions: sessionmaker[Session]) -> None:
    job_id = finished_job(sessions)
    receiver, clock = Receiver(500), Clock()
    webhooks = sender(sessions, receiver, clock, max_attempts=2, backoff_s=1)
    webhooks.deliver_due()
    clock.advance(2)
    webhooks.deliver_due()
    clock.advance(3600)
    assert webhooks.deliver_due() == 0
    assert len(receiver.requests) == 2
    state = view(sessions, job_id).webhook
    assert state is not None
    assert state.error == "given up after 2 attempts: HTTP 500"
    assert (state.delivered_at, state.next_attempt_at) == (None, None)


def test_jobs_still_running_or_without_a_webhook_are_not_sent(
    sessions: sessionmaker[Session],
) -> None:
    submit(sessions)  # queued: not ended
    finished_job_without = submit(sessions, None)
    make_service(sessions, InMemoryVectorStore()).process_job(finished_job_without)
    receiver = Receiver(200)
    assert sender(sessions, receiver, Clock()).deliver_due() == 0
    assert receiver.requests == []


def test_a_cancelled_job_is_delivered_with_its_status(sessions: sessionmaker[Session]) -> None:
    job_id = submit(sessions)
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        JobService(uow, settings=IngestSettings()).cancel(job_id, tenant_id=TENANT)
    receiver = Receiver(200)
    assert sender(sessions, receiver, Clock()).deliver_due() == 1
    body = json.loads(receiver.requests[0].content)
    assert (body["data"]["status"], body["data"]["searchable_at"]) == ("cancelled", None)


def test_one_delivery_is_never_sent_by_two_senders_at_once(
    sessions: sessionmaker[Session],
) -> None:
    finished_job(sessions)
    clock = Clock()
    other = sender(sessions, Receiver(200), clock)
    seen_by_other: list[int] = []
    # While the first sender's request is in flight, a second sender looks for work.
    first = sender(
        sessions, Receiver(200, during=lambda: seen_by_other.append(other.deliver_due())), clock
    )
    assert first.deliver_due() == 1
    assert seen_by_other == [0]


def test_a_host_resolving_to_a_private_address_is_not_called(
    sessions: sessionmaker[Session],
) -> None:
    job_id = finished_job(sessions)
    receiver = Receiver(200)
    assert sender(sessions, receiver, Clock(), resolves_to="10.1.2.3").deliver_due() == 0
    assert receiver.requests == []
    state = view(sessions, job_id).webhook
    assert state is not None
    assert state.error is not None
    assert "non-public address (10.1.2.3)" in state.error

    # Allowed explicitly (a local receiver), it is sent.
    clock = Clock()
    clock.advance(3600)
    allowed = sender(sessions, receiver, clock, resolves_to="10.1.2.3", allow_private_networks=True)
    assert allowed.deliver_due() == 1


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("ftp://example.com/x", "http:// or https://"),
        ("/relative", "http:// or https://"),
        ("https://user:pw@example.com/", "credentials"),
        ("http://127.0.0.1:9000/hook", "not a public address"),
        ("http://[::1]/hook", "not a public address"),
        ("http://localhost/hook", "not a public address"),
        ("http://192.168.1.20/hook", "not a public address"),
    ],
)
def test_unusable_urls_are_refused_at_submission_naming_the_field(
    sessions: sessionmaker[Session], url: str, words: str
) -> None:
    with pytest.raises(InvalidRequestError, match=words) as refused:
        submit(sessions, url)
    assert refused.value.message.startswith("webhook_url:")
    with sessions() as s:
        assert s.query(IngestionJob).count() == 0, "nothing is written"


def test_a_server_without_a_secret_refuses_webhooks(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(InvalidRequestError, match="HSEARCH_WEBHOOKS__SECRET"):
        submit(sessions, URL, webhooks=WebhookSettings())


@pytest.mark.parametrize(
    "secret", ["whsec_not base64!", "whsec_" + base64.b64encode(b"short").decode()]
)
def test_an_unusable_secret_fails_when_settings_load(secret: str) -> None:
    with pytest.raises(ValidationError, match=r"webhooks\.secret"):
        WebhookSettings(secret=secret)


def test_the_end_of_a_job_wakes_the_sweeper_which_delivers_it(
    sessions: sessionmaker[Session],
) -> None:
    receiver = Receiver(200)
    delivered = threading.Event()
    receiver.during = delivered.set
    sweeper = JobSweeper(
        sessions,
        InMemoryJobQueue(),
        lease_s=60,
        webhooks=sender(sessions, receiver, Clock()),
    )
    stop = threading.Event()
    # An interval far beyond the test: only the wake can make it sweep again.
    thread = threading.Thread(target=sweeper.run, args=(stop,), kwargs={"interval_s": 3600})
    thread.start()
    try:
        job_id = submit(sessions)
        make_service(sessions, InMemoryVectorStore(), on_finished=sweeper.wake).process_job(job_id)
        assert delivered.wait(timeout=30), "the job's end woke the sweeper"
    finally:
        stop.set()
        sweeper.wake()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert receiver.requests[0].headers["webhook-id"] == str(job_id)


def test_a_delete_job_says_what_it_deleted(sessions: sessionmaker[Session]) -> None:
    store = InMemoryVectorStore()
    finished = submit(sessions, None)
    make_service(sessions, store).process_job(finished)
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        job = JobService(uow, settings=IngestSettings(), webhooks=settings()).submit_delete(
            tenant_id=TENANT, filter=None, everything=True, webhook_url=URL
        )
    make_service(sessions, store).process_job(job.id)
    receiver = Receiver(200)
    assert sender(sessions, receiver, Clock()).deliver_due() == 1
    data = json.loads(receiver.requests[0].content)["data"]
    assert (data["kind"], data["status"], data["deleted"], data["indexed"]) == (
        "delete",
        "succeeded",
        1,
        0,
    )
