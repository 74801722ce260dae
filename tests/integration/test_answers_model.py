"""Answers on the real local model server (llama.cpp with the packaged SmolLM2-135M):
an answer streams with citations that resolve only to the caller's passages, and a
model server killed mid-stream gives an error event, then answers with ``answer: null``
and the reason (never a 5xx) until the server is back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from hsearch.config import LlmSettings
from hsearch.llm.local import PACKAGED_MODEL_NAME, packaged_model_path
from hsearch.llm.openai_compatible import OpenAICompatibleLLM
from hsearch.llm.protocol import ChatMessage, Usage
from hsearch.local.processes import LOCALHOST, Child, free_port, start_model_server
from tests.unit.api.conftest import api_settings, ingest, serve, sse_events

pytestmark = pytest.mark.integration

DOCS: list[dict[str, Any]] = [
    {"external_id": "paris", "title": "Paris", "text": "Paris is the capital of France."},
    {"external_id": "tokyo", "title": "Tokyo", "text": "Tokyo is the capital of Japan."},
    {"external_id": "rome", "title": "Rome", "text": "Rome is the capital of Italy."},
]


class Server:
    """The model server on a fixed port, to be killed and started again there."""

    def __init__(self, log: Path) -> None:
        self.port = free_port()
        self.log = log
        self.child: Child | None = None

    def start(self) -> str:
        self.child, url = start_model_server(
            packaged_model_path(),
            alias=PACKAGED_MODEL_NAME,
            port=self.port,
            threads=1,
            context=2048,
            log=self.log,
        )
        return url

    def kill(self) -> None:
        assert self.child is not None
        self.child.proc.kill()
        self.child.proc.wait(timeout=30)
        self.child.stop()  # reaped already: closes its log

    def stop(self) -> None:
        if self.child is not None:
            self.child.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = Server(tmp_path_factory.mktemp("model") / "model.log")
    running.start()
    yield running
    running.stop()


class Watched(OpenAICompatibleLLM):
    """The real adapter, telling the test when the first text arrived."""

    def __init__(self, settings: LlmSettings) -> None:
        super().__init__(settings)
        self.writing = asyncio.Event()

    async def stream(
        self, messages: Sequence[ChatMessage], **options: Any
    ) -> AsyncGenerator[str | Usage, None]:
        async for item in super().stream(messages, **options):
            if isinstance(item, str):
                self.writing.set()
            yield item


def settings(server: Server, **llm: Any) -> LlmSettings:
    return LlmSettings(
        base_url=f"http://{LOCALHOST}:{server.port}/v1",
        model=PACKAGED_MODEL_NAME,
        max_retries=0,
        timeout_s=120,
        first_token_timeout_s=60,
        **llm,
    )


async def test_an_answer_streams_with_citations_of_the_callers_passages(
    server: Server, tmp_path: Path
) -> None:
    llm = OpenAICompatibleLLM(settings(server, max_tokens=48))
    async with serve(api_settings(tmp_path), llm=llm) as api:
        await ingest(api, DOCS, api.client)
        other = api.services.tenancy.ensure_tenant("other", actor="test").id
        key = api.services.tenancy.create_key(other, scopes=["ingest"], actor="test").key
        async with api.anonymous() as client:
            client.headers["Authorization"] = f"Bearer {key}"
            await ingest(
                api,
                [{"external_id": "x", "title": "France", "text": "The capital of France is Lyon."}],
                client,
            )
        ask = {"query": "What is the capital of France?", "passages": 3, "stream": True}
        resp = await api.client.post("/v1/answer", json=ask)
        assert resp.status_code == 200, resp.text
        events = sse_events(resp.text)
        names = [name for name, _ in events]
        assert names[0] == "retrieval"
        assert "delta" in names
        assert names[-1] == "done"
        done = events[-1][1]
        assert done["answer"], done
        assert done["model"] == PACKAGED_MODEL_NAME
        assert done["timings"]["first_token_ms"] > 0
        assert done["tokens"]["prompt"] > 0
        assert "".join(d["text"] for n, d in events if n == "delta") == done["answer"]
        numbers = {p["number"] for p in done["passages"]}
        assert {p["external_id"] for p in done["passages"]} <= {"paris", "tokyo", "rome"}
        for citation in done["citations"]:
            assert citation["number"] in numbers
            assert citation["external_id"] in {"paris", "tokyo", "rome"}
        for sentence in done["sentences"]:
            assert set(sentence["citations"]) <= numbers
            assert sentence["supported"] or not sentence["citations"]
    await llm.aclose()


async def test_a_lazy_answer_judged_and_written_by_the_model_within_its_budget(
    server: Server, tmp_path: Path
) -> None:
    llm = OpenAICompatibleLLM(settings(server, max_tokens=48))
    async with serve(api_settings(tmp_path), llm=llm) as api:
        await ingest(api, DOCS, api.client)
        budget = {"relevance_tests": 6, "llm_calls": 3, "tokens": 4000, "seconds": 120}
        ask = {
            "query": "What is the capital of France?",
            "strategy": "lazy",
            "tester": "model",
            "budget": budget,
        }
        resp = await api.client.post("/v1/answer", json=ask)
        assert resp.status_code == 200, resp.text
        done = resp.json()
        report = done["lazy"]
        # The endpoint's own counts, within the budget: the judgements' calls and the
        # answer's.
        spent = report["budget"]
        assert 2 <= spent["llm_calls"]["used"] <= 3
        assert 0 < spent["tokens"]["used"] <= 4000
        assert spent["relevance_tests"]["used"] <= 6
        assert report["tester"] == "model"
        assert done["answer"], done
        numbers = {p["number"] for p in done["passages"]}
        assert {p["external_id"] for p in done["passages"]} <= {"paris", "tokyo", "rome"}
        for sentence in done["sentences"]:
            assert set(sentence["citations"]) <= numbers
    await llm.aclose()


async def test_a_model_server_killed_mid_stream(server: Server, tmp_path: Path) -> None:
    llm = Watched(settings(server, max_tokens=200))
    async with serve(api_settings(tmp_path), llm=llm) as api:
        await ingest(api, DOCS, api.client)
        ask = {"query": "Tell me everything about the capital of France.", "stream": True}
        asking = asyncio.create_task(api.client.post("/v1/answer", json=ask))
        await asyncio.wait_for(llm.writing.wait(), timeout=120)
        server.kill()
        resp = await asking
        assert resp.status_code == 200
        names = [name for name, _ in sse_events(resp.text)]
        assert names[-2:] == ["error", "done"], names
        error = sse_events(resp.text)[-2][1]
        assert error["error"] == "model_unavailable"
        # While it is down: the passages, answer null and the reason.
        down = await api.client.post("/v1/answer", json={"query": "capital of France"})
        assert down.status_code == 200
        assert down.json()["answer"] is None
        assert down.json()["degraded"][0].startswith("model_unavailable")
        assert down.json()["passages"]
        ready = (await api.client.get("/readyz")).json()
        assert ready["components"]["model"]["status"] != "ok"
        # Started again: answers again.
        server.start()
        back = await api.client.post("/v1/answer", json={"query": "capital of France"})
        assert back.status_code == 200
        assert back.json()["answer"], back.json()
        ready = (await api.client.get("/readyz")).json()
        assert ready["components"]["model"]["status"] == "ok"
    await llm.aclose()
