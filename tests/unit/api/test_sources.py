"""A third retrieval source, registered with no edit to the retriever, the planner,
ranking or the response models: fused, explained, timed, hydrated and isolated through
``/v1/search``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import GraphSettings, Settings
from hsearch.errors import BackendError
from hsearch.ingestion.ids import document_id
from hsearch.search.sources import Level, Need, SourceQuery
from hsearch.types import SearchMode
from hsearch.vectorstore.protocol import StoredHit
from tests.unit.api.conftest import api_settings, ingest, serve

DOCS: list[dict[str, Any]] = [
    {
        "external_id": "fox",
        "title": "Fox",
        "text": "The quick brown fox jumps over the lazy dog.",
        "source": "en-wiki",
    },
    {"external_id": "milvus", "title": "Milvus", "text": "Milvus runs dense and sparse search."},
    {"external_id": "owl", "title": "Owl", "text": "Owls hunt at night in quiet woods."},
]


@dataclass
class FixedDocuments:
    """A document-level source that always answers the same documents, best first."""

    external_ids: Sequence[str]
    name: str = "toy"
    needs: frozenset[Need] = frozenset()
    level: Level = Level.DOCUMENT
    modes: frozenset[SearchMode] = frozenset({SearchMode.HYBRID, SearchMode.KEYWORD})
    default_weight: float = 0.0
    failing: bool = False
    asked: list[SourceQuery] = field(default_factory=list)

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        self.asked.append(query)
        if self.failing:
            raise BackendError("the toy index is offline")
        ids = [str(document_id(query.tenant_id, e)) for e in self.external_ids]
        return [StoredHit(d, 1.0 / (i + 1), {}) for i, d in enumerate(ids)]


@dataclass
class FixedChunks:
    """A chunk-level source that answers bare chunk ids, set by the test."""

    chunk_ids: list[str] = field(default_factory=list)
    name: str = "chunks"
    needs: frozenset[Need] = frozenset({Need.HITS})
    level: Level = Level.CHUNK
    modes: frozenset[SearchMode] = frozenset({SearchMode.HYBRID})
    default_weight: float = 0.0
    earlier: list[set[str]] = field(default_factory=list)

    async def search(self, query: SourceQuery, *, timeout: float) -> Sequence[StoredHit]:
        self.earlier.append(set(query.earlier))
        return [StoredHit(c, 1.0, {}) for c in self.chunk_ids]


def without_graph(tmp_path: Path) -> Settings:
    """The embedded settings without the graph leg: the toy sources come right after the
    store's legs."""
    return api_settings(tmp_path).model_copy(update={"graph": GraphSettings(enabled=False)})


