"""``/v1/search`` when the encoder fails or hangs: the keyword fallback of an encoder
whose query sparse side needs no model, reported like any degraded leg; no fallback
with one whose sparse side is the model's (BGE-M3)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hsearch.search.retrieval import KEYWORD_FALLBACK
from tests.unit.api.conftest import Api, api_settings, ingest, serve
from tests.unit.search.corpus import AilingEmbedder, AilingModelSparseEmbedder

DOCS: list[dict[str, Any]] = [
    {"external_id": "rivers", "title": "Rivers", "text": "Rivers flow into the sea."},
    {"external_id": "mountains", "title": "Mountains", "text": "Mountains rise high."},
]


@pytest.fixture
async def served(tmp_path: Path, ailing: AilingEmbedder) -> AsyncIterator[Api]:
    async with serve(api_settings(tmp_path, fallback_encode_share=0.1), embedder=ailing) as api:
        await ingest(api, DOCS)
        try:
            yield api
        finally:
            ailing.release()  # before the app closes its query batcher, which joins it


def leg(body: dict[str, Any], name: str) -> dict[str, Any]:
    (report,) = (r for r in body["legs"] if r["leg"] == name)
    assert isinstance(report, dict)
    return report


@pytest.mark.parametrize(("ailment", "status"), [("fail", "error"), ("hang", "timeout")])
async def test_the_keyword_leg_answers_and_the_dense_leg_says_why(
    served: Api, ailing: AilingEmbedder, ailment: str, status: str
) -> None:
    ailing.ailment = ailment
    # A hung model is given a tenth of the 20 s; the keyword leg keeps the rest.
    resp = await served.client.post(
        "/v1/search", json={"query": "rivers", "top_k": 5, "leg_timeout_ms": 20_000}
    )
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["degraded"] == ["dense"]
    assert [h["external_id"] for h in body["hits"]] == ["rivers"]
    dense = leg(body, "dense")
    assert dense["status"] == status
    assert dense["error"].startswith("query encoding ")
    assert dense["error"].endswith(f"; {KEYWORD_FALLBACK}")
    assert (leg(body, "sparse")["status"], leg(body, "sparse")["error"]) == ("ok", None)
    assert body["total_exact"] is False, "a degraded answer's total is a lower bound"


async def test_once_the_model_is_back_the_search_is_whole_again(
    served: Api, ailing: AilingEmbedder
) -> None:
    ailing.ailment = "fail"
    query = {"query": "rivers", "top_k": 5}
    assert (await served.client.post("/v1/search", json=query)).json()["degraded"] == ["dense"]
    ailing.ailment = None
    body = (await served.client.post("/v1/search", json=query)).json()
    assert body["degraded"] == []
    assert {r["status"] for r in body["legs"]} == {"ok"}


async def test_without_a_model_free_keyword_side_a_failing_model_fails_the_search(
    tmp_path: Path, ailing_model_sparse: AilingModelSparseEmbedder
) -> None:
    async with serve(api_settings(tmp_path), embedder=ailing_model_sparse) as api:
        await ingest(api, DOCS)
        ailing_model_sparse.ailment = "fail"
        failed = await api.client.post("/v1/search", json={"query": "rivers"})
        assert failed.status_code == 500, failed.text
        assert failed.json()["error"] == "encoder_error"
        ailing_model_sparse.ailment = "hang"
        hung = await api.client.post("/v1/search", json={"query": "rivers", "leg_timeout_ms": 1000})
        ailing_model_sparse.release()  # before the app closes its query batcher
        assert hung.status_code == 503, hung.text
        assert hung.json()["error"] == "search_unavailable"
        assert "query encoding missed its deadline" in hung.json()["detail"]
        assert KEYWORD_FALLBACK not in hung.json()["detail"]
