"""Lazy search beside the baseline answer (``python -m bench.answers --strategy lazy``).

On a BEIR folder with gold answers (and ``edges.tsv``, ingested as the documents'
links), every selected question twice through :class:`AnswerService`: the baseline (the
default ``/v1/answer``: retrieval, packing, the graph leg as its default) and lazy
search (``strategy: lazy``) at each budget given (relevance tests; the default budget
without ``--budget``), both with the same ``--context-tokens``. Per strategy:

* ``context_recall``: per question, the share of its judged passages (qrels) among the
  passages given to the model (their documents), averaged;
* ``context_tokens``: the context's tokens per question (as packing counts them);
* ``answer_recall``: the share of answers holding a gold string (``--no-generate``: not
  measured, ``null``); ``gold_in_context``: the share of contexts holding one (what a
  model that reads well could answer from);
* ``llm_calls`` and ``tokens`` per question (the answer's and every lazy step's);
* ``answer_ms``: ``{p50, p95}`` of the whole request;
* lazy only: relevance tests per question, and how often it stopped for each reason.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.datasets import Dataset
from bench.interrupt import progress
from bench.metrics import percentile
from bench.runner import TENANT
from hsearch.compositions.answers.models import Answer, AnswerRequest, AnswerStrategy
from hsearch.compositions.answers.packing import estimate_tokens
from hsearch.compositions.answers.service import AnswerService
from hsearch.compositions.lazy.budget import LazyLimits
from hsearch.config import LazySettings

__all__ = ["compare", "strategy_arguments"]


def strategy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strategy", choices=("default", "lazy"), default="default",
        help="lazy: lazy search beside the baseline answer, at equal context tokens",
    )  # fmt: skip
    parser.add_argument(
        "--budget", type=lambda s: [int(x) for x in s.split(",")], metavar="N[,N...]",
        help="lazy search's relevance tests (one run a budget; default: the server's)",
    )  # fmt: skip
    parser.add_argument(
        "--tester", choices=("cheap", "model"), default=None, help="lazy search's tester"
    )
    parser.add_argument(
        "--no-generate", action="store_true",
        help="the context only: no answer is written (no model needed)",
    )  # fmt: skip


@dataclass
class _One:
    context_recall: float | None
    context_tokens: int
    answered: bool
    recall: bool
    calls: int
    tokens: int
    answer_ms: float
    tests: int = 0
    stopped: str = ""
    gold_in_context: bool = False


def _contains(answer: str | None, gold: Sequence[str]) -> bool:
    from bench.answers import normalise  # noqa: PLC0415  # the scorer's, one definition

    if not answer:
        return False
    said = normalise(answer)
    return any(normalise(g) and normalise(g) in said for g in gold)


def _score(answer: Answer, judged: Mapping[str, float], gold: Sequence[str]) -> _One:
    wanted = {doc for doc, grade in judged.items() if grade > 0}
    given = {p.external_id for p in answer.passages}
    lazy = answer.lazy
    if lazy is not None:
        calls = int(lazy.budget["llm_calls"].used)
        tokens = int(lazy.budget["tokens"].used)
    else:
        calls = answer.tokens.calls
        tokens = (answer.tokens.prompt or 0) + (answer.tokens.completion or 0)
    return _One(
        context_recall=len(wanted & given) / len(wanted) if wanted else None,
        context_tokens=sum(estimate_tokens(p.text) for p in answer.passages),
        answered=answer.answer is not None,
        recall=_contains(answer.answer, gold),
        calls=calls,
        tokens=tokens,
        answer_ms=answer.timings.total_ms,
        tests=0 if lazy is None else int(lazy.budget["relevance_tests"].used),
        stopped="" if lazy is None else lazy.stopped.value,
        gold_in_context=_contains(" ".join(p.text for p in answer.passages), gold),
    )


def _summary(scored: Sequence[_One], *, generate: bool) -> dict[str, Any]:
    recalls = [s.context_recall for s in scored if s.context_recall is not None]
    times = [s.answer_ms for s in scored]
    out: dict[str, Any] = {
        "questions": len(scored),
        "context_recall": round(statistics.fmean(recalls), 5) if recalls else None,
        "context_tokens": round(statistics.fmean(s.context_tokens for s in scored), 1),
        "answer_recall": round(sum(s.recall for s in scored) / len(scored), 5)
        if generate
        else None,
        "answered": sum(s.answered for s in scored),
        "gold_in_context": round(sum(s.gold_in_context for s in scored) / len(scored), 5),
        "llm_calls": round(statistics.fmean(s.calls for s in scored), 3),
        "tokens": round(statistics.fmean(s.tokens for s in scored), 1),
        "answer_ms": {"p50": percentile(times, 50), "p95": percentile(times, 95)},
    }
    if any(s.stopped for s in scored):
        out["relevance_tests"] = round(statistics.fmean(s.tests for s in scored), 2)
        out["stopped"] = dict(Counter(s.stopped for s in scored))
    return out


async def _ask(
    answers: AnswerService,
    dataset: Dataset,
    query_ids: Sequence[str],
    gold: Mapping[str, Sequence[str]],
    *,
    label: str,
    make: Any,
    generate: bool,
) -> dict[str, Any]:
    scored: list[_One] = []
    started = time.perf_counter()
    for n, qid in enumerate(query_ids, 1):
        answer = await answers.answer(make(dataset.queries[qid]))
        scored.append(_score(answer, dataset.qrels.get(qid, {}), gold.get(qid, [])))
        if n % 20 == 0 or n == len(query_ids):
            rate = n / (time.perf_counter() - started)
            progress(f"  {label}: {n}/{len(query_ids)} ({rate:.2f} questions/s)")
    return _summary(scored, generate=generate)


async def compare(
    answers: AnswerService,
    dataset: Dataset,
    query_ids: Sequence[str],
    gold: Mapping[str, Sequence[str]],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The baseline, then lazy search at each budget (module docstring), in one event
    loop (the model's HTTP client is bound to the loop it was first used in)."""
    generate = not args.no_generate
    defaults = LazySettings()

    def baseline(query: str) -> AnswerRequest:
        return AnswerRequest(
            tenant_id=TENANT,
            query=query,
            passages=args.passages,
            generate=generate,
            context_tokens=args.context_tokens,
        )

    result: dict[str, Any] = {
        "baseline": await _ask(
            answers, dataset, query_ids, gold, label="baseline", make=baseline, generate=generate
        )
    }
    budgets = args.budget or [defaults.relevance_tests]
    runs: dict[str, Any] = {}
    for tests in budgets:
        limits = LazyLimits(
            relevance_tests=tests,
            llm_calls=defaults.max_llm_calls,
            tokens=defaults.max_tokens,
            seconds=defaults.seconds,
        )

        def lazy(query: str, limits: LazyLimits = limits) -> AnswerRequest:
            return AnswerRequest(
                tenant_id=TENANT,
                query=query,
                strategy=AnswerStrategy.LAZY,
                generate=generate,
                context_tokens=args.context_tokens,
                budget=limits,
                tester=args.tester,
            )

        runs[str(tests)] = await _ask(
            answers, dataset, query_ids, gold, label=f"lazy {tests}", make=lazy, generate=generate
        )
    result["lazy"] = runs[str(budgets[0])]
    if len(budgets) > 1:
        result["lazy_budgets"] = runs
    return result
