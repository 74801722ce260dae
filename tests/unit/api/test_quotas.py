"""Per-tenant quotas from settings: the documents a tenant may hold and the documents
it may submit per minute, checked at submission, 429 naming the quota."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from hsearch.config import QuotaSettings
from hsearch.db.models import IngestionJob
from tests.unit.api.conftest import Api, api_settings, serve


def docs(*ids: str) -> list[dict[str, Any]]:
    return [{"external_id": i, "text": f"text of {i}"} for i in ids]


async def submit(api: Api, ids: list[str], *, run: bool = True) -> Any:
    resp = await api.client.post("/v1/documents", json={"documents": docs(*ids)})
    if resp.status_code == 202 and run:
        job = uuid.UUID(resp.json()["job_id"])
        assert api.services.indexing().process_job(job) == "succeeded"
    return resp


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[Api]:
    settings = api_settings(tmp_path).model_copy(
        update={"quotas": QuotaSettings(max_documents=3, ingest_documents_per_minute=5)}
    )
    async with serve(settings) as served:
        yield served


@pytest.fixture
async def capped(tmp_path: Path) -> AsyncIterator[Api]:
    settings = api_settings(tmp_path).model_copy(update={"quotas": QuotaSettings(max_documents=3)})
    async with serve(settings) as served:
        yield served


async def test_the_document_quota_counts_indexed_and_pending_documents(capped: Api) -> None:
    limited = capped
    assert (await submit(limited, ["a", "b"])).status_code == 202
    assert (await submit(limited, ["c"], run=False)).status_code == 202  # pending
    resp = await submit(limited, ["d"])
    assert resp.status_code == 429
    assert resp.json()["error"] == "quota_exceeded"
    assert "quotas.max_documents" in resp.json()["detail"]
    assert "retry-after" not in resp.headers
    # A new version of a held document is no new document.
    assert (await submit(limited, ["a", "c"], run=False)).status_code == 202
    # Deleting makes room.
    assert (await limited.client.delete("/v1/documents/b")).status_code == 200
    assert (await submit(limited, ["d"], run=False)).status_code == 202


async def test_the_ingest_rate_is_a_sliding_minute_with_retry_after(limited: Api) -> None:
    assert (await submit(limited, ["a", "b"], run=False)).status_code == 202
    assert (await submit(limited, ["a", "b", "c"], run=False)).status_code == 202
    resp = await submit(limited, ["a"], run=False)
    assert resp.status_code == 429
    assert resp.json()["error"] == "quota_exceeded"
    assert "quotas.ingest_documents_per_minute" in resp.json()["detail"]
    assert 55 <= int(resp.headers["retry-after"]) <= 60
    # Once the first submission has left the window there is room again.
    with limited.services.sessions() as session, session.begin():
        session.execute(
            update(IngestionJob).values(created_at=IngestionJob.created_at - timedelta(seconds=61))
        )
    assert (await submit(limited, ["a"], run=False)).status_code == 202


async def test_a_batch_larger_than_the_rate_is_refused_without_retry_after(limited: Api) -> None:
    resp = await submit(limited, ["a", "b", "c", "d", "e", "f"], run=False)
    assert (resp.status_code, resp.json()["error"]) == (429, "quota_exceeded")
    assert "smaller batches" in resp.json()["detail"]
    assert "retry-after" not in resp.headers


async def test_quotas_are_per_tenant(limited: Api) -> None:
    assert (await submit(limited, ["a", "b", "c"])).status_code == 202
    tenancy = limited.services.tenancy
    other = tenancy.create_tenant("Other", tenant_id="other", actor="test").key.key
    resp = await limited.client.post(
        "/v1/documents",
        json={"documents": docs("a", "b", "c")},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert resp.status_code == 202, resp.text


async def test_no_quota_by_default(api: Api) -> None:
    for i in range(3):
        assert (await submit(api, [f"x{i}-{j}" for j in range(10)], run=False)).status_code == 202
