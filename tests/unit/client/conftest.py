"""The real app served over HTTP by uvicorn in a thread, on embedded parts (the fake
encoder, the in-memory store and job queue, SQLite), with a worker thread indexing the
queued jobs: what ``hsearch ingest``, ``jobs`` and ``documents`` talk to in these tests.

A small ASGI wrapper in front of the app records every upload (how many lines it held)
and can make uploads fail from a given one on, as an API that goes away mid-run does.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from typer.testing import CliRunner, Result

from hsearch.cli import app as cli_app
from hsearch.config import IngestSettings, Settings, get_settings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.llm.protocol import LLM
from hsearch.local.processes import free_port, wait_until
from hsearch.runtime import Services, build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch_api.main import create_app
from tests.unit.api.conftest import api_settings, default_tenant_key

POISON = "POISON"
"""A text holding this word fails to encode (:class:`PoisonedEmbedder`)."""


class PoisonedEmbedder(FakeEmbedder):
    """The fake encoder, failing any batch with a text that holds :data:`POISON`: the
    indexer then encodes document by document and fails only those."""

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        if any(POISON in t for t in texts):
            raise EncoderError("the encoder choked on poison")
        return super().embed_documents(texts, langs=langs)


@dataclass
class Gate:
    """In front of the app: records uploads; ``fail_after`` uploads later, answers 503."""

    app: ASGIApp
    uploads: list[int] = field(default_factory=list)
    """Lines per accepted upload, in order."""
    fail_after: int | None = None
    credentials: set[str] = field(default_factory=set)
    """Every ``Authorization`` header seen."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            self.credentials.add(headers.get(b"authorization", b"").decode())
        if scope["type"] != "http" or not scope["path"].endswith(":ndjson"):
            await self.app(scope, receive, send)
            return
        if self.fail_after is not None and len(self.uploads) >= self.fail_after:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"down"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        status: dict[str, int] = {}

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def watch(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, replay, watch)
        if status.get("code") == 202:
            self.uploads.append(sum(1 for line in body.split(b"\n") if line.strip()))


class Worker:
    """Indexes the jobs the API queues, in a thread, like a Celery worker would."""

    def __init__(self, services: Services, queue: InMemoryJobQueue) -> None:
        self._indexing = services.indexing()
        self._queue = queue
        self._stop = threading.Event()
        self.errors: list[Exception] = []
        self.running = threading.Event()
        self.running.set()
        self._thread = threading.Thread(target=self._run, name="test-worker", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.running.is_set() and self._queue.messages:
                message = self._queue.messages.pop(0)
                try:
                    self._indexing.process_job(message.job_id, turn=message.turn)
                except Exception as exc:  # a test reads them: a worker error fails it
                    self.errors.append(exc)
            else:
                self._stop.wait(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


@dataclass
class LiveApi:
    url: str
    services: Services
    gate: Gate
    worker: Worker
    key: str
    """A key of the default tenant with every scope: what the command line sends."""


@contextlib.contextmanager
def live_api(
    settings: Settings, *, port: int | None = None, llm: LLM | None = None
) -> Iterator[LiveApi]:
    """The app served on ``port`` (default: a free one) with a worker thread; answers
    written by ``llm`` (none by default)."""
    queue = InMemoryJobQueue()
    services = build_services(
        settings, store=InMemoryVectorStore(), embedder=PoisonedEmbedder(), queue=queue, llm=llm
    )
    gate = Gate(create_app(settings, services=services))
    port = port or free_port()
    config = uvicorn.Config(
        gate, host="127.0.0.1", port=port, lifespan="on", log_level="warning", ws="none"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-api", daemon=True)
    thread.start()
    worker: Worker | None = None
    try:
        wait_until(lambda: server.started, timeout=60, what="test API")
        worker = Worker(services, queue)
        key = default_tenant_key(services)
        url = f"http://127.0.0.1:{port}"
        yield LiveApi(url=url, services=services, gate=gate, worker=worker, key=key)
        assert worker.errors == []
    finally:
        if worker is not None:
            worker.stop()
        server.should_exit = True
        thread.join(30)
        services.close()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[LiveApi]:
    """The live API; documents over 2,000 characters are refused, every job flushes."""
    settings = api_settings(tmp_path / "server").model_copy(
        update={"ingest": IngestSettings(max_document_chars=2000, flush_min_interval_s=0)}
    )
    with live_api(settings) as served:
        yield served


@dataclass
class Cli:
    """``hsearch`` run in this process against ``api``, with the client's settings from
    the environment, as a user's shell gives them."""

    api: LiveApi
    env: dict[str, str]

    def __call__(self, *args: str, **env: str) -> Result:
        get_settings.cache_clear()
        try:
            return CliRunner().invoke(cli_app, list(args), env={**self.env, **env})
        finally:
            get_settings.cache_clear()


def cli_for(api: LiveApi, tmp_path: Path) -> Cli:
    """The command line for ``api``, with its key (``HSEARCH_API_KEY``): its data (and
        upload state) in ``tmp_path``, uploads of 4 documents, no retries (``ingest``'s
    ``retry_for_s`` 0 too), quick polls."""
    return Cli(
        api,
        env={
            "HSEARCH_DATA_DIR": str(tmp_path / "client"),
            "HSEARCH_CLIENT__URL": api.url,
            "HSEARCH_API_KEY": api.key,
            "HSEARCH_CLIENT__POLL_INTERVAL_S": "0.05",
            "HSEARCH_CLIENT__RETRIES": "0",
            "HSEARCH_CLIENT__RETRY_FOR_S": "0",
            "HSEARCH_CLIENT__BATCH_DOCUMENTS": "4",
        },
    )


@pytest.fixture
def cli(api: LiveApi, tmp_path: Path) -> Cli:
    return cli_for(api, tmp_path)
