"""Typo tolerance on a real collection, through the API: Cranfield's judged queries with
one typo in every word of 5 or more letters (a dropped, doubled or swapped letter) keep
at least 0.8 of the clean queries' nDCG@10 in keyword mode, and lose almost all of it
with typo tolerance off (so the test sees the feature, not the collection).

The keyword leg is the lexical analyzer's BM25 whichever encoder runs (the fake
encoder's sparse side is the offline encoder's), so the embedded parts give the
product's keyword ranking."""

from __future__ import annotations

import random
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from bench.datasets import DATASETS_ROOT, load_dataset
from bench.metrics import ndcg_at_k, relevant

from hsearch.config import RateLimitSettings
from tests.unit.api.conftest import Api, api_settings, serve

CRANFIELD = DATASETS_ROOT / "en-cranfield"
SEED = 20261128

pytestmark = pytest.mark.skipif(
    not (CRANFIELD / "corpus.jsonl").is_file(), reason="needs ../shared/datasets/en-cranfield"
)


def mistype(word: str, rng: random.Random) -> str:
    """``word`` with one typo: a letter dropped, doubled, or swapped with the next."""
    while True:
        i = rng.randrange(1, len(word) - 1)
        kind = rng.choice(("drop", "double", "swap"))
        if kind == "drop":
            typed = word[:i] + word[i + 1 :]
        elif kind == "double":
            typed = word[: i + 1] + word[i:]
        else:
            typed = word[:i] + word[i + 1] + word[i] + word[i + 2 :]
        if typed != word:
            return typed


def with_typos(query: str, rng: random.Random) -> str:
    return re.sub(r"[A-Za-z]{5,}", lambda m: mistype(m.group(0), rng), query)


def test_mistype_changes_every_long_word_once() -> None:
    rng = random.Random(SEED)
    typed = with_typos("what similarity laws must be obeyed", rng)
    words = typed.split()
    assert words[0] == "what"
    assert words[2] == "laws"
    assert words[3] == "must"
    assert words[1] != "similarity"
    assert abs(len(words[1]) - len("similarity")) <= 1
    assert words[5] != "obeyed"


async def mean_ndcg(api: Api, queries: dict[str, str], qrels: dict[str, Any], **body: Any) -> float:
    scores = []
    for qid, text in queries.items():
        resp = await api.client.post(
            "/v1/search",
            json={
                "query": text,
                "mode": "keyword",
                "top_k": 10,
                "group_by_document": True,
                "highlight": False,
                "track_total": False,
                **body,
            },
        )
        assert resp.status_code == 200, resp.text
        ranking = [h["external_id"] for h in resp.json()["hits"]]
        scores.append(ndcg_at_k(ranking, qrels[qid], 10))
    return sum(scores) / len(scores)


async def test_queries_with_typos_keep_most_of_their_ndcg(tmp_path: Path) -> None:
    dataset = load_dataset(CRANFIELD)
    documents = [
        {"external_id": d["_id"], "title": d["title"], "text": d["text"]}
        for d in dataset.corpus
        if d["text"].strip()
    ]
    judged = {q: t for q, t in dataset.queries.items() if relevant(dataset.qrels.get(q, {}))}
    rng = random.Random(SEED)
    typed = {q: with_typos(t, rng) for q, t in judged.items()}
    assert sum(typed[q] != judged[q] for q in judged) >= 0.95 * len(judged)
    settings = api_settings(tmp_path)
    # Three passes over the judged queries are more searches than a minute allows a key.
    settings = settings.model_copy(update={"ratelimit": RateLimitSettings(enabled=False)})
    async with serve(settings) as api:
        resp = await api.client.post("/v1/documents", json={"documents": documents})
        assert resp.status_code == 202, resp.text
        job = uuid.UUID(resp.json()["job_id"])
        while (status := api.services.indexing().process_job(job)) == "running":
            pass  # a job runs in turns: the next turn goes on where this one stopped
        assert status == "succeeded"
        clean = await mean_ndcg(api, judged, dataset.qrels)
        tolerant = await mean_ndcg(api, typed, dataset.qrels)
        strict = await mean_ndcg(api, typed, dataset.qrels, typo_tolerance=False)
    assert clean > 0.3, "the collection is searched as bench.relevance measures it"
    print(
        f"nDCG@10 keyword: clean {clean:.4f}, typos {tolerant:.4f}, typos untolerated {strict:.4f}"
    )
    assert tolerant >= 0.8 * clean, (clean, tolerant)
    assert strict < 0.6 * clean, (clean, strict)
