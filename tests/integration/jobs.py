"""Helpers for driving ingestion through the API."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

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
