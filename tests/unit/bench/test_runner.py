"""The relevance runner's handling of links: ingesting a set's edges as its documents'
links, and which modes a set is measured in and how each asks the search service (a
stand-in stack here: no Milvus)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bench.app_client import api_client
from bench.datasets import Dataset
from bench.report import GRAPH_SCORINGS, HYBRID_NO_GRAPH, MODES, dataset_result
from bench.runner import (
    TENANT,
    GraphOptions,
    ModeRequest,
    Options,
    Stack,
    dataset_modes,
    graph_request,
    ingest,
    mode_requests,
    no_graph_request,
    resolved_graph,
    run_dataset,
    run_queries,
)

from hsearch.config import EncoderKind, EncoderSettings, GraphSettings, Settings
from hsearch.db.migrate import upgrade_database
from hsearch.db.repositories.links import LinkRepository
from hsearch.graph.links import Link
from hsearch.graph.params import GraphScoring
from hsearch.runtime import build_services
from hsearch.search.models import SearchQuery
from hsearch.types import FusionDefault, FusionMethod, Leg, SearchMode
from hsearch.vectorstore.in_memory import InMemoryVectorStore

FUSION = FusionDefault.of(FusionMethod.ADAPTIVE, {Leg.DENSE: 0.9, Leg.SPARSE: 0.1}, 60)


def test_without_links_the_modes_are_those_asked_for() -> None:
    assert dataset_modes(MODES, has_links=False) == MODES
    assert dataset_modes(("semantic",), has_links=True) == ("semantic",)


def test_with_links_hybrid_no_graph_follows_hybrid() -> None:
    assert dataset_modes(MODES, has_links=True) == (*MODES, HYBRID_NO_GRAPH)
    assert dataset_modes(("hybrid", "semantic"), has_links=True) == (
        "hybrid", HYBRID_NO_GRAPH, "semantic"
    )  # fmt: skip


def test_graph_request_adds_the_graph_leg_to_the_default_weights() -> None:
    graph = GraphOptions(weight=0.2, scoring="pagerank", seeds=5)
    request = graph_request(FUSION, graph)
    assert request.mode is SearchMode.HYBRID
    assert request.weights == {"dense": 0.9, "sparse": 0.1, "graph": 0.2}
    assert request.leg_params == {"graph": {"scoring": "pagerank", "seeds": 5}}
    assert graph.describe() == {"weight": 0.2, "scoring": "pagerank", "seeds": 5}


def test_mode_requests_without_links_are_the_default_requests() -> None:
    requests = mode_requests(MODES, has_links=False, fusion=FUSION, graph=GraphOptions())
    assert requests == {mode: ModeRequest(SearchMode(mode)) for mode in MODES}


def test_mode_requests_with_links_put_the_graph_leg_in_hybrid_only() -> None:
    graph = GraphOptions(weight=0.3, depth=2)
    modes = dataset_modes(MODES, has_links=True)
    requests = mode_requests(modes, has_links=True, fusion=FUSION, graph=graph)
    assert requests["hybrid"] == graph_request(FUSION, graph)
    assert requests[HYBRID_NO_GRAPH] == ModeRequest(SearchMode.HYBRID)
    assert requests["semantic"] == ModeRequest(SearchMode.SEMANTIC)


def test_without_the_graph_is_the_default_request_unless_the_server_weighs_the_graph() -> None:
    assert no_graph_request(FUSION, server_graph_weight=0.0) == ModeRequest(SearchMode.HYBRID)
    explicit = no_graph_request(FUSION, server_graph_weight=0.2)
    assert explicit.weights == {"dense": 0.9, "sparse": 0.1, "graph": 0.0}
    modes = dataset_modes(MODES, has_links=True)
    requests = mode_requests(
        modes, has_links=True, fusion=FUSION, graph=GraphOptions(), server_graph_weight=0.2
    )
    assert requests[HYBRID_NO_GRAPH] == explicit


def test_resolved_graph_fills_what_is_unset_with_the_servers_defaults() -> None:
    settings = Settings(_env_file=None, graph=GraphSettings(scoring="pagerank", depth=3, seeds=7))
    unset = GraphOptions(weight=0.2, scoring=None, seeds=None)
    assert resolved_graph(unset, settings) == GraphOptions(0.2, "pagerank", 3, 7)
    # The benchmark's documented request names its scoring and seeds; the depth is left.
    assert resolved_graph(GraphOptions(), settings) == GraphOptions(0.5, "bridge", 3, 5)
    given = GraphOptions(0.2, "proximity", 1, 5)
    assert resolved_graph(given, settings) == given


def test_the_scorings_offered_are_the_graph_legs() -> None:
    assert set(GRAPH_SCORINGS) == {s.value for s in GraphScoring}


def test_a_default_mode_request_is_the_default_search() -> None:
    query = ModeRequest(SearchMode.HYBRID).query(text="q", candidates=100, fusion=None)
    assert query == SearchQuery(
        tenant_id=TENANT, query="q", top_k=100, mode=SearchMode.HYBRID, candidates=100
    )


def test_ingest_submits_each_documents_links(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None, data_dir=tmp_path, encoder=EncoderSettings(kind=EncoderKind.FAKE)
    )
    upgrade_database(settings.database_url)
    resources = build_services(settings, store=InMemoryVectorStore())
    corpus = [{"_id": d, "title": d.upper(), "text": f"text of {d}"} for d in ("a", "b", "c")]
    links = {
        "a": (Link("b", "title_mention", 1.0), Link("missing", "cites", 0.5)),
        "c": (Link("a", "title_mention", 2.0),),
    }
    try:
        ingested = ingest(resources, corpus, links)
        assert (ingested["indexed"], ingested["failed"]) == (3, 0)
        with resources.sessions() as session:
            repository = LinkRepository(session)
            assert repository.count(TENANT) == 3  # the unresolved one too
            resolved = sorted((e.type, e.weight) for e in repository.graph_edges(TENANT))
        assert resolved == [("title_mention", 1.0), ("title_mention", 2.0)]
    finally:
        resources.close()


class RecordingSearch:
    """Answers every search with the same ranking, except that a search with the graph
    leg puts the relevant document first; keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[SearchQuery] = []

    async def search(self, query: SearchQuery) -> Any:
        self.asked.append(query)
        ranking = ["d2", "d1"]
        if query.weights and query.weights.get("graph"):
            ranking.reverse()
        hits = [SimpleNamespace(external_id=d) for d in ranking]
        return SimpleNamespace(hits=hits, degraded=(), method="adaptive")


