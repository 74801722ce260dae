"""Answers with citations, measured through the product's code on BEIR folders that hold
gold answers (``answers.jsonl``).

For each folder: a throw-away stack (as ``bench.relevance`` builds it: SQLite, a Milvus
Lite server, the real ingestion path), then every selected question through
:meth:`AnswerService.answer` (retrieval, packing, the model, citations checked by code)
against the local model server (llama.cpp with the packaged SmolLM2-135M, started here)
or any OpenAI-compatible endpoint (``--base-url``, ``--model``, ``--api-key``).

Scores, per folder:

* ``answer_recall``: the share of questions whose answer contains a gold string
  (both normalised: NFKC, case folded, punctuation and white space collapsed);
* ``citation_precision``: the share of citations that are right (a cited passage is
  right when it is a judged passage of the question or contains a gold string);
  ``citation_recall``: per question, the share of the right passages given to the model
  that the answer cites (questions with none left out), averaged; ``citation_f1``;
* ``unsupported_share``: the share of sentences no passage supports;
* ``time_to_first_token_ms`` and ``answer_ms`` (``{p50, p95}``), ``llm_calls``,
  ``tokens_in`` and ``tokens_out`` per question.

``baseline`` scores the same answers citing the top-ranked passage for every sentence.
``--thresholds`` replays the citation check at other support thresholds on the same
answers (``sweep``), which is how the default threshold is chosen.

    python -m bench.answers --dataset ../shared/datasets/en-musique-train-100 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import sys
import tempfile
import time
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.datasets import DATASETS_ROOT, DEFAULT_SEED, Dataset, load_dataset, select_queries
from bench.interrupt import progress
from bench.lazy_answers import compare, strategy_arguments
from bench.metrics import percentile
from bench.runner import MILVUS_STOP_SECONDS, TENANT, Options, build_settings, ingest
from hsearch.compositions.answers.citations import check_sentence
from hsearch.compositions.answers.models import Answer, AnswerRequest
from hsearch.compositions.answers.prompts import ANSWER_PROMPT_VERSION
from hsearch.compositions.answers.service import AnswerService, CitationSettings
from hsearch.config import LazySettings, LlmSettings
from hsearch.db.migrate import upgrade_database
from hsearch.llm.local import PACKAGED_MODEL_NAME, packaged_model_path
from hsearch.llm.openai_compatible import OpenAICompatibleLLM
from hsearch.local.processes import Child, start_milvus_lite, start_model_server
from hsearch.runtime import Services, build_services

DEFAULT_THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)
POLICIES: dict[str, dict[str, Any]] = {
    "markers": {"fill": False, "max_citations": 3},
    "fill2": {"fill": True, "max_citations": 2},
    "fill3": {"fill": True, "max_citations": 3},
    "rank1": {"fill": False, "max_citations": 3, "by_rank": True},
    "rank-fill2": {"fill": True, "max_citations": 2, "by_rank": True},
}
"""Citation rules replayed beside the thresholds: the model's supported markers (else
the best supporting passage), or every supporting passage up to 2 or 3."""
_PUNCT = re.compile(r"[\W_]+", re.UNICODE)


def normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_PUNCT.sub(" ", folded).split())


def _markers_out(text: str) -> str:
    return re.sub(r"\[\d+\]", "", text)


def load_answers(path: Path) -> dict[str, list[str]]:
    gold: dict[str, list[str]] = {}
    with (path / "answers.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                gold[str(row["query_id"])] = [*row["answers"], *row.get("answers_en", [])]
    return gold


@dataclass
class Scored:
    """One question's answer, as the scores need it."""

    answered: bool
    recall: bool
    sentences: list[tuple[str, tuple[int, ...], tuple[int, ...]]]
    """Each sentence: text, the model's markers, the checked citations (numbers)."""
    passages: list[str]
    """The context passages' texts (number n at n - 1)."""
    right: set[int]
    """The numbers of the right passages in the context."""
    ttft_ms: float | None
    answer_ms: float
    tokens_in: int
    tokens_out: int
    unsupported: int
    calls: int = 1


