"""The README's quick-start searches answer what it says on the sample corpus that
``make run`` ingests, with the encoder ``make run`` picks without BGE-M3 weights (the
offline encoder, real all-MiniLM-L6-v2 weights)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest

from hsearch.config import (
    ApiSettings,
    EncoderKind,
    EncoderSettings,
    LlmSettings,
    SearchSettings,
    Settings,
    WebhookSettings,
)
from hsearch.llm.local import PACKAGED_MODEL_NAME, packaged_model_path
from hsearch.llm.openai_compatible import OpenAICompatibleLLM
from hsearch.processes import start_model_server
from hsearch.stack import sample_documents
from tests.unit.api.conftest import serve

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED_FIRST = {"How do volcanoes form?": "volcano", "日本の首都はどこですか": "tokyo-ja"}


def quick_start_queries(route: str = "/v1/search") -> list[str]:
    """The queries of the quick start's ``curl`` examples of ``route``."""
    section = README.read_text("utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = section.replace("\\\n", " ").splitlines()
    queries = []
    for command in commands:
        found = re.search(r"(/v1/[a-z]+) .* -d '(\{[^']*\})'", command)
        if found is not None and found.group(1) == route:
            queries.append(json.loads(found.group(2))["query"])
    return queries


async def test_the_quick_start_searches_find_what_the_readme_says(tmp_path: Path) -> None:
    assert quick_start_queries() == list(EXPECTED_FIRST)
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        encoder=EncoderSettings(kind=EncoderKind.OFFLINE),
        search=SearchSettings(),
        api=ApiSettings(migrate_on_start=True),
        webhooks=WebhookSettings(),
    )
    async with serve(settings) as api:
        resp = await api.client.post("/v1/documents", json={"documents": sample_documents()})
        assert resp.status_code == 202, resp.text
        job = uuid.UUID(resp.json()["job_id"])
        assert api.services.indexing().process_job(job) == "succeeded"
        for query, first in EXPECTED_FIRST.items():
            resp = await api.client.post("/v1/search", json={"query": query, "top_k": 3})
            assert resp.status_code == 200, resp.text
            hits = [h["external_id"] for h in resp.json()["hits"]]
            assert hits[0] == first, (query, hits)


async def test_the_quick_start_answer_cites_what_the_readme_says(tmp_path: Path) -> None:
    """With the local model ``make run`` starts (the packaged SmolLM2 on llama.cpp)."""
    (question,) = quick_start_queries("/v1/answer")
    log = tmp_path / "model.log"
    server, url = start_model_server(packaged_model_path(), alias=PACKAGED_MODEL_NAME, log=log)
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        encoder=EncoderSettings(kind=EncoderKind.OFFLINE),
        search=SearchSettings(),
        llm=LlmSettings(
            base_url=url, model=PACKAGED_MODEL_NAME, timeout_s=120, first_token_timeout_s=60
        ),
        api=ApiSettings(migrate_on_start=True),
        webhooks=WebhookSettings(),
    )
    try:
        async with serve(settings, llm=OpenAICompatibleLLM(settings.llm)) as api:
            resp = await api.client.post("/v1/documents", json={"documents": sample_documents()})
            job = uuid.UUID(resp.json()["job_id"])
            assert api.services.indexing().process_job(job) == "succeeded"
            resp = await api.client.post("/v1/answer", json={"query": question})
            assert resp.status_code == 200, resp.text
            body = resp.json()
            assert body["answer"], body
            assert body["citations"], body
            assert body["citations"][0]["external_id"] == "volcano"
            assert body["answer"].endswith("[1]") or "[1]" in body["answer"]
    finally:
        server.stop()
