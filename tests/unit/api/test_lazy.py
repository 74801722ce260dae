"""``POST /v1/answer`` with ``strategy: lazy`` through the API (embedded parts, the fake
encoder, a scripted model): the context reaches a document only a link leads to, under
the request's filter and the tenant's own data; the budget is reported and bounded;
progress is streamed before the passages; the answer is written from the claims with
citations checked by code; a budget past the server's maxima is refused."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hsearch.cache.memory import InMemoryCacheBackend
from hsearch.llm.protocol import ChatMessage
from hsearch.llm.scripted import ScriptedLLM
from hsearch.types import Scope
from tests.unit.api.conftest import Api, api_settings, ingest, serve, sse_events

QUESTION = "Who was the spouse of the director of Night Train?"
DOCS: list[dict[str, Any]] = [
    {
        "external_id": "film",
        "title": "Night Train",
        "text": "Night Train is a film directed by Anna Berg. It was shot in winter.",
        "links": [{"target": "anna"}],
        "tags": ["film"],
    },
    # Shares no term with the question: only the film's link leads to it.
    {
        "external_id": "anna",
        "title": "Anna Berg",
        "text": "Anna Berg married Karl Holm in Oslo.",
        "tags": ["person"],
    },
    {
        "external_id": "milk",
        "title": "Cheese",
        "text": "Cheese is made from milk.",
        "tags": ["food"],
    },
]

# Matches of the question's words that are not about it: tested, found irrelevant.
NOISE: list[dict[str, Any]] = [
    {
        "external_id": f"train{i}",
        "title": f"Timetable {i}",
        "text": f"The night train number {i} leaves at ten.",
        "tags": ["rail"],
    }
    for i in range(4)
]


def lazy(**body: Any) -> dict[str, Any]:
    return {"query": QUESTION, "mode": "keyword", "strategy": "lazy", "generate": False, **body}


async def ask(api: Api, **body: Any) -> dict[str, Any]:
    resp = await api.client.post("/v1/answer", json=lazy(**body))
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


def documents(result: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(p["external_id"] for p in result["passages"]))


async def test_the_context_reaches_what_only_a_link_leads_to(api: Api) -> None:
    await ingest(api, DOCS)
    default = await api.client.post(
        "/v1/answer", json={"query": QUESTION, "mode": "keyword", "generate": False}
    )
    assert documents(default.json()) == ["film"]

    result = await ask(api)
    assert result["strategy"] == "lazy"
    assert result["answer"] is None
    assert result["degraded"] == []
    assert documents(result) == ["film", "anna"]
    report = result["lazy"]
    assert report["levels"]["retrieval"] == 1
    assert report["levels"]["links"] == 1
    assert report["depth"] == 1
    assert report["tested"] == report["budget"]["relevance_tests"]["used"] == 2
    assert report["relevant"] == 2
    assert report["tester"] == "cheap"
    assert report["budget"]["relevance_tests"]["allowed"] == 100
    assert report["budget"]["llm_calls"]["used"] == 0
    # Each passage is a claim: a verbatim span of its chunk, placed in its document.
    anna = next(p for p in result["passages"] if p["external_id"] == "anna")
    assert anna["text"] == "Anna Berg married Karl Holm in Oslo."
    assert (anna["char_start"], anna["char_end"]) == (0, len(anna["text"]))
    claimed = {c["chunk_id"] for c in report["claims"]}
    assert anna["chunk_id"] in claimed


async def test_the_filter_and_the_tenant_bound_what_is_reached(api: Api) -> None:
    await ingest(api, DOCS)
    result = await ask(api, filter={"tags": {"contains": "film"}})
    assert documents(result) == ["film"]  # the link's target is outside the filter
    assert result["lazy"]["levels"]["links"] == 0

    tenancy = api.services.tenancy
    tenancy.ensure_tenant("other", actor="test")
    key = tenancy.create_key("other", scopes=list(Scope), actor="test").key
    async with api.anonymous() as other:
        resp = await other.post(
            "/v1/answer", json=lazy(), headers={"Authorization": f"Bearer {key}"}
        )
    assert resp.status_code == 200, resp.text
    assert resp.json()["passages"] == []
    assert resp.json()["lazy"]["tested"] == 0


async def test_a_budget_past_the_maxima_is_refused_naming_the_field(api: Api) -> None:
    resp = await api.client.post("/v1/answer", json=lazy(budget={"relevance_tests": 100_000}))
    assert resp.status_code == 422, resp.text
    assert "budget.relevance_tests" in resp.text
    resp = await api.client.post("/v1/answer", json=lazy(tester="oracle"))
    assert resp.status_code == 422


async def test_progress_is_streamed_before_the_passages(api: Api) -> None:
    await ingest(api, DOCS)
    resp = await api.client.post("/v1/answer", json=lazy(stream=True))
    assert resp.status_code == 200, resp.text
    events = sse_events(resp.text)
    names = [name for name, _ in events]
    first_retrieval = names.index("retrieval")
    assert names[0] == "progress"
    assert events[0][1]["stage"] == "starting"
    assert set(names[:first_retrieval]) == {"progress"}
    assert events[first_retrieval - 1][1]["stage"] in ("exhausted", "sufficient")
    assert events[first_retrieval - 1][1]["relevant"] == 2
    assert names[-1] == "done"
    assert events[-1][1]["lazy"]["relevant"] == 2


async def test_the_answer_is_written_from_the_claims_and_its_citations_checked(
    tmp_path: Path,
) -> None:
    model = ScriptedLLM("Anna Berg married Karl Holm [2]. The moon is cheese [1].")
    async with serve(api_settings(tmp_path), llm=model) as api:
        await ingest(api, DOCS)
        result = await ask(api, generate=True)
        assert result["answer"] is not None
        first, second = result["sentences"]
        anna = next(p["number"] for p in result["passages"] if p["external_id"] == "anna")
        assert first["citations"] == [anna]
        assert first["supported"]
        assert second["citations"] == []
        assert not second["supported"]
        budget = result["lazy"]["budget"]
        assert budget["llm_calls"]["used"] == 1
        assert 0 < budget["tokens"]["used"] <= budget["tokens"]["allowed"]
        assert len(model.requests) == 1
        prompt = model.requests[0][-1].content
        assert "Anna Berg married Karl Holm in Oslo." in prompt

        # No call left for the answer: the context, no model call, and why.
        spent = await ask(api, generate=True, budget={"llm_calls": 0})
        assert spent["answer"] is None
        assert spent["degraded"][0].startswith("budget_spent")
        assert documents(spent) == ["film", "anna"]
        assert len(model.requests) == 1


async def test_the_concept_index_leads_to_a_chunk_no_link_and_no_term_reaches(api: Api) -> None:
    holm = {
        "external_id": "holm",
        "title": "Karl Holm",
        "text": "Karl Holm was a painter of the northern coast.",
        "tags": ["person"],
    }
    await ingest(api, [*DOCS, holm])
    stats = await api.client.get("/v1/stats")
    assert stats.status_code == 200, stats.text
    result = await ask(api)
    assert documents(result) == ["film", "anna", "holm"]
    report = result["lazy"]
    assert report["levels"]["concepts"] + report["levels"]["communities"] >= 1
    assert report["depth"] == 2


async def test_a_follow_up_reuses_the_turn_it_names_on_the_same_data_only(tmp_path: Path) -> None:
    cheeses = [
        {"external_id": f"cheese{i}", "title": f"Cheese {i}", "text": f"Cheese {i} is soft."}
        for i in range(4)
    ]
    film = {
        **DOCS[0],
        "links": [{"target": x} for x in ("anna", "cheese0", "cheese1", "cheese2", "cheese3")],
    }
    async with serve(api_settings(tmp_path), cache=InMemoryCacheBackend()) as api:
        await ingest(api, [film, *DOCS[1:], *NOISE, *cheeses])
        first = await ask(api)
        session = first["lazy"]["session"]
        assert session
        assert first["lazy"]["followed"] is False

        again = await ask(api, follow_up=session)
        assert again["lazy"]["followed"] is True
        # The first turn's relevant chunks, known without a read.
        assert again["lazy"]["levels"]["memory"] == first["lazy"]["relevant"]
        assert documents(again) == documents(first)
        assert {"film", "anna"} <= set(documents(first))
        # What the first turn reached from the film and found irrelevant (the cheeses)
        # is not tested again when the film leads there again.
        assert first["lazy"]["tested"] > first["lazy"]["relevant"]
        assert again["lazy"]["tested"] < first["lazy"]["tested"]

        # What is kept is ids, read again: a chunk gone from the store (a write the data
        # version has not caught up with) is never served from the memory.
        anna_id = next(p["document_id"] for p in first["passages"] if p["external_id"] == "anna")
        api.services.store.delete_document_chunks(tenant_id="default", document_id=anna_id)
        gone = await ask(api, follow_up=session)
        assert gone["lazy"]["followed"] is True
        assert "anna" not in documents(gone)

        # Another tenant naming the session reuses nothing.
        tenancy = api.services.tenancy
        tenancy.ensure_tenant("other", actor="test")
        key = tenancy.create_key("other", scopes=list(Scope), actor="test").key
        async with api.anonymous() as other:
            resp = await other.post(
                "/v1/answer",
                json=lazy(follow_up=session),
                headers={"Authorization": f"Bearer {key}"},
            )
        assert resp.status_code == 200, resp.text
        assert resp.json()["lazy"]["followed"] is False
        assert resp.json()["passages"] == []

        # Another filter, or a write of the tenant's data since: a fresh search.
        filtered = await ask(api, follow_up=session, filter={"tags": {"contains": "film"}})
        assert filtered["lazy"]["followed"] is False
        deleted = await api.client.delete("/v1/documents/film")
        assert deleted.status_code in (200, 202, 204), deleted.text
        after = await ask(api, follow_up=session)
        assert after["lazy"]["followed"] is False
        assert "film" not in documents(after)

        bad = await api.client.post("/v1/answer", json=lazy(follow_up="no spaces allowed"))
        assert bad.status_code == 422


async def token(api: Api, **body: Any) -> str:
    resp = await api.client.post("/v1/tokens", json=body)
    assert resp.status_code == 201, resp.text
    return str(resp.json()["token"])


async def ask_as(api: Api, bearer: str, **body: Any) -> dict[str, Any]:
    async with api.anonymous() as client:
        resp = await client.post(
            "/v1/answer", json=lazy(**body), headers={"Authorization": f"Bearer {bearer}"}
        )
    assert resp.status_code == 200, resp.text
    result: dict[str, Any] = resp.json()
    return result


async def test_a_search_token_bounds_the_sources_and_learns_nothing_of_what_it_hides(
    api: Api,
) -> None:
    await ingest(api, [*DOCS, *NOISE])
    everything = await ask(api)
    assert len(documents(everything)) > 2

    one = await ask_as(api, await token(api, filter={"tags": {"contains": "rail"}}, max_top_k=1))
    assert len({p["chunk_id"] for p in one["passages"]}) == 1

    # A token that sees only the cheese: the question's concepts match hidden documents,
    # which are never tested nor counted.
    food = await ask_as(api, await token(api, filter={"tags": {"contains": "food"}}))
    assert food["passages"] == []
    report = food["lazy"]
    assert report["tested"] == 0
    assert set(report["levels"].values()) == {0}
    assert report["claims"] == []


async def test_a_partial_budget_takes_the_server_s_defaults_and_mismatched_fields_are_refused(
    api: Api,
) -> None:
    await ingest(api, DOCS)
    result = await ask(api, budget={"relevance_tests": 10})
    budget = result["lazy"]["budget"]
    assert budget["relevance_tests"]["allowed"] == 10
    assert budget["llm_calls"]["allowed"] == 4  # lazy.llm_calls
    assert budget["elapsed_ms"]["allowed"] == 25_000
    for body, field in (
        ({"strategy": "default", "budget": {"relevance_tests": 3}}, "budget"),
        ({"strategy": "default", "follow_up": "abc"}, "follow_up"),
        ({"expand": True}, "expand"),
        ({"passages": 3}, "passages"),
        ({"budget": {"seconds": True}}, "seconds"),
        ({"budget": {"llm_calls": -1}}, "llm_calls"),
    ):
        resp = await api.client.post("/v1/answer", json={**lazy(), **body})
        assert resp.status_code == 422, (body, resp.text)
        assert field in resp.text


def scripted(messages: Sequence[ChatMessage]) -> str:
    """A model for each prompt: the rewrite, the relevance judgements, the answer."""
    system = messages[0].content
    if "judge whether passages help" in system:
        return "\n".join(f"{n}: yes" for n in range(1, 10))
    if "<passage" in messages[-1].content:
        return "Anna Berg married Karl Holm [1]."
    return "Who was the spouse of the director of Night Train?"


async def test_every_model_call_is_paid_from_one_budget(tmp_path: Path) -> None:
    model = ScriptedLLM(scripted)
    async with serve(api_settings(tmp_path), llm=model) as api:
        await ingest(api, [*DOCS, *NOISE])
        turns = [{"role": "user", "content": "Tell me about Night Train."}]
        body = {"generate": True, "tester": "model", "messages": turns}

        result = await ask(api, **body, budget={"llm_calls": 3, "tokens": 20_000})
        spent = result["lazy"]["budget"]
        # The rewrite, the judgements and the answer: each a call paid from the budget.
        assert spent["llm_calls"]["used"] == len(model.requests) <= 3
        assert result["tokens"]["calls"] == len(model.requests)
        assert result["answer"] is not None
        assert 0 < spent["tokens"]["used"] <= 20_000
        # Every call's tokens, as the endpoint counted them, are the answer's too (what a
        # tenant's token quota is charged).
        assert (
            result["tokens"]["prompt"] + result["tokens"]["completion"] == spent["tokens"]["used"]
        )

        # One call: the answer's, held first; no rewrite, no model judgement.
        model.requests.clear()
        one = await ask(api, **body, budget={"llm_calls": 1})
        assert len(model.requests) == 1
        assert "<passage" in model.requests[0][-1].content
        assert one["answer"] is not None
        assert one["lazy"]["budget"]["llm_calls"]["used"] == 1
