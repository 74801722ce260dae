"""Tenant isolation, probed through the real app on Postgres, the Milvus Lite server and
a real worker: two tenants holding the same external ids and the same texts, and a
scoped search token of the first. Every probe of tenant A (with its key, then its
token) must see nothing of B, change nothing of B, and be refused where it names B.
Then a tenant is deleted with its data, and the other is untouched."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import redis
from asgi_lifespan import LifespanManager
from sqlalchemy import func, select, update
from typer.testing import CliRunner

from hsearch import runtime
from hsearch.cache.keys import cache_key
from hsearch.cli import app
from hsearch.config import EncoderSettings, get_settings
from hsearch.db.models import (
    ApiKey,
    Document,
    IngestionJob,
    LexicalCorpusStats,
    LexicalTermStats,
    Tenant,
)
from hsearch.embedding.protocol import Embedder
from hsearch.ingestion.ids import document_id
from hsearch.local.processes import Child
from hsearch.runtime import Services, build_services
from hsearch.tenancy.keys import load_server_key
from hsearch.tenancy.tokens import TokenLimits, encode_token, token_signing_key
from hsearch_api.main import create_app
from tests.integration.conftest import Stack
from tests.integration.jobs import wait_job

pytestmark = pytest.mark.integration

TEXTS = {
    "shared": "The quick brown fox jumps over the lazy dog.",
    "team": "A brown fox hunts at night in the forest.",
    "secret": "Brown foxes keep a secret den by the river.",
}
TAGS = {"shared": ["team-a"], "team": ["team-a"], "secret": ["team-x"]}


def documents(owner: str) -> list[dict[str, Any]]:
    """The same external ids and texts in both tenants, plus one of the owner's own."""
    docs = [
        {
            "external_id": name,
            "title": name,
            "text": text,
            "tags": TAGS[name],
            "source": f"src-{owner}",
            "metadata": {"owner": owner},
        }
        for name, text in TEXTS.items()
    ]
    docs.append(
        {
            "external_id": f"only-{owner}",
            "text": "A brown fox of one tenant only.",
            "tags": ["team-a"],
            "source": f"src-{owner}",
            "metadata": {"owner": owner},
        }
    )
    return docs


@dataclass
class Member:
    id: str
    key: str
    client: httpx.AsyncClient
    jobs: list[str]


@dataclass
class World:
    services: Services
    transport: httpx.ASGITransport
    a: Member
    b: Member

    def client(self, credential: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=self.transport,
            base_url="http://test",
            headers={"Authorization": f"Bearer {credential}"},
        )


async def _submit(client: httpx.AsyncClient, docs: list[dict[str, Any]]) -> str:
    resp = await client.post("/v1/documents", json={"documents": docs})
    assert resp.status_code == 202, resp.text
    job = await wait_job(client, resp.json()["job_id"])
    assert job["status"] == "succeeded", job
    return str(job["id"])


@pytest.fixture(scope="module")
async def world(stack: Stack, worker: Child) -> AsyncIterator[World]:
    services = build_services(stack.settings)
    app = create_app(stack.settings, services=services)
    try:
        async with LifespanManager(app, startup_timeout=120) as manager:
            transport = httpx.ASGITransport(app=manager.app)
            made = []
            async with contextlib.AsyncExitStack() as stack_:
                for owner in ("A", "B"):
                    tid = f"iso{owner.lower()}{uuid.uuid4().hex[:8]}"
                    created = services.tenancy.create_tenant(owner, tenant_id=tid, actor="test")
                    client = await stack_.enter_async_context(
                        httpx.AsyncClient(
                            transport=transport,
                            base_url="http://test",
                            headers={"Authorization": f"Bearer {created.key.key}"},
                        )
                    )
                    job = await _submit(client, documents(owner))
                    made.append(Member(tid, created.key.key, client, [job]))
                # A job of B that stays queued: B's documents the probes try to cancel.
                resp = await made[1].client.post(
                    "/v1/documents:delete", json={"filter": {"source": {"eq": "none"}}}
                )
                assert resp.status_code == 202
                made[1].jobs.append(resp.json()["job_id"])
                await wait_job(made[1].client, made[1].jobs[-1])
                yield World(services, transport, made[0], made[1])
    finally:
        await services.aclose()


