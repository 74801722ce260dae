"""The ingest endpoints over HTTP on embedded parts: the request owns the transaction,
sends the job only after its commit, and enforces the limits the settings name.

The app's lifespan is not run (no Milvus, no encoder): its dependencies are overridden
with a migrated SQLite database and an in-memory job queue, and the request's tenant
with the default one (authentication is tested in test_auth.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import ApiSettings, IngestSettings, Settings
from hsearch.db.models import IngestionJob, JobStatus
from hsearch.errors import BackendError, EncoderError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.models import DocumentInput, JobView
from hsearch.ingestion.queue import InMemoryJobQueue, JobQueue
from hsearch_api.deps import (
    SettingsDep,
    UnitOfWorkDep,
    get_job_queue,
    get_job_service,
    get_session_factory,
    get_settings_dep,
    get_tenant,
)
from hsearch_api.main import create_app

DOC = {"external_id": "fox", "title": "Fox", "text": "The quick brown fox."}

ClientFactory = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def settings_with(**ingest: Any) -> Settings:
    return Settings(_env_file=None, ingest=IngestSettings(**ingest))


@pytest.fixture
def api(sessions: sessionmaker[Session]) -> ClientFactory:
    @asynccontextmanager
    async def client(
        queue: JobQueue,
        *,
        settings: Settings | None = None,
        job_service: Callable[..., JobService] | None = None,
    ) -> AsyncIterator[httpx.AsyncClient]:
        settings = settings or settings_with()
        app = create_app(settings)
        app.dependency_overrides[get_settings_dep] = lambda: settings
        app.dependency_overrides[get_session_factory] = lambda: sessions
        app.dependency_overrides[get_job_queue] = lambda: queue
        app.dependency_overrides[get_tenant] = lambda: settings.api.default_tenant
        if job_service is not None:
            app.dependency_overrides[get_job_service] = job_service
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
            yield c

    return client


def jobs_in(sessions: sessionmaker[Session]) -> list[IngestionJob]:
    with sessions() as s:
        return list(s.scalars(select(IngestionJob)))


class CommitCheckingQueue(InMemoryJobQueue):
    """Notes, at each send, whether another connection can read the job yet."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        super().__init__()
        self._sessions = sessions
        self.visible_when_sent: list[bool] = []

    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        with self._sessions() as s:
            self.visible_when_sent.append(s.get(IngestionJob, job_id) is not None)
        super().enqueue_job(job_id, turn=turn)


class DeadBrokerQueue:
    def enqueue_job(self, job_id: uuid.UUID, *, turn: int) -> None:
        raise BackendError(f"could not enqueue ingest job {job_id}: connection refused")


class FailsAfterWriting(JobService):
    """Writes and queues the job, then fails: a request that errors after its writes."""

    def submit(
        self,
        *,
        tenant_id: str,
        documents: Sequence[DocumentInput],
        webhook_url: str | None = None,
        lines: Sequence[int] | None = None,
    ) -> JobView:
        super().submit(
            tenant_id=tenant_id, documents=documents, webhook_url=webhook_url, lines=lines
        )
        raise EncoderError("the request failed after writing the job")


def failing_job_service(uow: UnitOfWorkDep, settings: SettingsDep) -> JobService:
    return FailsAfterWriting(uow, settings=settings.ingest)


async def test_a_committed_request_sends_its_job_after_the_commit(
    api: ClientFactory, sessions: sessionmaker[Session]
) -> None:
    queue = CommitCheckingQueue(sessions)
    async with api(queue) as client:
        resp = await client.post("/v1/documents", json={"documents": [DOC]})
        assert resp.status_code == 202, resp.text
        job_id = uuid.UUID(resp.json()["job_id"])
        assert queue.sent == [job_id]
        assert queue.visible_when_sent == [True]
        read = await client.get(f"/v1/jobs/{job_id}")
    assert read.status_code == 200
    assert (read.json()["status"], read.json()["total"]) == ("queued", 1)


async def test_a_rolled_back_request_sends_nothing(
    api: ClientFactory, sessions: sessionmaker[Session]
) -> None:
    queue = InMemoryJobQueue()
    async with api(queue, job_service=failing_job_service) as client:
        resp = await client.post("/v1/documents", json={"documents": [DOC]})
    assert resp.status_code == 500
    assert resp.json()["error"] == "encoder_error"
    assert queue.sent == []
    assert jobs_in(sessions) == []


async def test_a_failed_send_is_a_503_and_fails_the_job(
    api: ClientFactory, sessions: sessionmaker[Session]
) -> None:
    async with api(DeadBrokerQueue()) as client:
        resp = await client.post("/v1/documents", json={"documents": [DOC]})
    assert resp.status_code == 503
    assert resp.json()["error"] == "backend_unavailable"
    assert "connection refused" in resp.json()["detail"]
    [job] = jobs_in(sessions)
    assert job.status is JobStatus.FAILED
    assert job.error is not None
    assert "connection refused" in job.error


