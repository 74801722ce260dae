"""The answers' real path (the OpenAI-compatible adapter over HTTP, the API, server-sent
events) against an OpenAI-compatible endpoint that writes what the test needs: a
sentence copied from passage 3 cites passage 3 whatever the marker, a made-up sentence
is flagged, a marker to no passage never reaches the client."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from hsearch.config import LlmSettings
from hsearch.llm.openai_compatible import OpenAICompatibleLLM
from hsearch.local.processes import free_port, wait_until
from tests.unit.api.conftest import api_settings, ingest, serve

pytestmark = pytest.mark.integration

PASSAGE = re.compile(r'<passage id="(\d+)" title="[^"]*">\n(.*?)\n</passage>', re.S)
DOCS = [
    {"external_id": f"d{i}", "title": t, "text": x}
    for i, (t, x) in enumerate(
        [
            ("Volcanoes", "Volcanoes form where magma reaches the surface of the crust."),
            ("Rivers", "Rivers carry water from the mountains down to the sea."),
            ("Deserts", "Deserts receive very little rain over the whole year."),
            ("Glaciers", "Glaciers are slow rivers of ice that carve deep valleys."),
            ("Forests", "Forests shelter most of the land animals and plants on earth."),
        ]
    )
]


def reply_for(body: dict[str, Any]) -> str:
    passages = dict(PASSAGE.findall(body["messages"][-1]["content"]))
    return f"{passages['3']} [1] Bananas orbit the moon every quiet Tuesday [2]. See [9]."


async def completions(request: Request) -> Any:
    body = await request.json()
    text = reply_for(body)
    if not body.get("stream"):
        return JSONResponse({"choices": [{"index": 0, "message": {"content": text}}]})

    async def chunks() -> AsyncIterator[str]:
        for i in range(0, len(text), 6):
            delta = {"choices": [{"index": 0, "delta": {"content": text[i : i + 6]}}]}
            yield f"data: {json.dumps(delta)}\n\n"
        usage = {"choices": [], "usage": {"prompt_tokens": 321, "completion_tokens": 17}}
        yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(chunks(), media_type="text/event-stream")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, timeout=30, what="the test endpoint")
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(30)


async def test_citations_over_the_real_adapter(endpoint: str, tmp_path: Path) -> None:
    llm = OpenAICompatibleLLM(LlmSettings(base_url=endpoint, model="scripted-endpoint"))
    async with serve(api_settings(tmp_path), llm=llm) as api:
        await ingest(api, DOCS)
        ask = {"query": "water rivers volcanoes magma deserts", "passages": 5, "stream": True}
        resp = await api.client.post("/v1/answer", json=ask)
        assert resp.status_code == 200
        assert "[9]" not in resp.text
        blocks = resp.text.strip().split("\n\n")
        events = [
            (b.split("\n")[0][len("event: ") :], json.loads(b.split("\n")[1][len("data: ") :]))
            for b in blocks
        ]
        done = events[-1][1]
        third = next(p for p in done["passages"] if p["number"] == 3)
        copied, made_up, see = done["sentences"]
        assert (copied["text"], copied["citations"], copied["supported"]) == (
            third["text"],
            [3],
            True,
        )
        assert (made_up["citations"], made_up["supported"]) == ([], False)
        assert see["text"] == "See."
        assert "".join(d["text"] for e, d in events if e == "delta") == done["answer"]
        assert done["tokens"]["prompt"] == 321
        assert done["model"] == "scripted-endpoint"
    await llm.aclose()
