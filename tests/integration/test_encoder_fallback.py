"""The keyword fallback made real: the API in process over Milvus Lite with the offline
encoder (real all-MiniLM-L6-v2 weights), whose model fails on queries while the test
says so. The keyword leg answers through Milvus' sparse index, the dense leg is
reported degraded, and once the model is back the search is whole again."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from hsearch.cache.guard import CacheKind, CacheOutcome
from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.offline import OfflineEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError
from hsearch.search.retrieval import KEYWORD_FALLBACK
from hsearch.vectorstore.factory import create_vector_store
from tests.unit.api.conftest import api_settings, ingest, serve

pytestmark = pytest.mark.integration

DOCS = [
    {"external_id": "dog", "title": "Dogs", "text": "The quick brown fox jumps over the lazy dog."},
    {"external_id": "cat", "title": "Cats", "text": "A cat sleeps all afternoon in the sun."},
    {"external_id": "river", "title": "Rivers", "text": "Rivers carry water down to the sea."},
]


class AilingOfflineEmbedder(OfflineEmbedder):
    """The offline encoder whose model fails every query's dense side while ``failing``
    (documents, and the term counts, are made as usual)."""

    failing = False

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        self._check(dense=dense)
        return super().embed_query(text, dense=dense, sparse=sparse)

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        self._check(dense=dense)
        return super().embed_queries(texts, dense=dense, sparse=sparse)

    def _check(self, *, dense: bool) -> None:
        if self.failing and dense:
            raise EncoderError("offline encoding failed: RuntimeError: out of memory")


async def test_a_failing_model_leaves_the_keyword_leg_on_milvus(
    tmp_path: Path, milvus_uri: str
) -> None:
    settings = api_settings(tmp_path)
    settings = settings.model_copy(
        update={
            "encoder": EncoderSettings(kind=EncoderKind.OFFLINE),
            "milvus": settings.milvus.model_copy(
                update={"uri": milvus_uri, "collection": f"fallback_{uuid.uuid4().hex[:8]}"}
            ),
        }
    )
    embedder = AilingOfflineEmbedder()
    store = create_vector_store(settings.milvus, uri=milvus_uri)
    async with serve(settings, store=store, cache=InMemoryCacheBackend(), embedder=embedder) as api:
        await ingest(api, DOCS)
        query = {"query": "lazy dog", "top_k": 3}
        embedder.failing = True
        resp = await api.client.post("/v1/search", json=query)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["degraded"] == ["dense"]
        assert body["hits"][0]["external_id"] == "dog"
        legs = {leg["leg"]: leg for leg in body["legs"]}
        assert legs["dense"]["status"] == "error"
        assert legs["dense"]["error"] == (
            "query encoding failed (EncoderError: offline encoding failed: RuntimeError: "
            f"out of memory); {KEYWORD_FALLBACK}"
        )
        assert legs["sparse"]["status"] == "ok"
        assert not body["cached"]

        embedder.failing = False
        counters = api.services.cache_counters
        misses = counters.count(CacheKind.EMBEDDING, CacheOutcome.MISS)
        healed = await api.client.post("/v1/search", json=query)
        assert healed.status_code == 200, healed.text
        assert not healed.json()["cached"], "the degraded answer was not stored"
        assert counters.count(CacheKind.EMBEDDING, CacheOutcome.MISS) == misses + 1, (
            "the query's embedding was computed afresh: nothing of the failed one was kept"
        )
        assert healed.json()["degraded"] == []
        assert healed.json()["hits"][0]["external_id"] == "dog"
