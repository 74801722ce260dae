"""The README's quick-start searches answer what it says on the sample corpus that
``make run`` ingests, with the encoder ``make run`` picks without BGE-M3 weights (the
offline encoder, real all-MiniLM-L6-v2 weights)."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

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
from hsearch.local.processes import start_model_server
from hsearch.stack import sample_documents
from tests.unit.api.conftest import serve

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED_FIRST = {"How do volcanoes form?": "volcano", "日本の首都はどこですか": "tokyo-ja"}


def quick_start_bodies(route: str = "/v1/search") -> list[dict[str, Any]]:
    """The bodies of the quick start's ``curl`` examples of ``route``."""
    section = README.read_text("utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = section.replace("\\\n", " ").splitlines()
    bodies = []
    for command in commands:
        found = re.search(r"(/v1/[a-z]+) .* -d '(\{[^']*\})'", command)
        if found is not None and found.group(1) == route:
            bodies.append(json.loads(found.group(2)))
    return bodies


def quick_start_queries(route: str = "/v1/search") -> list[str]:
    """The queries of the quick start's ``curl`` examples of ``route``."""
    return [body["query"] for body in quick_start_bodies(route)]


async def test_the_quick_start_searches_find_what_the_readme_says(tmp_path: Path) -> None:
    assert quick_start_queries() == list(EXPECTED_FIRST)
    bodies = quick_start_bodies()
    # A results page: one hit per document, as the README's searches ask.
    assert all(body["group_by_document"] is True for body in bodies)
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
        for body, (query, first) in zip(bodies, EXPECTED_FIRST.items(), strict=True):
            resp = await api.client.post("/v1/search", json=body)
            assert resp.status_code == 200, resp.text
            hits = [h["external_id"] for h in resp.json()["hits"]]
            assert hits[0] == first, (query, hits)
            assert len(hits) == len(set(hits)) == body["top_k"], hits  # one per document
            assert resp.json()["total"] >= len(hits)
        # The full request of the API section is a valid search too (the sample corpus
        # has no year to match its filter: what is checked is that it is accepted).
        full = README.read_text("utf-8").split("A search request, in full:", 1)[1]
        request = json.loads(full.split("```json", 1)[1].split("```", 1)[0])
        # Its 500 ms budget suits a warm server; a loaded test machine encodes a new
        # query text slower than that, so the server's own budget is used here.
        del request["leg_timeout_ms"]
        resp = await api.client.post("/v1/search", json=request)
        assert resp.status_code == 200, resp.text
        assert resp.json()["sort"]["by"][0] == {"field": "metadata.year", "order": "desc"}


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
