"""Deleting a tenant (``TenantPurge``) on embedded parts: suspended first, then after the
grace period its jobs cancelled, its chunks, rows and keys gone, the hooks run; the other
tenant untouched; a failing hook is reported, not fatal."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import func, select

from hsearch.db.models import (
    ApiKey,
    Document,
    DocumentLink,
    IngestionJob,
    LexicalTermStats,
    LexicalVocabulary,
    SynonymSet,
    Tenant,
)
from hsearch.errors import TenantNotFoundError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.types import TenantStatus
from tests.unit.api.conftest import Api

DOCS = [
    {
        "external_id": f"d{i}",
        "text": f"document {i} about rivers",
        "links": [{"target": f"d{(i + 1) % 3}"}],
    }
    for i in range(3)
]


async def ingest(api: Api, key: str) -> None:
    resp = await api.client.post(
        "/v1/documents", json={"documents": DOCS}, headers={"Authorization": f"Bearer {key}"}
    )
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"


def rows(api: Api, tenant: str) -> dict[str, int]:
    with api.services.sessions() as session:
        return {
            model.__name__: int(
                session.scalar(
                    select(func.count()).select_from(model).where(model.tenant_id == tenant)
                )
                or 0
            )
            for model in (
                Document,
                DocumentLink,
                IngestionJob,
                ApiKey,
                LexicalTermStats,
                LexicalVocabulary,
                SynonymSet,
            )
        }


async def test_a_tenant_is_purged_and_the_other_untouched(api: Api) -> None:
    services = api.services
    victim = services.tenancy.create_tenant("Victim", tenant_id="victim", actor="test")
    await ingest(api, victim.key.key)
    await ingest(api, api.key)
    for key in (victim.key.key, api.key):
        resp = await api.client.put(
            "/v1/synonyms",
            json={"synonyms": [{"words": ["river", "stream"]}]},
            headers={"Authorization": f"Bearer {key}"},
        )
        assert resp.status_code == 200, resp.text
    assert all(rows(api, "victim").values()), "every kind of row is there to purge"
    other_before = (rows(api, "default"), services.store.count(tenant_id="default"))
    assert services.store.count(tenant_id="victim") > 0
    seen: dict[str, Any] = {}

    def grace(seconds: float) -> None:
        # During the grace period the tenant is suspended; a stale API process may
        # still submit a job for it: the purge must cancel and delete that too.
        seen["seconds"] = seconds
        [tenant] = [t for t in services.tenancy.list_tenants() if t.id == "victim"]
        seen["status"] = tenant.status
        with unit_of_work(services.sessions, queue=api.queue) as uow:
            JobService(uow, settings=services.settings.ingest).submit(
                tenant_id="victim", documents=[DocumentInput(external_id="late", text="late")]
            )

    purged: list[str] = []

    def broken(_tenant: str) -> None:
        raise RuntimeError("redis is down")

    services.tenant_purge_hooks.extend([purged.append, broken])
    report = services.tenant_purge().delete("victim", actor="test", grace_s=30, sleep=grace)
    assert seen == {"seconds": 30, "status": TenantStatus.SUSPENDED}
    assert report.jobs_cancelled == 1
    assert report.rows["documents"] == 3
    assert report.rows["tenants"] == 1
    assert purged == ["victim"]
    assert report.hooks_failed == (
        "test_a_tenant_is_purged_and_the_other_untouched.<locals>.broken",
    )
    assert rows(api, "victim") == dict.fromkeys(rows(api, "victim"), 0)
    assert services.store.count(tenant_id="victim") == 0
    with services.sessions() as session:
        assert session.get(Tenant, "victim") is None
    assert (rows(api, "default"), services.store.count(tenant_id="default")) == other_before
    resp = await api.client.post(
        "/v1/search",
        json={"query": "rivers"},
        headers={"Authorization": f"Bearer {victim.key.key}"},
    )
    assert (resp.status_code, resp.json()["error"]) == (401, "invalid_api_key")
    assert [e.action for e in services.tenancy.audit_log(tenant_id="victim")][:2] == [
        "tenant.delete",
        "tenant.suspend",
    ]


def test_an_unknown_tenant_is_refused_unless_forced(api: Api) -> None:
    purge = api.services.tenant_purge()
    with pytest.raises(TenantNotFoundError):
        purge.delete("nobody", actor="test")
    report = purge.delete("nobody", actor="test", force=True)
    assert report.rows["tenants"] == 0