def _write_set(root: Path, *, edges: bool) -> Path:
    root.mkdir()
    corpus = [{"_id": d, "title": d, "text": f"text {d}"} for d in ("d1", "d2")]
    (root / "corpus.jsonl").write_text("\n".join(json.dumps(d) for d in corpus) + "\n")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "query"}) + "\n")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    if edges:
        (root / "edges.tsv").write_text("source\ttarget\ttype\tweight\nd2\td1\ttitle_mention\t1\n")
    return root


def _run(path: Path, options: Options) -> tuple[dict[str, Any], RecordingSearch]:
    search = RecordingSearch()

    class Store:
        async def aclose(self) -> None:
            return None

    @contextlib.contextmanager
    def stand_in(dataset: Dataset, options: Options) -> Iterator[Stack]:
        settings = Settings(_env_file=None)
        resources = SimpleNamespace(search=search, store=Store(), settings=settings)
        yield Stack(
            resources=resources,  # type: ignore[arg-type]
            settings=settings,
            fusion=FUSION,
            encoder="fake",
            ingested={"seconds": 0.0, "chunks": 2, "failed": 0},
            setup_seconds=0.0,
            flush_seconds=None,
        )

    return dataset_result(run_dataset(path, options, stack_for=stand_in)), search


def test_a_set_without_edges_runs_and_reports_the_modes_as_before(tmp_path: Path) -> None:
    result, search = _run(_write_set(tmp_path / "plain", edges=False), Options())
    assert list(result["modes"]) == list(MODES)
    assert "graph" not in result["settings"]
    assert "per_query_vs_no_graph" not in result
    assert [q.weights for q in search.asked] == [None, None, None]


