"""Helpers for driving ingestion: through the API, or through the services directly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import httpx

from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import Services

TERMINAL = {"succeeded", "partial", "failed"}


async def wait_job(
    client: httpx.AsyncClient, job_id: str, *, timeout: float = 120
) -> dict[str, Any]:
    """Poll the job resource until it reaches a terminal status."""
    deadline = time.monotonic() + timeout
    while True:
        resp = await client.get(f"/v1/jobs/{job_id}")
        resp.raise_for_status()
        job: dict[str, Any] = resp.json()
        if job["status"] in TERMINAL:
            return job
        if time.monotonic() > deadline:
            msg = f"job {job_id} still {job['status']} after {timeout}s: {job}"
            raise AssertionError(msg)
        await asyncio.sleep(0.1)


async def ingest(client: httpx.AsyncClient, documents: list[dict[str, Any]]) -> dict[str, Any]:
    resp = await client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 202, resp.text
    return await wait_job(client, resp.json()["job_id"])


def index_documents(
    services: Services, tenants: Sequence[str], documents: Sequence[DocumentInput]
) -> None:
    """Submit ``documents`` as a job of each of ``tenants``, index the jobs with the
    worker's indexing service in this process, and seal what they wrote (flush)."""
    queue = InMemoryJobQueue()
    for tenant in tenants:
        with unit_of_work(services.sessions, queue=queue) as uow:
            JobService(uow, settings=services.settings.ingest).submit(
                tenant_id=tenant, documents=list(documents)
            )
    indexing = services.indexing()
    for job_id in queue.sent:
        indexing.process_job(job_id)
    services.store.flush()
