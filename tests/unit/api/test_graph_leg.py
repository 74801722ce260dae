"""The graph leg through the API (embedded parts, the fake encoder): a document the
other legs miss comes back through a link from their best hit, explained by its path;
only the link types asked for are followed; another tenant's links, and documents the
filter excludes, never come back; a new link is followed at the next search; a graph
that is not ready by the deadline degrades the leg, not the search; bad parameters are
refused naming the field; ``include_linked`` lists each hit's linked pages."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hsearch.cache.generations import GenerationReader
from hsearch.config import GraphSettings, Settings
from hsearch.db.engine import SessionFactory, create_db_engine, create_session_factory
from hsearch.graph.csr import LinkGraph
from hsearch.graph.params import GraphParams
from hsearch.graph.source import GraphSource
from hsearch.graph.store import GraphStore
from hsearch.runtime import source_names
from tests.unit.api.conftest import Api, api_settings, ingest, migrated_database, serve

VOLCANO = "Volcanoes erupt lava and ash from magma chambers."
# Shares no word with the query: only a link leads to it.
ISLAND = "Hawaii sits over a hotspot in the Pacific plate."
OTHER = "Cheese is made from milk by curdling."


def doc(external_id: str, text: str, *links: Any, **fields: Any) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "title": external_id,
        "text": text,
        "links": [x if isinstance(x, dict) else {"target": x} for x in links],
        **fields,
    }


async def search(api: Api, query: str = "volcanoes lava", **body: Any) -> dict[str, Any]:
    request = {
        "query": query,
        "mode": "keyword",
        "weights": {"sparse": 0.7, "graph": 0.3},
        "top_k": 10,
        "group_by_document": True,
        **body,
    }
    resp = await api.client.post("/v1/search", json=request)
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


def found(result: dict[str, Any]) -> list[str]:
    return [h["external_id"] for h in result["hits"]]


async def test_a_linked_document_comes_back_explained_by_its_path(api: Api) -> None:
    await ingest(
        api, [doc("volcano", VOLCANO, "island"), doc("island", ISLAND), doc("milk", OTHER)]
    )
    without = await search(api, weights={"sparse": 1.0})
    assert found(without) == ["volcano"]

    result = await search(api)
    assert found(result) == ["volcano", "island"]
    assert result["degraded"] == []
    island = result["hits"][1]["explanation"]["legs"]
    assert island["sparse"]["rank"] is None
    assert island["graph"]["rank"] == 1
    assert island["graph"]["detail"] == {
        "hops": 1,
        "seed": "volcano",
        "path": ["volcano", "island"],
        "via": ["link"],
        "directions": ["out"],
    }
    # Back-links count the same (direction both by default), and not when only out-links
    # are followed.
    await ingest(api, [doc("volcano", VOLCANO), doc("island", ISLAND, "volcano")])
    assert found(await search(api)) == ["volcano", "island"]
    assert found(await search(api, graph={"direction": "out"})) == ["volcano"]
    assert found(await search(api, graph={"direction": "in"})) == ["volcano", "island"]


async def test_only_the_link_types_asked_for_are_followed(api: Api) -> None:
    await ingest(
        api,
        [
            doc("volcano", VOLCANO, {"target": "island", "type": "cites"}),
            doc("island", ISLAND),
        ],
    )
    assert found(await search(api, graph={"types": ["cites"]})) == ["volcano", "island"]
    assert found(await search(api, graph={"types": ["link"]})) == ["volcano"]


async def test_pagerank_scoring_reaches_the_linked_document(api: Api) -> None:
    await ingest(
        api, [doc("volcano", VOLCANO, "island"), doc("island", ISLAND), doc("milk", OTHER)]
    )
    result = await search(api, graph={"scoring": "pagerank"})
    assert found(result) == ["volcano", "island"]


async def test_bridge_scoring_lifts_the_linked_documents_the_query_found_too(api: Api) -> None:
    flow = "Lava flows cool into basalt."
    lamp = "A lava lamp: lava, lava and wax in a lamp."
    await ingest(
        api,
        [
            doc("volcano", VOLCANO, "island", "flow"),
            doc("island", ISLAND),
            doc("flow", flow),
            doc("lamp", lamp),
        ],
    )
    assert found(await search(api, weights={"sparse": 1.0})) == ["volcano", "lamp", "flow"]
    result = await search(api, graph={"scoring": "bridge", "seeds": 1})
    # The best hit's link to "flow" lifts it over "lamp" (by RRF, the test encoder's
    # fusion, over the volcano too); "island", linked as well but not found by the
    # query, is not brought in (proximity would bring it).
    assert found(result) == ["flow", "volcano", "lamp"]
    legs = result["hits"][0]["explanation"]["legs"]
    assert legs["graph"]["rank"] == 1
    assert legs["graph"]["detail"]["path"] == ["volcano", "flow"]
    assert "island" in found(await search(api, graph={"seeds": 1}))


async def test_another_tenants_links_are_never_followed(api: Api) -> None:
    other = api.services.tenancy.ensure_tenant("other", actor="test").id
    key = api.services.tenancy.create_key(other, scopes=["ingest", "search"], actor="test").key
    await ingest(api, [doc("volcano", VOLCANO), doc("island", ISLAND)])
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        # The other tenant's volcano links to its island: same external ids.
        await ingest(api, [doc("volcano", VOLCANO, "island"), doc("island", ISLAND)], client=client)
        theirs = await client.post(
            "/v1/search",
            json={
                "query": "volcanoes lava",
                "mode": "keyword",
                "weights": {"sparse": 0.7, "graph": 0.3},
            },
        )
        assert [h["external_id"] for h in theirs.json()["hits"]] == ["volcano", "island"]
    assert found(await search(api)) == ["volcano"]


async def test_the_filter_holds_for_documents_reached_by_links(api: Api) -> None:
    await ingest(
        api,
        [
            doc("volcano", VOLCANO, "island", "secret", source="open"),
            doc("island", ISLAND, source="open"),
            doc("secret", "Hawaii also hides a secret base.", source="secret"),
        ],
    )
    assert set(found(await search(api))) == {"volcano", "island", "secret"}
    filtered = await search(api, filter={"source": {"eq": "open"}})
    assert found(filtered) == ["volcano", "island"]
    minted = await api.client.post("/v1/tokens", json={"filter": {"source": {"eq": "open"}}})
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {minted.json()['token']}"
        resp = await client.post(
            "/v1/search",
            json={
                "query": "volcanoes lava",
                "mode": "keyword",
                "weights": {"sparse": 0.7, "graph": 0.3},
                "include_linked": True,
            },
        )
        hits = resp.json()["hits"]
        assert {h["external_id"] for h in hits} == {"volcano", "island"}
        assert all(p["external_id"] != "secret" for h in hits for p in h["linked_pages"] or [])


async def test_a_new_link_is_followed_at_the_next_search(api: Api) -> None:
    await ingest(api, [doc("volcano", VOLCANO), doc("island", ISLAND)])
    assert found(await search(api)) == ["volcano"]
    await ingest(api, [doc("lava-field", "Volcanoes leave lava fields.", "island")])
    assert found(await search(api))[-1] == "island"
    # And a patch that removes it is seen as well.
    await api.client.patch("/v1/documents/lava-field", json={"links": []})
    assert "island" not in found(await search(api))


async def test_linked_pages_list_each_hits_links_both_ways(api: Api) -> None:
    await ingest(
        api,
        [
            doc("volcano", VOLCANO, "island", {"target": "gone", "type": "cites"}),
            doc("island", ISLAND),
            doc("milk", OTHER, {"target": "volcano", "type": "mention"}),
        ],
    )
    result = await search(api, weights={"sparse": 1.0}, include_linked=True)
    [hit] = result["hits"]
    assert hit["linked_pages"] == [
        {"external_id": "island", "title": "island", "type": "link", "direction": "out"},
        {"external_id": "milk", "title": "milk", "type": "mention", "direction": "in"},
    ]
    plain = await search(api, weights={"sparse": 1.0})
    assert plain["hits"][0]["linked_pages"] is None


@pytest.mark.parametrize(
    ("graph", "field"),
    [
        ({"depth": 4}, "graph.depth"),
        ({"depth": "2"}, "graph.depth"),
        ({"scoring": "bfs"}, "graph.scoring"),
        ({"direction": "up"}, "graph.direction"),
        ({"types": []}, "graph.types"),
        ({"seeds": 0}, "graph.seeds"),
        ({"alpha": 1.0}, "graph.alpha"),
        ({"hops": 1}, "graph.hops"),
    ],
)
async def test_bad_graph_parameters_are_refused_naming_the_field(
    api: Api, graph: dict[str, Any], field: str
) -> None:
    resp = await api.client.post("/v1/search", json={"query": "volcano", "graph": graph})
    assert resp.status_code == 422, resp.text
    assert field in resp.json()["detail"], resp.text


class HeldGraphs(GraphStore):
    """A store whose builds wait until released (a graph slow to build)."""

    def __init__(self, sessions: SessionFactory) -> None:
        self.release = threading.Event()
        self.reader = GraphStore(sessions, max_links=1000)
        super().__init__(sessions, max_links=1000, build=self._held)

    def _held(self, tenant_id: str) -> tuple[LinkGraph, tuple[str, ...]]:
        self.release.wait(30)
        return self.reader.read_graph(tenant_id)


@pytest.fixture
async def slow(tmp_path: Path) -> AsyncIterator[tuple[Api, HeldGraphs]]:
    """The app with a graph leg whose graph is not built until released, and a leg
    deadline of half a second."""
    settings: Settings = api_settings(tmp_path, leg_timeout_s=0.5).model_copy(
        update={"graph": GraphSettings(enabled=False)}
    )
    database = settings.data_dir / "hsearch.sqlite"
    database.parent.mkdir(parents=True, exist_ok=True)
    database.write_bytes(migrated_database())
    engine = create_db_engine(settings.database_url)
    sessions = create_session_factory(engine)
    graphs = HeldGraphs(sessions)
    source = GraphSource(graphs, GenerationReader(sessions), defaults=GraphParams())
    try:
        async with serve(settings, extra_sources=[source]) as api:
            yield api, graphs
    finally:
        graphs.release.set()
        engine.dispose()


async def test_a_graph_not_ready_by_the_deadline_degrades_the_leg(
    slow: tuple[Api, HeldGraphs],
) -> None:
    api, graphs = slow
    await ingest(api, [doc("volcano", VOLCANO, "island"), doc("island", ISLAND)])
    result = await search(api)
    assert result["degraded"] == ["graph"]
    assert found(result) == ["volcano"]
    [leg] = [x for x in result["legs"] if x["leg"] == "graph"]
    assert leg["status"] == "error"
    assert "still being built" in leg["error"]
    # The build goes on: once done, the next search has the graph.
    graphs.release.set()
    for _ in range(200):
        result = await search(api)
        if not result["degraded"]:
            break
        await asyncio.sleep(0.05)
    assert found(result) == ["volcano", "island"]


async def test_the_app_built_from_settings_names_the_legs_the_services_register(
    api: Api, tmp_path: Path
) -> None:
    # The OpenAPI document of an app whose lifespan builds its services is made before
    # they exist, from source_names: both must agree, with the graph leg on and off.
    assert api.services.search.sources.names == source_names(api.services.settings)
    assert source_names(api.services.settings) == ("dense", "sparse", "graph")
    off = api_settings(tmp_path / "off").model_copy(update={"graph": GraphSettings(enabled=False)})
    async with serve(off) as without:
        assert without.services.search.sources.names == source_names(off) == ("dense", "sparse")
