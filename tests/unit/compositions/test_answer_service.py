"""The answer service's one code path: a closed stream cancels the model's request;
the generation cap degrades instead of queueing."""

from __future__ import annotations

import asyncio
import contextlib
import re

import anyio
import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.compositions.answers.models import AnswerRequest, Delta, Finished, Retrieved
from hsearch.compositions.answers.packing import estimate_tokens
from hsearch.compositions.answers.service import AnswerService
from hsearch.config import LlmSettings, SearchSettings
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import QuotaExceededError
from hsearch.lexical.statistics import LexicalStatistics
from hsearch.llm.scripted import ScriptedLLM
from hsearch.ratelimit.tokens import TokenQuota
from hsearch.search.service import SearchService
from tests.unit.budget import UNHURRIED
from tests.unit.search.corpus import TENANT, index


def answers(
    sessions: sessionmaker[Session],
    llm: ScriptedLLM,
    quota: TokenQuota | None = None,
    **settings: int,
) -> AnswerService:
    embedder = FakeEmbedder()
    search = SearchService(
        embedder=embedder,
        store=index(sessions, embedder),
        statistics=LexicalStatistics(sessions),
        settings=SearchSettings(**UNHURRIED),
    )
    return AnswerService(
        retrieval=search.retrieval, llm=llm, settings=LlmSettings(**settings), quota=quota
    )


async def test_closing_the_stream_cancels_the_model(sessions: sessionmaker[Session]) -> None:
    llm = ScriptedLLM("Rivers flow into the sea. " * 20, chunk=5, delay_s=0.01)
    service = answers(sessions, llm)
    events = service.events(AnswerRequest(tenant_id=TENANT, query="rivers"))
    async with contextlib.aclosing(events):
        assert isinstance(await anext(events), Retrieved)
        assert isinstance(await anext(events), Delta)
    assert llm.cancelled == 1


async def test_a_client_that_goes_away_pays_for_what_the_model_read_and_wrote(
    sessions: sessionmaker[Session],
) -> None:
    llm = ScriptedLLM("Rivers flow into the sea. " * 20, chunk=5, delay_s=0.01)
    quota = TokenQuota(per_day=40)  # less than any answer's prompt
    service = answers(sessions, llm, quota)
    request = AnswerRequest(tenant_id=TENANT, query="rivers")
    # Gone before the model was asked: nothing was used, nothing is charged.
    events = service.events(request)
    async with contextlib.aclosing(events):
        assert isinstance(await anext(events), Retrieved)
    await quota.check(TENANT)
    # Gone mid-answer, the way a server cancels a disconnected stream: the call the
    # endpoint never counted is charged at its high estimate, and the day is used up.
    events = service.events(request)
    with anyio.CancelScope() as scope:
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, Delta):
                    scope.cancel()
                    await anyio.sleep(1)  # cancelled here, as a disconnect would
    assert llm.cancelled == 1
    with pytest.raises(QuotaExceededError):
        await quota.check(TENANT)


async def test_past_the_generation_cap_an_answer_degrades(sessions: sessionmaker[Session]) -> None:
    llm = ScriptedLLM("Rivers flow into the sea.", delay_s=0.05)
    service = answers(sessions, llm, max_concurrent=1)
    request = AnswerRequest(tenant_id=TENANT, query="rivers")
    first = service.events(request)
    async with contextlib.aclosing(first):
        await anext(first)
        await anext(first)  # holds the one slot
        second = await service.answer(request)
        assert second.answer is None
        assert second.degraded[0].startswith("model_busy")
        assert second.passages
    third = await service.answer(request)
    assert third.answer == "Rivers flow into the sea.[1]"


async def test_a_follow_up_is_rewritten_to_stand_alone(sessions: sessionmaker[Session]) -> None:
    from hsearch.compositions.answers.models import Speaker, Turn

    llm = ScriptedLLM(
        lambda m: "Where do rivers flow?" if "Rewrite" in m[0].content else "Into the sea."
    )
    service = answers(sessions, llm)
    answer = await service.answer(
        AnswerRequest(
            tenant_id=TENANT,
            query="And where do they flow?",
            messages=(
                Turn(Speaker.USER, "Tell me about rivers"),
                Turn(Speaker.ASSISTANT, "Rivers flow."),
            ),
        )
    )
    assert answer.standalone_query == "Where do rivers flow?"
    assert answer.query == "And where do they flow?"
    events = [e async for e in service.events(AnswerRequest(tenant_id=TENANT, query="rivers"))]
    assert isinstance(events[-1], Finished)
    await asyncio.sleep(0)


async def test_a_looping_model_is_stopped_and_its_answer_flagged(
    sessions: sessionmaker[Session],
) -> None:
    loop = "Rivers flow into the sea. " + "of the river " * 200
    llm = ScriptedLLM(loop, chunk=5)
    answer = await answers(sessions, llm).answer(AnswerRequest(tenant_id=TENANT, query="rivers"))
    assert answer.answer is not None
    assert answer.answer.startswith("Rivers flow into the sea.[1]")
    # Cut once four units were written (at most one delta past them), not at the end.
    assert len(answer.answer) < len("Rivers flow into the sea.[1] ") + 5 * len("of the river ")
    assert answer.degraded[0].startswith("model_repetition")
    assert llm.cancelled == 1
    # Cut before the endpoint counted it, the call is charged at its high estimate.
    assert answer.tokens.prompt is not None
    assert answer.tokens.prompt > 0
    written = re.sub(r"\[\d+\]", "", answer.answer)  # the check's markers, not the model's
    assert loop.startswith(written)
    assert answer.tokens.completion == estimate_tokens(written)
    # A model that does not loop is not flagged.
    plain = await answers(sessions, ScriptedLLM("Rivers flow into the sea.")).answer(
        AnswerRequest(tenant_id=TENANT, query="rivers")
    )
    assert not any(d.startswith("model_repetition") for d in plain.degraded)
