"""A job's webhook, end to end: the API takes the URL, a real worker indexes the job and
calls a real HTTP receiver on loopback once the job has ended, signed per Standard
Webhooks with the server's secret."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from standardwebhooks import Webhook

from hsearch.local.processes import Child
from tests.integration.conftest import WEBHOOK_SECRET
from tests.integration.jobs import wait_job

pytestmark = pytest.mark.integration


class Received:
    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.arrived = threading.Event()


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            received.deliveries.append((dict(self.headers.items()), body))
            self.send_response(204)
            self.end_headers()
            received.arrived.set()

        def log_message(self, *_args: object) -> None:  # keep the test output clean
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hooks/hsearch", received
    finally:
        server.shutdown()
        server.server_close()


async def test_the_worker_calls_the_webhook_once_the_job_has_ended(
    client: httpx.AsyncClient, worker: Child, receiver: tuple[str, Received]
) -> None:
    url, received = receiver
    documents = [{"external_id": "hook-1", "text": "Webhooks tell clients a job ended."}]
    resp = await client.post("/v1/documents", json={"documents": documents, "webhook_url": url})
    assert resp.status_code == 202, resp.text
    job = await wait_job(client, resp.json()["job_id"])
    assert job["status"] == "succeeded"
    # The worker's sweeper is woken by the job's end: no sweep interval to wait for.
    assert received.arrived.wait(timeout=60), "the webhook arrived"

    (headers, body) = received.deliveries[0]
    event = Webhook(WEBHOOK_SECRET).verify(body, headers)
    assert event["data"]["job_id"] == job["id"]
    assert event["data"]["status"] == "succeeded"
    assert json.loads(body)["type"] == "job.finished"
    assert (event["data"]["kind"], event["data"]["deleted"]) == ("ingest", 0)

    # The job records the delivery (written right after the receiver answered).
    for _ in range(100):
        state = (await client.get(f"/v1/jobs/{job['id']}")).json()["webhook"]
        if state["delivered_at"] is not None:
            break
        await asyncio.sleep(0.1)
    assert state["attempts"] == 1
    assert state["delivered_at"] is not None
    assert len(received.deliveries) == 1
