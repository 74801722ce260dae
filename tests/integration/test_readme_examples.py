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
    SearchSettings,
    Settings,
    WebhookSettings,
)
from hsearch.stack import sample_documents
from tests.unit.api.conftest import serve

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[2] / "README.md"
EXPECTED_FIRST = {"How do volcanoes form?": "volcano", "日本の首都はどこですか": "tokyo-ja"}


def quick_start_queries() -> list[str]:
    section = README.read_text("utf-8").split("## Quick start", 1)[1].split("\n## ", 1)[0]
    bodies = re.findall(r"-d '(\{[^']*\})'", section)
    return [json.loads(body)["query"] for body in bodies]


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
