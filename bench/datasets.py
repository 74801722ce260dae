"""BEIR-format evaluation sets: reading a folder and choosing the queries to evaluate.

A BEIR folder holds ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl``
(``_id``, ``text``) and ``qrels.tsv`` (``query-id``, ``corpus-id``, ``score``, with that
header); it may also hold ``edges.tsv``, links between its documents (``source``,
``target``, then optionally ``type`` and ``weight``, with that header), which the
benchmark ingests as the source documents' links (:func:`read_edges`). Pure file
reading: nothing here starts or searches anything.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.metrics import relevant
from hsearch.graph.links import DEFAULT_LINK_TYPE, Link, link_problems, merged

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_ROOT = REPO_ROOT.parent / "shared" / "datasets"
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels.tsv")
EDGES_FILE = "edges.tsv"
EDGES_COLUMNS = ("source", "target", "type", "weight")
DEFAULT_SEED = 1234


@dataclass
class Dataset:
    name: str
    corpus: list[dict[str, str]]
    queries: dict[str, str]  # id -> text, in file order
    qrels: dict[str, dict[str, float]] = field(default_factory=dict)  # query -> doc -> score
    links: dict[str, tuple[Link, ...]] = field(default_factory=dict)  # source doc -> its links
    """The documents' links from ``edges.tsv``; empty when the folder has none."""

    @property
    def has_links(self) -> bool:
        return bool(self.links)

    @property
    def link_count(self) -> int:
        return sum(len(links) for links in self.links.values())


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


def read_edges(path: Path) -> dict[str, tuple[Link, ...]]:
    """The links of an ``edges.tsv`` file, by source document id, in file order.

    The header names the columns: ``source``, ``target``, then optionally ``type`` (else
    each link has the product's default type) and ``weight`` (else 1), in that order.
    Types are kept as written; a (source, target, type) given twice is kept once with its
    larger weight (:func:`hsearch.graph.links.merged`, as the product stores it). A line
    with the wrong number of fields, a weight that is no number, or a link the product
    would refuse (an empty type, a weight not above 0, a self-link: the rules of
    :func:`~hsearch.graph.links.link_problems`) raises ``ValueError`` naming the file,
    the line and the problem: a benchmark silently missing links would measure a
    different graph.
    """
    by_source: dict[str, list[Link]] = {}
    with path.open(encoding="utf-8") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        if len(header) < 2 or tuple(header) != EDGES_COLUMNS[: len(header)]:
            expected = "<TAB>".join(EDGES_COLUMNS)
            msg = (
                f"{path}:1: expected a header of 'source<TAB>target' optionally followed "
                f"by type and weight ('{expected}'), got {header!r}"
            )
            raise ValueError(msg)
        for number, line in enumerate(handle, 2):
            if not line.strip():
                continue
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != len(header):
                msg = f"{path}:{number}: {len(fields)} fields, the header names {len(header)}"
                raise ValueError(msg)
            source, target = fields[0], fields[1]
            kind = fields[2] if len(fields) > 2 else DEFAULT_LINK_TYPE
            try:
                weight = float(fields[3]) if len(fields) > 3 else 1.0
            except ValueError:
                msg = f"{path}:{number}: the weight {fields[3]!r} is not a number"
                raise ValueError(msg) from None
            link = Link(target=target, type=kind, weight=weight)
            problems = [p.message for p in link_problems([link], source=source)]
            if not source:
                problems.insert(0, "the source is empty")
            if problems:
                msg = f"{path}:{number}: {'; '.join(problems)}"
                raise ValueError(msg)
            by_source.setdefault(source, []).append(link)
    return {source: merged(links) for source, links in by_source.items()}


def load_dataset(path: Path) -> Dataset:
    """Read a BEIR folder: corpus.jsonl, queries.jsonl and qrels.tsv (with its header),
    and edges.tsv when there is one (:func:`read_edges`; every source must be a document
    of the corpus, a target may be any id: a link to a document not ingested is kept
    unresolved, as the product keeps it)."""
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
    links: dict[str, tuple[Link, ...]] = {}
    if (path / EDGES_FILE).is_file():
        links = read_edges(path / EDGES_FILE)
        unknown = links.keys() - {d["_id"] for d in corpus}
        if unknown:
            shown = ", ".join(repr(s) for s in sorted(unknown)[:5])
            msg = (
                f"{path / EDGES_FILE}: {len(unknown)} source(s) not in corpus.jsonl "
                f"({shown}): a link belongs to a document of the corpus"
            )
            raise ValueError(msg)
    return Dataset(name=path.name, corpus=corpus, queries=queries, qrels=qrels, links=links)


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