TOO_MANY = [DOC, {**DOC, "external_id": "b"}, {**DOC, "external_id": "c"}]
TOO_LONG = [{**DOC, "text": "short"}, {**DOC, "external_id": "b", "text": "x" * 11}]
BLANK = [DOC, {**DOC, "external_id": "blank", "text": " \n\t\u3000 "}]


@pytest.mark.parametrize(
    ("limits", "documents", "status", "field"),
    [
        (
            {"max_documents_per_request": 2},
            TOO_MANY,
            413,
            "documents: at most 2 documents per request (ingest.max_documents_per_request)",
        ),
        (
            {"max_document_chars": 10},
            TOO_LONG,
            413,
            "documents[1].text: at most 10 characters (ingest.max_document_chars)",
        ),
        ({}, BLANK, 422, "documents[1].text: only white space (external_id 'blank')"),
    ],
)
async def test_the_limits_come_from_settings(
    api: ClientFactory,
    sessions: sessionmaker[Session],
    limits: dict[str, int],
    documents: list[dict[str, str]],
    status: int,
    field: str,
) -> None:
    queue = InMemoryJobQueue()
    async with api(queue, settings=settings_with(**limits)) as client:
        resp = await client.post("/v1/documents", json={"documents": documents})
        assert resp.status_code == status, resp.text
        assert resp.json()["error"] == ("payload_too_large" if status == 413 else "invalid_request")
        assert resp.json()["detail"].startswith(field)
        assert (queue.sent, jobs_in(sessions)) == ([], [])
        within = await client.post("/v1/documents", json={"documents": documents[:-1]})
    assert within.status_code == 202, within.text


def test_the_openapi_document_states_no_bound_the_settings_own() -> None:
    app = create_app(settings_with(max_documents_per_request=2, max_document_chars=10))
    schemas = app.openapi()["components"]["schemas"]
    documents = schemas["DocumentBatchCreate"]["properties"]["documents"]
    text = schemas["DocumentCreate"]["properties"]["text"]
    assert "maxItems" not in documents
    assert "maxLength" not in text
    assert "ingest.max_documents_per_request" in documents["description"]
    assert "ingest.max_document_chars" in text["description"]


async def test_documents_input_maps_every_field(
    api: ClientFactory, sessions: sessionmaker[Session]
) -> None:
    captured: list[DocumentInput] = []

    class Capturing(JobService):
        def submit(
            self,
            *,
            tenant_id: str,
            documents: Sequence[DocumentInput],
            webhook_url: str | None = None,
            lines: Sequence[int] | None = None,
        ) -> JobView:
            captured.extend(documents)
            return super().submit(
                tenant_id=tenant_id, documents=documents, webhook_url=webhook_url, lines=lines
            )

    def capturing(uow: UnitOfWorkDep, settings: SettingsDep) -> JobService:
        return Capturing(uow, settings=settings.ingest)

    body = {**DOC, "source": "wiki", "lang": "en", "tags": ["a"], "metadata": {"year": 1}}
    async with api(InMemoryJobQueue(), job_service=capturing) as client:
        resp = await client.post("/v1/documents", json={"documents": [body]})
    assert resp.status_code == 202, resp.text
    assert captured == [
        DocumentInput(
            external_id="fox",
            text="The quick brown fox.",
            title="Fox",
            source="wiki",
            lang="en",
            tags=("a",),
            metadata={"year": 1},
        )
    ]


async def test_a_body_over_the_limit_is_refused_before_it_is_read(
    api: ClientFactory, sessions: sessionmaker[Session]
) -> None:
    settings = Settings(_env_file=None, api=ApiSettings(max_request_bytes=2048))
    big = {"documents": [{**DOC, "text": "word " * 1000}]}  # about 5 kB of JSON
    queue = InMemoryJobQueue()
    async with api(queue, settings=settings) as client:
        resp = await client.post("/v1/documents", json=big)
        assert resp.status_code == 413, resp.text
        assert resp.json() == {
            "error": "payload_too_large",
            "detail": "request body: at most 2048 bytes (api.max_request_bytes), got "
            f"{len(resp.request.content)} bytes",
        }

        async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: chunked
            for _ in range(5):
                yield b" " * 1000

        streamed = await client.post(
            "/v1/documents", content=chunks(), headers={"content-type": "application/json"}
        )
        assert streamed.status_code == 413, streamed.text
        assert streamed.json()["detail"].endswith("got more than 2048 bytes")
        assert (queue.sent, jobs_in(sessions)) == ([], [])
        within = await client.post("/v1/documents", json={"documents": [DOC]})
    assert within.status_code == 202, within.text
