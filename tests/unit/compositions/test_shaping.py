"""Expansion and listwise reranking: the model's replies parsed as untrusted input, and
the answer service using them (a scripted model)."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.orm import Session, sessionmaker

from hsearch.compositions.answers.models import AnswerRequest
from hsearch.compositions.answers.shaping import parse_order, parse_queries
from hsearch.llm.protocol import ChatMessage
from hsearch.llm.scripted import ScriptedLLM
from tests.unit.compositions.test_answer_service import answers
from tests.unit.search.corpus import TENANT


def test_expansions_are_lines_without_bullets_repeats_or_the_question() -> None:
    reply = (
        "1. rivers to the sea\n- Rivers To The Sea\n\nwhere do rivers flow?\n"
        + "x" * 400
        + "\n* lakes"
    )
    assert parse_queries(reply, question="Where do rivers flow?") == ["rivers to the sea", "lakes"]


def test_an_order_keeps_only_passages_it_was_shown_each_once() -> None:
    assert parse_order("3 1 9 3 0 -2", count=4) == [2, 0, 1, 3]
    assert parse_order("I think the second is best", count=3) is None
    assert parse_order("[2] > [1]", count=2) == [1, 0]


@given(st.text(max_size=80), st.integers(1, 8))
def test_any_reply_gives_a_permutation_or_nothing(reply: str, count: int) -> None:
    order = parse_order(reply, count=count)
    assert order is None or sorted(order) == list(range(count))


def scripted(messages: Sequence[ChatMessage]) -> str:
    system = messages[0].content
    if "other ways to search" in system:
        return "mountains\nrivers and the sea"
    if "Order the numbered passages" in system:
        return "2 1"
    return "Rivers flow into the sea."


async def test_expansion_and_reranking_shape_the_passages(sessions: sessionmaker[Session]) -> None:
    llm = ScriptedLLM(scripted)
    service = answers(sessions, llm)
    plain = await service.answer(AnswerRequest(tenant_id=TENANT, query="rivers", passages=2))
    assert plain.tokens.calls == 1
    expanded = await service.answer(
        AnswerRequest(tenant_id=TENANT, query="rivers", passages=4, expand=True)
    )
    assert expanded.tokens.calls == 2
    assert [p.rank for p in expanded.passages] == list(range(1, len(expanded.passages) + 1))
    wide = await service.answer(AnswerRequest(tenant_id=TENANT, query="rivers", passages=4))
    rank = {p.external_id: p.rank for p in expanded.passages}
    assert rank["mountains"] <= {p.external_id: p.rank for p in wide.passages}["mountains"]
    reranked = await service.answer(
        AnswerRequest(tenant_id=TENANT, query="rivers", passages=2, llm_rerank=True)
    )
    assert reranked.tokens.calls == 2
    assert [p.external_id for p in reranked.passages] == [p.external_id for p in plain.passages][
        ::-1
    ]
    assert [p.rank for p in reranked.passages] == [1, 2]


def test_the_question_s_own_list_weighs_as_much_as_all_expansions() -> None:
    from hsearch.compositions.answers.service import fuse_passages
    from hsearch.search.models import Explanation
    from hsearch.search.passages import Passage
    from hsearch.types import FusionMethod

    def passage(chunk: str) -> Passage:
        explanation = Explanation(FusionMethod.RRF, 0.0, {})
        return Passage(0, chunk, chunk, chunk, chunk, chunk, 1.0, explanation, 0, 1)

    own = [passage("a"), passage("b")]
    first, second = [passage("c"), passage("b")], [passage("c"), passage("d")]
    fused = fuse_passages([own, first, second], limit=3)
    assert [p.chunk_id for p in fused] == ["b", "a", "c"]
    assert [p.rank for p in fused] == [1, 2, 3]
