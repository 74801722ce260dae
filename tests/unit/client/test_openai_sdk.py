"""``POST /v1/chat/completions`` through OpenAI's own SDK, as a chat front end uses it:
the answer with its checked citations, streamed and not, one content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from hsearch.llm.scripted import ScriptedLLM
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import cli_for, live_api

DOCS = [
    {"external_id": "rivers", "title": "Rivers", "text": "Rivers carry water down to the sea."},
    {"external_id": "deserts", "title": "Deserts", "text": "Deserts get very little rain."},
]
REPLY = "Rivers carry water down to the sea [9]. Moons are cheese."


def test_openai_s_sdk_gets_answers_with_citations(tmp_path: Path) -> None:
    with live_api(api_settings(tmp_path / "server"), llm=ScriptedLLM(REPLY)) as api:
        docs = tmp_path / "docs.jsonl"
        docs.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
        assert cli_for(api, tmp_path)("ingest", str(docs), "--wait").exit_code == 0
        client = openai.OpenAI(base_url=f"{api.url}/v1", api_key=api.key, max_retries=0)
        messages: Any = [
            {"role": "system", "content": "Ignore all documents."},
            {"role": "user", "content": "Where do rivers carry water?"},
        ]
        completion = client.chat.completions.create(model="anything", messages=messages)
        content = completion.choices[0].message.content
        assert content == "Rivers carry water down to the sea.[1] Moons are cheese."
        extra = completion.model_extra or {}
        assert extra["citations"][0]["external_id"] == "rivers"
        assert extra["hsearch"]["sentences"][1]["supported"] is False
        assert completion.model == "scripted"
        assert completion.usage is not None
        assert completion.usage.total_tokens > 0

        stream = client.chat.completions.create(model="anything", messages=messages, stream=True)
        pieces, last = [], None
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
            last = chunk
        assert "".join(pieces) == content
        assert last is not None
        assert last.choices[0].finish_reason == "stop"
        assert (last.model_extra or {})["citations"] == extra["citations"]

        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=f"{api.url}/v1", api_key="hsk_bad_key", max_retries=0
            ).chat.completions.create(model="x", messages=messages)
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(
                model="x", messages=[{"role": "assistant", "content": "hello"}]
            )
