"""BEIR-format evaluation sets: reading a folder and choosing the queries to evaluate.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels.tsv`` (``query-id``, ``corpus-id``, ``score``, with that
header). Pure file reading: nothing here starts or searches anything.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.metrics import relevant

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_ROOT = REPO_ROOT.parent / "shared" / "datasets"
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv")
DEFAULT_SEED = 1234


@dataclass
class Dataset:
    name: str
    corpus: list[dict[str, str]]
    queries: dict[str, str]  # id -> text, in file order
    qrels: dict[str, dict[str, float]] = field(default_factory=dict)  # query -> doc -> score


def dataset_folders(root: Path) -> list[Path]:
    """The folders under ``root`` that hold a corpus, in name order."""
    return sorted(p for p in root.iterdir() if (p / "corpus.jsonl").is_file())


def is_beir_folder(path: Path) -> bool:
    return all((path / name).is_file() for name in BEIR_FILES)


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def load_dataset(path: Path) -> Dataset:
    """Read a BEIR folder: corpus.jsonl, queries.jsonl and qrels.tsv (with its header)."""
    corpus = [
        {"_id": str(d["_id"]), "title": str(d.get("title") or ""), "text": str(d["text"])}
        for d in _read_jsonl(path / "corpus.jsonl")
    ]
    queries = {str(q["_id"]): str(q["text"]) for q in _read_jsonl(path / "queries.jsonl")}
    qrels: dict[str, dict[str, float]] = {}
    with (path / "qrels.tsv").open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\n").split("\t")
        if header[:2] != ["query-id", "corpus-id"]:
            msg = f"{path / 'qrels.tsv'}: expected a 'query-id<TAB>corpus-id<TAB>score' header"
            raise ValueError(msg)
        for line in handle:
            if not line.strip():
                continue
            qid, doc, score = line.rstrip("\n").split("\t")
            qrels.setdefault(qid, {})[doc] = float(score)
    return Dataset(name=path.name, corpus=corpus, queries=queries, qrels=qrels)


def select_queries(
    dataset: Dataset, *, max_queries: int | None, seed: int, prefix: str | None = None
) -> list[str]:
    """Ids of the queries to evaluate: those with a positive judgement (and ``prefix``),
    a seeded random sample of ``max_queries`` of them if asked, in file order."""
    ids = [
        q
        for q in dataset.queries
        if relevant(dataset.qrels.get(q, {})) and (prefix is None or q.startswith(prefix))
    ]
    if max_queries is not None and max_queries < len(ids):
        chosen = set(random.Random(seed).sample(ids, max_queries))
        ids = [q for q in ids if q in chosen]
    return ids