def test_a_set_with_edges_reports_hybrid_with_and_without_the_graph_leg(tmp_path: Path) -> None:
    graph = GraphOptions(weight=0.2, scoring="proximity", seeds=20)
    result, search = _run(_write_set(tmp_path / "linked", edges=True), Options(graph=graph))
    assert list(result["modes"]) == [*MODES, HYBRID_NO_GRAPH]
    asked = dict(zip(result["modes"], search.asked, strict=True))
    assert asked["hybrid"].weights == {"dense": 0.9, "sparse": 0.1, "graph": 0.2}
    assert asked["hybrid"].leg_params == {"graph": {"scoring": "proximity", "seeds": 20}}
    assert asked[HYBRID_NO_GRAPH] == SearchQuery(
        tenant_id=TENANT, query="query", top_k=100, mode=SearchMode.HYBRID, candidates=100
    )
    assert result["modes"]["hybrid"]["recall@5"] == 1.0
    assert result["modes"]["hybrid"]["ndcg@10"] == 1.0
    assert result["modes"][HYBRID_NO_GRAPH]["ndcg@10"] == pytest.approx(0.6309, abs=1e-4)
    assert result["per_query_vs_no_graph"] == {"better": 1, "same": 0, "worse": 0}
    assert result["settings"]["graph"] == {
        # the depth left unset is recorded as the server's default
        "weight": 0.2, "scoring": "proximity", "depth": 2, "seeds": 20, "links": 1,
        "weights": {"dense": 0.9, "sparse": 0.1, "graph": 0.2},
    }  # fmt: skip


def test_through_the_http_api_the_searches_rank_as_in_process(tmp_path: Path) -> None:
    """``--http``: the same requests, sent as JSON to ``POST /v1/search``, rank the same
    documents as the service asked in process (the graph leg's parameters included), and
    a request the API refuses counts as a failed search."""
    settings = Settings(
        _env_file=None, data_dir=tmp_path, encoder=EncoderSettings(kind=EncoderKind.FAKE)
    )
    upgrade_database(settings.database_url)
    resources = build_services(settings, store=InMemoryVectorStore())
    names = ("volcano", "island", "lava", "lamp")
    corpus = [
        {"_id": "volcano", "title": "Volcano", "text": "volcanoes erupt lava"},
        {"_id": "island", "title": "Island", "text": "a hotspot island"},
        {"_id": "lava", "title": "Lava", "text": "lava flows cool"},
        {"_id": "lamp", "title": "Lamp", "text": "a lava lamp with lava"},
    ]
    links: dict[str, tuple[Link, ...]] = {"volcano": (Link("island"), Link("lava"))}
    dataset = Dataset(
        name="tiny",
        corpus=corpus,
        queries={"q1": "volcanoes lava", "q2": "hotspot"},
        qrels={"q1": {"lava": 1.0}, "q2": {"island": 1.0}},
        links=links,
    )
    requests = {
        "keyword": ModeRequest(SearchMode.KEYWORD),
        "bridge": ModeRequest(
            SearchMode.KEYWORD,
            {"sparse": 0.7, "graph": 0.3},
            {"graph": {"scoring": "bridge", "seeds": 1}},
        ),
        "refused": ModeRequest(SearchMode.KEYWORD, None, {"graph": {"scoring": "bfs"}}),
    }

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        modes = list(requests)
        direct = await run_queries(resources, dataset, ["q1", "q2"], modes, requests=requests)
        async with api_client(resources, tenant=TENANT) as api:
            http = await run_queries(
                resources, dataset, ["q1", "q2"], modes, requests=requests, api=api
            )
        return direct, http

    try:
        assert ingest(resources, corpus, links)["indexed"] == len(names)
        direct, http = asyncio.run(both())
    finally:
        resources.close()
    for mode in ("keyword", "bridge"):
        assert http[mode].per_query == direct[mode].per_query
        assert http[mode].errors == 0
    assert direct["bridge"].per_query != direct["keyword"].per_query
    assert http["refused"].errors == direct["refused"].errors == 2