@dataclass
class Totals:
    questions: int = 0
    citations: int = 0
    right_citations: int = 0
    recalls: list[float] = field(default_factory=list)

    def add(self, cited: Sequence[set[int]], right: set[int]) -> None:
        every = [n for sentence in cited for n in sentence]
        self.citations += len(every)
        self.right_citations += sum(1 for n in every if n in right)
        if right:
            union = set().union(*cited) if cited else set()
            self.recalls.append(len(union & right) / len(right))

    def scores(self) -> dict[str, float]:
        precision = self.right_citations / self.citations if self.citations else 0.0
        recall = sum(self.recalls) / len(self.recalls) if self.recalls else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {
            "citation_precision": round(precision, 5),
            "citation_recall": round(recall, 5),
            "citation_f1": round(f1, 5),
        }


def score_answer(answer: Answer, *, dataset: Dataset, qid: str, gold: Sequence[str]) -> Scored:
    wanted = [normalise(g) for g in gold if normalise(g)]
    text = normalise(_markers_out(answer.answer or ""))
    judged = {d for d, s in dataset.qrels.get(qid, {}).items() if s > 0}
    right = {
        p.number
        for p in answer.passages
        if p.external_id in judged or any(g in normalise(f"{p.title} {p.text}") for g in wanted)
    }
    return Scored(
        answered=answer.answer is not None,
        recall=answer.answer is not None and any(g in text for g in wanted),
        sentences=[(s.text, s.written, s.citations) for s in answer.sentences],
        passages=[p.text for p in answer.passages],
        right=right,
        ttft_ms=answer.timings.first_token_ms,
        answer_ms=answer.timings.total_ms,
        tokens_in=answer.tokens.prompt or 0,
        tokens_out=answer.tokens.completion or 0,
        unsupported=answer.unsupported,
        calls=answer.tokens.calls,
    )


def summarise(scored: Sequence[Scored], thresholds: Sequence[float]) -> dict[str, Any]:
    checked, baseline = Totals(), Totals()
    sweep = {(name, t): Totals() for name in POLICIES for t in thresholds}
    for one in scored:
        checked.add([set(c) for _, _, c in one.sentences], one.right)
        baseline.add([{1} for _ in one.sentences], one.right)
        for (name, threshold), totals in sweep.items():
            replayed = [
                {
                    c.passage + 1
                    for c in check_sentence(
                        text,
                        one.passages,
                        markers=written,
                        threshold=threshold,
                        **POLICIES[name],
                    ).citations
                }
                for text, written, _ in one.sentences
            ]
            totals.add(replayed, one.right)
    n = len(scored) or 1
    sentences = sum(len(s.sentences) for s in scored)
    answer_recall = round(sum(s.recall for s in scored) / n, 5)
    ttft = [s.ttft_ms for s in scored if s.ttft_ms is not None]
    whole = [s.answer_ms for s in scored]
    return {
        "questions": len(scored),
        "answered": sum(s.answered for s in scored),
        "answers": {
            **checked.scores(),
            "answer_recall": answer_recall,
            "unsupported_share": round(sum(s.unsupported for s in scored) / sentences, 5)
            if sentences
            else 0.0,
            "tokens_in": round(sum(s.tokens_in for s in scored) / n, 1),
            "tokens_out": round(sum(s.tokens_out for s in scored) / n, 1),
            "llm_calls": round(sum(s.calls for s in scored) / n, 2),
            "time_to_first_token_ms": _spread(ttft),
            "answer_ms": _spread(whole),
        },
        "baseline": {**baseline.scores(), "answer_recall": answer_recall},
        "sweep": {f"{name}@{t:g}": totals.scores() for (name, t), totals in sweep.items()},
    }


