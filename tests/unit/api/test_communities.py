"""The Level 1 index through the API (docs/lazy.md): concepts extracted at indexing,
the tenant's communities listed by ``GET /v1/communities`` and kept right at the next
data version after a delete, a reindex, a reconcile and a tenant purge; another
tenant's key sees none of them, a search token is refused, ``/v1/stats`` shows the
state."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from hsearch.db.models import Document
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.operations.reindex import ReindexService
from hsearch.runtime import build_chunker
from tests.unit.api.conftest import Api, ingest

VOLCANO = [
    "Lava and magma rise through the crater of the volcano.",
    "The volcano spread volcanic ash and lava over the crater.",
    "Magma chambers feed the volcano; lava cools into basalt near the crater.",
]
BAKING = [
    "Flour, butter and sugar make the dough before the oven.",
    "The baker kneads the dough with flour and puts it in the oven.",
    "Butter and sugar melt in the oven; the dough rises with yeast and flour.",
]


def docs(prefix: str, texts: list[str], **fields: Any) -> list[dict[str, Any]]:
    return [
        {"external_id": f"{prefix}{i}", "title": f"{prefix.title()} {i}", "text": t, **fields}
        for i, t in enumerate(texts)
    ]


async def communities(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    resp = await client.get("/v1/communities", params=params)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def concepts_of(listed: dict[str, Any]) -> set[str]:
    return {c for community in listed["communities"] for c in community["concepts"]}


def stored(api: Api, external_id: str) -> dict[str, Any] | None:
    tenant = api.services.settings.api.default_tenant
    with api.services.sessions() as session:
        return session.scalar(
            select(Document.concepts).where(Document.id == document_id(tenant, external_id))
        )


async def test_topics_become_communities_with_their_documents(api: Api) -> None:
    await ingest(api, docs("volcano", VOLCANO) + docs("baking", BAKING))
    value = stored(api, "volcano0")
    assert value is not None
    assert value["v"].startswith("1.")
    assert "lava" in value["chunks"][0]
    top = await communities(api.client, level=0)
    groups = [set(c["concepts"]) for c in top["communities"]]
    assert any({"lava", "volcano", "crater"} <= g for g in groups)
    assert any({"flour", "dough", "oven"} <= g for g in groups)
    assert not any({"lava", "flour"} <= g for g in groups)
    # A concept picks its community; a phrase finds the concepts made of its words.
    [found] = (await communities(api.client, concept="the hot lava", limit=1))["communities"]
    assert "lava" in found["concepts"]
    assert {d["external_id"] for d in found["documents"]} <= {"volcano0", "volcano1", "volcano2"}
    one = await api.client.get(f"/v1/communities/{found['id']}")
    assert one.status_code == 200, one.text
    chunks = one.json()["chunks"]
    assert chunks
    assert {c["external_id"][:7] for c in chunks} == {"volcano"}
    assert "lava" in chunks[0]["concepts"]
    missing = await api.client.get("/v1/communities/L0-000000000000")
    assert (missing.status_code, missing.json()["error"]) == (404, "community_not_found")
    assert (await communities(api.client, parent=found["id"]))["communities"] == []


async def test_a_delete_reindex_and_reconcile_keep_the_index_right(api: Api) -> None:
    await ingest(api, docs("volcano", VOLCANO) + docs("baking", BAKING))
    before = await communities(api.client)
    assert "flour" in concepts_of(before)
    for i in range(3):
        assert (await api.client.delete(f"/v1/documents/baking{i}")).status_code == 200
    after = await communities(api.client)
    assert after["version"] != before["version"]
    assert "flour" not in concepts_of(after)
    assert "lava" in concepts_of(after)

    # Drift: one row's concepts lost, another's of an older extractor, a third's wrong.
    tenant = api.services.settings.api.default_tenant
    with api.services.sessions.begin() as session:
        rows = {
            d.external_id: d
            for d in session.scalars(select(Document).where(Document.tenant_id == tenant))
        }
        rows["volcano0"].concepts = None
        rows["volcano1"].concepts = {"v": "0.64", "chunks": [["old"]]}
        current = rows["volcano2"].concepts
        assert current is not None
        rows["volcano2"].concepts = {**current, "chunks": [["bogus"]]}
    reconciler = api.services.reconciler()
    drift = reconciler.check(tenant)
    [concepts_drift] = [k for k in drift.kinds if k.kind == "concepts"]
    assert concepts_drift.figures() == {"documents_without_current_concepts": 2}
    repaired = reconciler.repair(drift)
    assert repaired.repair_job is None  # extracted again in place, nothing resubmitted
    assert "lava" in (stored(api, "volcano0") or {})["chunks"][0]
    assert all(k.clean for k in reconciler.check(tenant).kinds)

    # A reindex extracts every document's concepts again (the bogus ones too).
    service = ReindexService(
        session_factory=api.services.sessions,
        embedder=api.services.embedder,
        store=api.services.store,
        chunker=build_chunker(api.services.settings, api.services.embedder),
        derived=api.services.derived,
    )
    service.run()
    assert "bogus" not in (stored(api, "volcano2") or {})["chunks"][0]
    rebuilt = await communities(api.client)
    assert rebuilt["version"] != after["version"]
    assert "bogus" not in concepts_of(rebuilt)
    assert "lava" in concepts_of(rebuilt)


async def test_a_tenant_purge_leaves_nothing_of_it(api: Api) -> None:
    services = api.services
    victim = services.tenancy.create_tenant("Victim", tenant_id="victim", actor="test")
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {victim.key.key}"
        await ingest(api, docs("volcano", VOLCANO), client=client)
        assert "lava" in concepts_of(await communities(client))
    assert services.concepts is not None
    assert services.concepts.status("victim").state == "ready"
    services.tenant_purge().delete("victim", actor="test", grace_s=0, sleep=lambda _: None)
    assert services.concepts.status("victim").state == "none"
    with services.sessions() as session:
        assert session.scalars(select(Document).where(Document.tenant_id == "victim")).all() == []


async def test_another_tenant_sees_none_and_a_search_token_is_refused(api: Api) -> None:
    await ingest(api, docs("volcano", VOLCANO))
    other = api.services.tenancy.ensure_tenant("other", actor="test").id
    key = api.services.tenancy.create_key(other, scopes=["search"], actor="test").key
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        assert (await communities(client))["communities"] == []
        mine = (await communities(api.client))["communities"][0]["id"]
        resp = await client.get(f"/v1/communities/{mine}")
        assert (resp.status_code, resp.json()["error"]) == (404, "community_not_found")
    resp = await api.client.post("/v1/tokens", json={"filter": {"source": {"eq": "open"}}})
    assert resp.status_code == 201, resp.text
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {resp.json()['token']}"
        refused = await client.get("/v1/communities")
        assert refused.status_code == 403, refused.text


async def test_stats_show_the_level1_state_and_start_a_build(api: Api) -> None:
    await ingest(api, docs("volcano", VOLCANO) + docs("baking", BAKING))
    resp = await api.client.get("/v1/stats")
    assert resp.status_code == 200, resp.text
    [tenant] = resp.json()["tenants"]
    assert tenant["level1"]["state"] in ("building", "ready")
    concepts = api.services.concepts
    assert concepts is not None
    # The build /v1/stats started (waited for here) finishes by itself.
    await concepts.current(tenant["tenant"], timeout=30)
    level1 = (await api.client.get("/v1/stats")).json()["tenants"][0]["level1"]
    assert level1["state"] == "ready"
    assert level1["chunks"] == 6
    assert level1["concepts"] > 0
    assert level1["links"] > 0
    assert level1["communities"]["0"] >= 2
    assert level1["build_s"] is not None
    # A write moves the data version: the index held is stale, a new build starts.
    await ingest(api, docs("more", VOLCANO[:1]))
    level1 = (await api.client.get("/v1/stats")).json()["tenants"][0]["level1"]
    assert level1["state"] in ("building", "ready")
    newer = await concepts.current(tenant["tenant"], timeout=30)
    assert newer.chunk_count == 7