async def test_a_registered_document_source_is_fused_explained_timed_and_hydrated(
    tmp_path: Path,
) -> None:
    toy = FixedDocuments(["owl", "fox"])
    async with serve(without_graph(tmp_path), extra_sources=[toy]) as api:
        await ingest(api, DOCS)
        # The OpenAPI document names it wherever a leg is named.
        schemas = (await api.client.get("/openapi.json")).json()["components"]["schemas"]
        assert schemas["Leg"]["enum"] == ["dense", "sparse", "toy"]

        body = {"query": "Milvus", "mode": "keyword", "weights": {"sparse": 0.5, "toy": 0.5}}
        resp = await api.client.post("/v1/search", json=body)
        assert resp.status_code == 200, resp.text
        result = resp.json()
        assert [(leg["leg"], leg["status"]) for leg in result["legs"]] == [
            ("sparse", "ok"),
            ("toy", "ok"),
        ]
        toy_leg = result["legs"][1]
        assert toy_leg["candidates"] == 2
        assert toy_leg["took_ms"] >= 0
        assert result["weights"] == {"sparse": 0.5, "toy": 0.5}
        hits = {hit["external_id"]: hit for hit in result["hits"]}
        assert set(hits) == {"milvus", "owl", "fox"}
        # Found by the toy source alone: its best chunk, with fields, text and offsets.
        owl = hits["owl"]
        assert owl["title"] == "Owl"
        assert owl["text"] == DOCS[2]["text"]
        assert (owl["char_start"], owl["char_end"]) == (0, len(DOCS[2]["text"]))
        assert owl["explanation"]["legs"] == {
            "sparse": {"rank": None, "score": None, "detail": None},
            "toy": {"rank": 1, "score": 1.0, "detail": None},
        }
        assert owl["explanation"]["sparse_rank"] is None
        milvus = hits["milvus"]["explanation"]["legs"]
        assert milvus["sparse"]["rank"] == 1
        assert milvus["toy"] == {"rank": None, "score": None, "detail": None}
        # The search's filter applies to what the source found: fox alone passes.
        filtered = await api.client.post(
            "/v1/search", json={**body, "filter": {"source": {"eq": "en-wiki"}}}
        )
        assert [h["external_id"] for h in filtered.json()["hits"]] == ["fox"]

        # Weight 0 by default: a search that does not weigh it does not run it.
        asked = len(toy.asked)
        plain = (await api.client.post("/v1/search", json={"query": "Milvus"})).json()
        assert [(leg["leg"], leg["status"]) for leg in plain["legs"]] == [
            ("dense", "ok"),
            ("sparse", "ok"),
            ("toy", "skipped"),
        ]
        assert len(toy.asked) == asked
        assert all(
            set(h["explanation"]["legs"]) == {"dense", "sparse", "toy"} for h in plain["hits"]
        )

        # Timed and counted in the metrics under its name.
        metrics = (await api.anonymous().get("/metrics")).text
        assert 'hsearch_search_leg_duration_seconds_count{leg="toy"' in metrics

        # An unknown leg is refused, naming the registered ones.
        unknown = await api.client.post(
            "/v1/search", json={"query": "Milvus", "weights": {"graph": 1.0}}
        )
        assert unknown.status_code == 422

        # A failing source degrades the search, not fails it.
        toy.failing = True
        degraded = (await api.client.post("/v1/search", json=body)).json()
        assert degraded["degraded"] == ["toy"]
        assert [h["external_id"] for h in degraded["hits"]] == ["milvus"]


async def test_bare_chunk_ids_are_hydrated_only_within_the_tenant(tmp_path: Path) -> None:
    chunks = FixedChunks()
    async with serve(without_graph(tmp_path), extra_sources=[chunks]) as api:
        await ingest(api, DOCS)
        tenant = api.services.settings.api.default_tenant
        other = api.services.tenancy.ensure_tenant("other", actor="test").id
        other_key = api.services.tenancy.create_key(other, scopes=["ingest"], actor="test").key
        async with api.anonymous() as anonymous:
            anonymous.headers["Authorization"] = f"Bearer {other_key}"
            await ingest(
                api,
                [{"external_id": "secret", "title": "Secret", "text": "Owls elsewhere."}],
                client=anonymous,
            )
        store = api.services.store
        owl = store.chunk_ids(tenant_id=tenant, document_id=str(document_id(tenant, "owl")))
        secret = store.chunk_ids(tenant_id=other, document_id=str(document_id(other, "secret")))
        assert owl
        assert secret
        chunks.chunk_ids = [*secret, *owl, "no-such-chunk"]
        body = {"query": "Milvus", "weights": {"dense": 0.5, "sparse": 0.5, "chunks": 1.0}}
        result = (await api.client.post("/v1/search", json=body)).json()
        assert chunks.earlier == [{"dense", "sparse"}], "it ran after the first round"
        (leg,) = [leg for leg in result["legs"] if leg["leg"] == "chunks"]
        assert (leg["status"], leg["candidates"]) == ("ok", 1)
        found = [h["external_id"] for h in result["hits"]]
        assert "owl" in found
        assert "secret" not in found
        (hit,) = [h for h in result["hits"] if h["external_id"] == "owl"]
        assert hit["text"] == DOCS[2]["text"]
        assert hit["explanation"]["legs"]["chunks"]["rank"] == 1


@pytest.mark.parametrize("mode", ["semantic"])
async def test_a_source_outside_the_mode_is_not_listed(tmp_path: Path, mode: str) -> None:
    async with serve(without_graph(tmp_path), extra_sources=[FixedDocuments(["owl"])]) as api:
        await ingest(api, DOCS)
        result = (await api.client.post("/v1/search", json={"query": "owl", "mode": mode})).json()
        assert [leg["leg"] for leg in result["legs"]] == ["dense"]
        assert all(set(h["explanation"]["legs"]) == {"dense"} for h in result["hits"])