def _spread(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p95": None}
    return {"p50": round(percentile(values, 50), 1), "p95": round(percentile(values, 95), 1)}


async def ask_all(
    answers: AnswerService,
    dataset: Dataset,
    query_ids: Sequence[str],
    gold: Mapping[str, Sequence[str]],
    *,
    passages: int,
    expand: bool = False,
    llm_rerank: bool = False,
) -> list[Scored]:
    scored: list[Scored] = []
    started = time.perf_counter()
    for n, qid in enumerate(query_ids, 1):
        answer = await answers.answer(
            AnswerRequest(
                tenant_id=TENANT,
                query=dataset.queries[qid],
                passages=passages,
                expand=expand,
                llm_rerank=llm_rerank,
            )
        )
        scored.append(score_answer(answer, dataset=dataset, qid=qid, gold=gold.get(qid, [])))
        if answer.answer is None:
            progress(f"  {qid}: no answer ({'; '.join(answer.degraded)})")
        if n % 10 == 0 or n == len(query_ids):
            rate = n / (time.perf_counter() - started)
            progress(f"  answered {n}/{len(query_ids)} ({rate:.2f} questions/s)")
    return scored


def run_folder(path: Path, args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    dataset = load_dataset(path)
    context_only = args.strategy == "lazy" and args.no_generate
    # The context alone is scored by the judged passages: a set without gold answers will do.
    gold = load_answers(path) if not context_only or (path / "answers.jsonl").is_file() else {}
    query_ids = [
        q
        for q in select_queries(dataset, max_queries=args.max_queries, seed=args.seed)
        if (q in gold if gold else bool(dataset.qrels.get(q)))
    ]
    progress(f"{dataset.name}: {len(dataset.corpus)} documents, {len(query_ids)} questions")
    tmp = Path(tempfile.mkdtemp(prefix=f"hsearch-answers-{dataset.name}-"))
    milvus: Child | None = None
    resources: Services | None = None
    llm = OpenAICompatibleLLM(llm_settings(args, base_url))
    try:
        milvus, milvus_uri = start_milvus_lite(tmp / "milvus", log=tmp / "milvus.log")
        settings = build_settings(tmp, milvus_uri, Options())
        settings = settings.model_copy(update={"llm": llm.settings})
        upgrade_database(settings.database_url)
        resources = build_services(settings, llm=llm)
        ingest(resources, dataset.corpus, dataset.links)
        resources.store.flush()
        answers = AnswerService(
            retrieval=resources.search.retrieval,
            llm=llm,
            settings=settings.llm,
            citations=CitationSettings(),
            prompt_version=args.prompt_version,
            lazy=resources.lazy,
        )
        if args.strategy == "lazy":
            return {
                "dataset": dataset.name,
                "model": args.model if not args.no_generate else None,
                "base_url": base_url if not args.no_generate else None,
                "context_tokens": args.context_tokens,
                "passages": args.passages,
                "tester": args.tester or LazySettings().tester,
                **asyncio.run(compare(answers, dataset, query_ids, gold, args)),
            }
        scored = asyncio.run(
            ask_all(
                answers,
                dataset,
                query_ids,
                gold,
                passages=args.passages,
                expand=args.expand,
                llm_rerank=args.llm_rerank,
            )
        )
        if args.records is not None:
            with args.records.open("a", encoding="utf-8") as handle:
                for one in scored:
                    row = {"dataset": dataset.name, **asdict(one), "right": sorted(one.right)}
                    handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    finally:
        if resources is not None:
            resources.close()
        if milvus is not None:
            milvus.stop(MILVUS_STOP_SECONDS)
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "dataset": dataset.name,
        "model": args.model,
        "base_url": base_url,
        "context_tokens": args.context_tokens,
        "passages": args.passages,
        "prompt_version": args.prompt_version,
        "expand": args.expand,
        "llm_rerank": args.llm_rerank,
        **summarise(scored, args.thresholds),
    }


def llm_settings(args: argparse.Namespace, base_url: str) -> LlmSettings:
    return LlmSettings(
        base_url=base_url,
        model=args.model,
        api_key=args.api_key,
        timeout_s=args.timeout,
        first_token_timeout_s=args.timeout,
        max_tokens=args.max_tokens,
        context_tokens=args.context_tokens,
        max_concurrent=1,
    )


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.answers", description=__doc__)
    what = parser.add_mutually_exclusive_group(required=False)
    what.add_argument("--dataset", type=Path, action="append", metavar="DIR")
    what.add_argument(
        "--all", action="store_true", help=f"every folder under {DATASETS_ROOT} with answers"
    )
    parser.add_argument("--max-queries", type=int, metavar="N")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--json", action="store_true", help="one JSON object per folder")
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint (default: local)")
    parser.add_argument("--model", default=PACKAGED_MODEL_NAME)
    parser.add_argument("--api-key")
    parser.add_argument("--threads", type=int, default=LlmSettings().local_threads)
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument(
        "--prompt-version", type=int, default=ANSWER_PROMPT_VERSION,
        help="the answer prompt's version (prompt_files/answer-v<N>.<lang>.txt)",
    )  # fmt: skip
    strategy_arguments(parser)
    parser.add_argument("--expand", action="store_true", help="multi-query expansion")
    parser.add_argument("--llm-rerank", action="store_true", help="listwise reranking by the model")
    parser.add_argument("--context-tokens", type=int, default=LlmSettings().context_tokens)
    parser.add_argument("--max-tokens", type=int, default=LlmSettings().max_tokens)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument(
        "--records", type=Path, metavar="JSONL",
        help="write each question's answer, as scored, to JSONL (for --rescore)",
    )  # fmt: skip
    parser.add_argument(
        "--rescore", type=Path, metavar="JSONL",
        help="score the answers of an earlier --records file again (no model, no stack)",
    )  # fmt: skip
    parser.add_argument(
        "--thresholds",
        type=lambda s: tuple(float(x) for x in s.split(",")),
        default=DEFAULT_THRESHOLDS,
        help="support thresholds replayed on the same answers (comma-separated)",
    )
    return parser.parse_args(argv)


def rescore(path: Path, args: argparse.Namespace) -> int:
    """Score the answers an earlier run recorded, folder by folder."""
    by_dataset: dict[str, list[Scored]] = {}
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            dataset = row.pop("dataset")
            row["sentences"] = [(t, tuple(w), tuple(c)) for t, w, c in row["sentences"]]
            row["right"] = set(row["right"])
            by_dataset.setdefault(dataset, []).append(Scored(**row))
    for dataset, scored in by_dataset.items():
        result = {"dataset": dataset, "rescored": str(path), **summarise(scored, args.thresholds)}
        if args.json:
            sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
        else:
            _table(result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.rescore is not None:
        return rescore(args.rescore, args)
    folders = args.dataset or [
        p for p in sorted(DATASETS_ROOT.iterdir()) if (p / "answers.jsonl").is_file()
    ]
    server: Child | None = None
    base_url = args.base_url
    try:
        if base_url is None and not args.no_generate:
            tmp = Path(tempfile.mkdtemp(prefix="hsearch-answers-model-"))
            server, base_url = start_model_server(
                packaged_model_path(),
                alias=args.model,
                threads=args.threads,
                log=tmp / "model.log",
            )
            progress(f"local model server on {base_url} ({args.threads} thread(s))")
        for folder in folders:
            result = run_folder(folder, args, base_url or "http://127.0.0.1:9/v1")
            if args.json or args.strategy == "lazy":
                sys.stdout.write(json.dumps(result, ensure_ascii=False) + "\n")
            else:
                _table(result)
            sys.stdout.flush()
    finally:
        if server is not None:
            server.stop()
    return 0


def _table(result: Mapping[str, Any]) -> None:
    a, b = result["answers"], result["baseline"]
    lines = [
        f"{result['dataset']}: {result['questions']} questions, {result['answered']} answered",
        f"  answers:  P {a['citation_precision']:.3f}  R {a['citation_recall']:.3f}  "
        f"F1 {a['citation_f1']:.3f}  answer recall {a['answer_recall']:.3f}  "
        f"unsupported {a['unsupported_share']:.3f}",
        f"  baseline: P {b['citation_precision']:.3f}  R {b['citation_recall']:.3f}  "
        f"F1 {b['citation_f1']:.3f}",
        f"  first token p50 {a['time_to_first_token_ms']['p50']} ms, answer p50 "
        f"{a['answer_ms']['p50']} ms p95 {a['answer_ms']['p95']} ms, tokens in "
        f"{a['tokens_in']} out {a['tokens_out']}",
    ]
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