async def snapshot(t: Member) -> dict[str, Any]:
    """What a tenant sees of itself: documents, jobs, a search with facets."""
    docs = (await t.client.get("/v1/documents")).json()
    jobs = (await t.client.get("/v1/jobs")).json()
    found = (
        await t.client.post(
            "/v1/search", json={"query": "brown fox", "top_k": 20, "facets": ["tags"]}
        )
    ).json()
    return {
        "documents": docs["documents"],
        "jobs": [(j["id"], j["status"], j["indexed"]) for j in jobs["jobs"]],
        "hits": sorted(h["chunk_id"] for h in found["hits"]),
        "total": found["total"],
        "facets": found["facets"],
    }


def owners(body: dict[str, Any]) -> set[str]:
    return {h["metadata"]["owner"] for h in body["hits"]}


async def probe_reads(
    client: httpx.AsyncClient, *, own: str, other: str, other_id: str, token: bool
) -> None:
    """Every read a caller of tenant ``own`` can make: nothing of ``other`` comes back."""
    for mode in ("hybrid", "semantic", "keyword"):
        resp = await client.post(
            "/v1/search",
            json={
                "query": "brown fox",
                "mode": mode,
                "top_k": 20,
                "facets": ["tags", "source", "metadata.owner"],
            },
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["hits"], mode
        assert owners(body) == {own}, mode
        facets = {f["field"]: {b["value"] for b in f["buckets"]} for f in body["facets"]}
        assert facets["metadata.owner"] == {own}
        assert facets["source"] == {f"src-{own}"}
        if token:
            assert facets["tags"] == {"team-a"}
            assert body["total"] <= 3
    # The other tenant's ids and external ids, named in filters, find nothing.
    for flt in (
        {"document_id": {"eq": str(document_id(other_id, f"only-{other}"))}},
        {"document_id": {"eq": str(document_id(other_id, "shared"))}},
        {"external_id": {"eq": f"only-{other}"}},
        {"source": {"eq": f"src-{other}"}},
        {"metadata.owner": {"eq": other}},
    ):
        resp = await client.post("/v1/search", json={"query": "brown fox", "filter": flt})
        assert resp.status_code == 200, resp.text
        assert resp.json()["hits"] == []
        assert resp.json()["total"] == 0
    # Documents: the shared external id is the caller's own; the other's is not found.
    shared = await client.get("/v1/documents/shared")
    assert shared.status_code == 200
    assert shared.json()["metadata"] == {"owner": own}
    missing = await client.get(f"/v1/documents/only-{other}")
    assert (missing.status_code, missing.json()["error"]) == (404, "document_not_found")
    listed = (await client.get("/v1/documents", params={"limit": 500})).json()["documents"]
    assert {d["metadata"]["owner"] for d in listed} == {own}
    if token:
        assert {d["external_id"] for d in listed} == {"shared", "team", f"only-{own}"}


async def probe_refusals(client: httpx.AsyncClient, *, other: str) -> None:
    """A tenant named in a body, a filter or a header is refused; bounds are enforced."""
    for body in (
        {"query": "fox", "filter": {"tenant_id": {"eq": other}}},
        {"query": "fox", "filter": {"or": [{"tenant_id": {"eq": other}}, {"lang": {"eq": ""}}]}},
        {"query": "fox", "facets": ["tenant_id"]},
        {"query": "fox", "tenant_id": other},
        {"query": "fox", "top_k": 10**6},
        {"query": "fox", "offset": 10**6},
        {"query": "fox", "offset": -1},
    ):
        resp = await client.post("/v1/search", json=body)
        assert resp.status_code == 422, (body, resp.text)
    resp = await client.post(
        "/v1/search", json={"query": "fox"}, headers={"X-Hsearch-Tenant": other}
    )
    assert (resp.status_code, resp.json()["error"]) == (403, "tenant_mismatch")


async def probe_writes(world: World, client: httpx.AsyncClient, *, token: bool) -> None:
    """Writes naming the other tenant's documents and jobs: not found (or, for a token,
    not allowed at all)."""
    other = world.b
    expected = (403, "insufficient_scope") if token else None
    calls: list[tuple[str, str, Any, tuple[int, str]]] = [
        ("PATCH", "/v1/documents/only-B", {"tags": ["stolen"]}, (404, "document_not_found")),
        ("DELETE", "/v1/documents/only-B", None, (404, "document_not_found")),
        ("GET", f"/v1/jobs/{other.jobs[0]}", None, (404, "job_not_found")),
        ("POST", f"/v1/jobs/{other.jobs[0]}/cancel", None, (404, "job_not_found")),
        ("POST", f"/v1/jobs/{other.jobs[-1]}/cancel", None, (404, "job_not_found")),
    ]
    for method, path, body, (status, code) in calls:
        resp = await client.request(method, path, json=body)
        got = (resp.status_code, resp.json()["error"])
        if expected is not None:
            assert got == expected, (method, path)
        else:
            assert got[0] == status, (method, path, resp.text)
            if code:
                assert got[1] == code
    jobs = await client.get("/v1/jobs")
    if token:
        assert jobs.status_code == 403
    else:
        assert {j["id"] for j in jobs.json()["jobs"]} == set(world.a.jobs)


async def test_nothing_of_another_tenant_leaks_or_changes(world: World) -> None:
    before = await snapshot(world.b)
    a, b = world.a, world.b
    await probe_reads(a.client, own="A", other="B", other_id=b.id, token=False)
    await probe_refusals(a.client, other=b.id)
    await probe_writes(world, a.client, token=False)

    minted = await a.client.post(
        "/v1/tokens", json={"filter": {"tags": {"contains": "team-a"}}, "max_top_k": 20}
    )
    assert minted.status_code == 201, minted.text
    async with world.client(minted.json()["token"]) as token_client:
        await probe_reads(token_client, own="A", other="B", other_id=b.id, token=True)
        await probe_refusals(token_client, other=b.id)
        await probe_writes(world, token_client, token=True)
        hidden = await token_client.get("/v1/documents/secret")
        assert hidden.status_code == 404, "outside the token's filter"
        over = await token_client.post("/v1/search", json={"query": "fox", "top_k": 21})
        assert over.status_code == 422

    assert await snapshot(b) == before
    assert (await b.client.get("/v1/documents/only-B")).json()["tags"] == ["team-a"]


async def test_expired_and_revoked_credentials_are_refused(world: World, stack: Stack) -> None:
    a = world.a
    made = await a.client.post("/v1/keys", json={"scopes": ["search"], "name": "probe"})
    assert made.status_code == 201
    key, key_id = made.json()["key"], made.json()["id"]
    async with world.client(key) as keyed:
        minted = await keyed.post("/v1/tokens", json={"filter": {"tags": {"contains": "team-a"}}})
        token = minted.json()["token"]
        async with world.client(token) as tokened:
            assert (await keyed.post("/v1/search", json={"query": "fox"})).status_code == 200
            assert (await tokened.post("/v1/search", json={"query": "fox"})).status_code == 200
            assert (await a.client.delete(f"/v1/keys/{key_id}")).status_code == 200
            for c in (keyed, tokened):
                resp = await c.post("/v1/search", json={"query": "fox"})
                assert (resp.status_code, resp.json()["error"]) == (401, "api_key_revoked")
                assert (await c.get("/v1/documents")).status_code == 401

    # A key past its expires_at (moved into the past before its first use).
    later = datetime.now(UTC) + timedelta(days=1)
    expiring = world.services.tenancy.create_key(
        a.id, scopes=["search"], expires_at=later, actor="test"
    )
    with world.services.sessions() as session, session.begin():
        session.execute(
            update(ApiKey)
            .where(ApiKey.id == expiring.view.id)
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    async with world.client(expiring.key) as c:
        resp = await c.post("/v1/search", json={"query": "fox"})
        assert (resp.status_code, resp.json()["error"]) == (401, "api_key_expired")

    # A genuine token past its exp (signed with the server's key), and one forged.
    server_key = load_server_key(stack.settings.auth, secret_file=stack.settings.auth_secret_file)
    now = datetime.now(UTC)
    [admin] = world.services.tenancy.list_keys(a.id)[:1]
    expired = encode_token(
        token_signing_key(server_key),
        key_id=admin.id,
        tenant_id=a.id,
        filter={"tags": {"contains": "team-a"}},
        limits=TokenLimits(),
        issued_at=now - timedelta(hours=2),
        expires_at=now - timedelta(hours=1),
    )
    forged = encode_token(
        b"x" * 32,
        key_id=admin.id,
        tenant_id=world.b.id,
        filter={"tags": {"contains": "team-a"}},
        limits=TokenLimits(),
        issued_at=now,
        expires_at=now + timedelta(hours=1),
    )
    for credential, code in ((expired, "token_expired"), (forged, "invalid_token")):
        async with world.client(credential) as c:
            resp = await c.post("/v1/search", json={"query": "fox"})
            assert (resp.status_code, resp.json()["error"]) == (401, code)


async def test_deleting_a_tenant_purges_its_rows_chunks_and_keys(world: World) -> None:
    services = world.services
    victim = f"del{uuid.uuid4().hex[:8]}"
    created = services.tenancy.create_tenant(f"Victim {victim}", tenant_id=victim, actor="test")
    async with world.client(created.key.key) as c:
        await _submit(c, documents("V"))
        await _submit(c, documents("V")[:1])
    bystander = await snapshot(world.b)
    assert services.store.count(tenant_id=victim) > 0
    purged: list[str] = []
    services.tenant_purge_hooks.append(purged.append)
    try:
        report = services.tenant_purge().delete(victim, actor="test")
    finally:
        services.tenant_purge_hooks.remove(purged.append)
    assert report.chunks > 0
    assert report.rows["documents"] == 4
    assert report.rows["tenants"] == 1
    assert purged == [victim]

    assert services.store.count(tenant_id=victim) == 0
    assert services.store.tenant_chunk_ids(tenant_id=victim) == set()
    with services.sessions() as session:
        for model in (Document, IngestionJob, ApiKey, LexicalTermStats, LexicalCorpusStats):
            n = session.scalar(
                select(func.count()).select_from(model).where(model.tenant_id == victim)
            )
            assert n == 0, model.__name__
        assert session.get(Tenant, victim) is None
    async with world.client(created.key.key) as c:
        resp = await c.post("/v1/search", json={"query": "fox"})
        assert resp.status_code in (401, 403)
        assert resp.json()["error"] in ("invalid_api_key", "tenant_suspended")
    assert await snapshot(world.b) == bystander
    assert services.store.count(tenant_id=world.b.id) > 0


async def test_hsearch_tenants_delete(
    world: World, stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = f"cli{uuid.uuid4().hex[:8]}"
    created = world.services.tenancy.create_tenant(
        f"Victim {victim}", tenant_id=victim, actor="test"
    )
    async with world.client(created.key.key) as c:
        await _submit(c, documents("V")[:2])
    assert world.services.store.count(tenant_id=victim) > 0

    def run(*args: str) -> Any:
        get_settings.cache_clear()
        try:
            return CliRunner().invoke(app, list(args), env=stack.env)
        finally:
            get_settings.cache_clear()

    # What the API processes cached on Redis (written here as the caches key it): the
    # victim's results and page snapshots go with it; nobody else's entries do.
    namespace = stack.settings.cache.namespace
    cached = {
        cache_key(namespace, "result", victim, "3.1", "digest"): True,
        cache_key(namespace, "snapshot", victim, "page"): True,
        cache_key(namespace, "result", world.b.id, "3.1", "digest"): False,
        cache_key(namespace, "result", f"{victim}x", "1.1", "digest"): False,
        cache_key(namespace, "embedding", "dense", "digest"): False,
    }
    redis_url = stack.settings.redis.url
    assert redis_url is not None
    client = redis.Redis.from_url(redis_url.get_secret_value())
    for key in cached:
        client.set(key, b"x", ex=300)

    # Neither command encodes: neither loads the encoder (seconds of torch and weights).
    def load(settings: EncoderSettings) -> Embedder:
        raise AssertionError(f"an operator command loaded the encoder {settings.kind}")

    monkeypatch.setattr(runtime, "create_embedder", load)
    checked = run("reconcile", "--tenant", victim)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["orphan_chunks"] == 0
    result = run("tenants", "delete", victim, "--yes", "--grace-s", "0")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["tenant_id"] == victim
    assert report["deleted"]["documents"] == 2
    assert report["deleted"]["chunks"] > 0
    assert world.services.store.count(tenant_id=victim) == 0
    assert {key: not client.exists(key) for key in cached} == cached
    client.close()
    missing = run("tenants", "delete", victim, "--yes", "--grace-s", "0")
    assert missing.exit_code == 2
    assert "tenant_not_found" in missing.output
