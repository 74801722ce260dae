"""bench.answers --strategy lazy scores: context recall against the judged passages, the
context's tokens, answer recall against gold strings, calls and tokens from the lazy
report when there is one."""

from __future__ import annotations

from bench.lazy_answers import _score, _summary

from hsearch.compositions.answers.models import (
    Answer,
    AnswerStrategy,
    AnswerTimings,
    AnswerTokens,
    ContextPassage,
)
from hsearch.compositions.lazy.budget import BudgetLine
from hsearch.compositions.lazy.models import LazyReport, Stage


def passage(number: int, external_id: str, text: str) -> ContextPassage:
    return ContextPassage(
        number=number,
        chunk_id=f"c{number}",
        document_id=f"d{external_id}",
        external_id=external_id,
        title="",
        text=text,
        score=1.0,
        rank=number,
        char_start=None,
        char_end=None,
    )


def answer(text: str | None, *ids: str, lazy: LazyReport | None = None) -> Answer:
    return Answer(
        query="q",
        standalone_query="q",
        answer=text,
        sentences=(),
        citations=(),
        passages=tuple(passage(n, x, "abc " * 3) for n, x in enumerate(ids, 1)),
        legs=(),
        degraded=(),
        model=None,
        prompt_version=None,
        timings=AnswerTimings(total_ms=100.0),
        tokens=AnswerTokens(prompt=30, completion=5, calls=1),
        strategy=AnswerStrategy.LAZY if lazy else AnswerStrategy.DEFAULT,
        lazy=lazy,
    )


def test_context_recall_answer_recall_and_the_lazy_budget() -> None:
    judged = {"a": 1.0, "b": 1.0, "x": 0.0}
    base = _score(answer("It was Paris.", "a", "x"), judged, ["paris"])
    assert not base.gold_in_context
    assert _score(answer(None, "a"), judged, ["abc"]).gold_in_context
    assert base.context_recall == 0.5
    assert base.context_tokens == 2 * 4  # "abc abc abc " is 12 ASCII characters
    assert base.recall
    assert (base.calls, base.tokens) == (1, 35)

    report = LazyReport(
        budget={
            "relevance_tests": BudgetLine(12, 100),
            "llm_calls": BudgetLine(3, 4),
            "tokens": BudgetLine(900, 6000),
            "elapsed_ms": BudgetLine(50.0, 25000.0),
        },
        stopped=Stage.SUFFICIENT,
        levels={},
        depth=1,
        tested=12,
        relevant=2,
        claims=(),
        tester="cheap",
    )
    lazy = _score(answer(None, "a", "b", lazy=report), judged, ["paris"])
    assert lazy.context_recall == 1.0
    assert not lazy.recall
    assert (lazy.calls, lazy.tokens, lazy.tests, lazy.stopped) == (3, 900, 12, "sufficient")
    assert _score(answer(None, "a"), {}, []).context_recall is None

    summary = _summary([base, lazy], generate=True)
    assert summary["context_recall"] == 0.75
    assert summary["answer_recall"] == 0.5
    assert summary["llm_calls"] == 2.0
    assert summary["stopped"] == {"": 1, "sufficient": 1}
    assert _summary([base], generate=False)["answer_recall"] is None
