"""A whole search through HTTP with the graph leg on, at 1,000 documents: the section of
``python -m bench.graph`` that runs the product as deployed (:func:`http_section`).

A Milvus Lite server and the API in processes of their own (as
:func:`bench.cache_hit.measure_http` starts them), the fake encoder, the result cache
off (every request is a search). ``documents`` synthetic documents (ten words each
from a vocabulary of 2,000, drawn by Zipf's law) are ingested with ``links`` links each
to other documents (targets by Zipf's law: hubs), indexed in this process on the same
database and collection. Then ``queries`` three-word queries, each searched twice, in
an order that alternates, so load falls on both alike:

* **with the graph leg**: hybrid, ``weights`` dense 0.7, sparse 0.3, graph 0.3, the
  default graph parameters;
* **without**: the same request without the graph leg (the baseline, same run).

Reported: p50 and p95 of the client's wall time and of the server's ``took_ms``, their
ratio with / without, and how many of a page's hits the graph leg ranked.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import numpy as np

from bench.cache_hit import http_stack
from bench.metrics import percentile

VOCABULARY = 2000
WORDS_PER_DOCUMENT = 10
WITH_GRAPH = {"dense": 0.7, "sparse": 0.3, "graph": 0.3}
WITHOUT_GRAPH = {"dense": 0.7, "sparse": 0.3}


def corpus(documents: int, *, links: int, seed: int) -> list[dict[str, Any]]:
    """Synthetic documents with links (module docstring)."""
    rng = np.random.default_rng(seed)
    ranks = np.arange(1, VOCABULARY + 1)
    words = rng.choice(VOCABULARY, size=(documents, WORDS_PER_DOCUMENT), p=_zipf(ranks))
    targets_p = _zipf(np.arange(1, documents + 1))
    order = rng.permutation(documents)
    out = []
    for i in range(documents):
        targets = {int(order[t]) for t in rng.choice(documents, size=links, p=targets_p)} - {i}
        out.append(
            {
                "external_id": f"d{i}",
                "title": f"Document {i}",
                "text": " ".join(f"w{w}" for w in words[i]) + ".",
                "links": [{"target": f"d{t}"} for t in sorted(targets)],
            }
        )
    return out


def _zipf(ranks: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    weights = 1.0 / ranks
    return weights / weights.sum()  # type: ignore[no-any-return]


def http_section(
    *, documents: int, links: int, queries: int, warmup: int, seed: int
) -> dict[str, Any]:
    """The whole-search section (module docstring)."""
    env = {"HSEARCH_MILVUS__COLLECTION": "graph_http", "HSEARCH_CACHE__ENABLED": "false"}
    with http_stack("hsearch-graph-http-", env=env) as (client, services):
        return _measure(client, services, documents, links, queries, warmup, seed)


def _measure(
    client: httpx.Client,
    services: Any,
    documents: int,
    links: int,
    queries: int,
    warmup: int,
    seed: int,
) -> dict[str, Any]:
    docs = corpus(documents, links=links, seed=seed)
    for start in range(0, len(docs), 500):
        resp = client.post("/v1/documents", json={"documents": docs[start : start + 500]})
        resp.raise_for_status()
        job, status = uuid.UUID(resp.json()["job_id"]), "running"
        while status == "running":  # a job of many documents runs in turns
            status = services.indexing().process_job(job)
        if status != "succeeded":
            msg = f"the documents were not indexed: job {job} {status}"
            raise RuntimeError(msg)
    rng = np.random.default_rng(seed + 1)
    texts = [
        " ".join(f"w{w}" for w in rng.choice(200, size=3, replace=False))
        for _ in range(warmup + queries)
    ]
    timings: dict[str, dict[str, list[float]]] = {
        name: {"wall_ms": [], "took_ms": []} for name in ("with_graph", "without_graph")
    }
    through_graph = 0
    for n, text in enumerate(texts):
        runs = [("with_graph", WITH_GRAPH), ("without_graph", WITHOUT_GRAPH)]
        for name, weights in runs if n % 2 == 0 else runs[::-1]:
            body = {"query": text, "weights": weights, "top_k": 10, "group_by_document": True}
            started = time.perf_counter()
            resp = client.post("/v1/search", json=body)
            wall = (time.perf_counter() - started) * 1000
            resp.raise_for_status()
            result = resp.json()
            if result["degraded"]:
                msg = f"a search was degraded: {result['legs']}"
                raise RuntimeError(msg)
            if n < warmup:
                continue
            timings[name]["wall_ms"].append(wall)
            timings[name]["took_ms"].append(result["took_ms"])
            if name == "with_graph":
                through_graph += sum(
                    1 for h in result["hits"] if h["explanation"]["legs"]["graph"]["rank"]
                )
    summary = {
        name: {
            f"{measure}_{q}": round(percentile(values, q), 2)
            for measure, values in series.items()
            for q in (50, 95)
        }
        for name, series in timings.items()
    }
    with_graph, without = summary["with_graph"], summary["without_graph"]
    return {
        "documents": documents,
        "links": sum(len(d["links"]) for d in docs),
        "queries": queries,
        **summary,
        "ratio_wall_p50": round(with_graph["wall_ms_50"] / without["wall_ms_50"], 3),
        "hits_ranked_by_graph_per_search": round(through_graph / queries, 2),
    }
