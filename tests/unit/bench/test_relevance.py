"""The relevance command line: its flags and their checks."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bench.datasets import Dataset
from bench.relevance import _parse_args
from bench.report import DEFAULT_GRAPH_SCORING, DEFAULT_GRAPH_SEEDS, DEFAULT_GRAPH_WEIGHT
from bench.runner import run_queries

from hsearch.config import Settings
from hsearch.errors import SearchUnavailableError


def test_save_legs_needs_both_single_leg_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legs = str(tmp_path / "legs.jsonl")
    with pytest.raises(SystemExit) as exit_info:
        _parse_args(["--all", "--modes", "hybrid,semantic", "--save-legs", legs])
    assert exit_info.value.code == 2
    assert "--save-legs needs the semantic and keyword modes" in capsys.readouterr().err
    args = _parse_args(["--all", "--modes", "semantic,keyword", "--save-legs", legs])
    assert args.modes == ("semantic", "keyword")
    assert args.save_legs == tmp_path / "legs.jsonl"


def test_a_failed_search_records_no_legs(tmp_path: Path) -> None:
    """A query whose search failed is left out of --save-legs (replayed, its empty legs
    would score as a miss of every design) and counted as an error of its mode."""

    class Store:
        async def aclose(self) -> None:
            return None

    class Search:
        async def search(self, query: Any) -> Any:
            if query.query == "broken":
                raise SearchUnavailableError("every search leg failed")
            return SimpleNamespace(hits=[], degraded=(), method="rrf", keyword_coverage=None)

    dataset = Dataset(
        name="set",
        corpus=[],
        queries={"q1": "fine", "q2": "broken"},
        qrels={"q1": {"d1": 1.0}, "q2": {"d1": 1.0}},
    )
    resources = SimpleNamespace(
        search=Search(),
        store=Store(),
        settings=Settings(_env_file=None),
        embedder=SimpleNamespace(info=SimpleNamespace(dense_scripts=None)),
    )
    out = io.StringIO()
    runs = asyncio.run(
        run_queries(
            resources,  # type: ignore[arg-type]
            dataset,
            ["q1", "q2"],
            ["semantic", "keyword"],
            save_legs=out,
        )
    )
    assert [json.loads(line)["query_id"] for line in out.getvalue().splitlines()] == ["q1"]
    assert runs["semantic"].errors == runs["keyword"].errors == 1


def test_graph_options_default_and_checks(capsys: pytest.CaptureFixture[str]) -> None:
    args = _parse_args(["--all"])
    assert args.graph_weight == DEFAULT_GRAPH_WEIGHT
    assert (args.graph_scoring, args.graph_depth, args.graph_seeds) == (
        DEFAULT_GRAPH_SCORING,
        None,
        DEFAULT_GRAPH_SEEDS,
    )
    args = _parse_args(
        ["--all", "--graph-weight", "0.3", "--graph-scoring", "pagerank", "--graph-seeds", "5"]
    )
    assert (args.graph_weight, args.graph_scoring, args.graph_seeds) == (0.3, "pagerank", 5)
    for bad, message in (
        (["--graph-weight", "0"], "--graph-weight must be in (0, 1]"),
        (["--graph-weight", "1.5"], "--graph-weight must be in (0, 1]"),
        (["--graph-seeds", "0"], "--graph-seeds must be >= 1"),
        (["--graph-depth", "4"], "--graph-depth: invalid choice"),
        (["--graph-scoring", "bfs"], "--graph-scoring: invalid choice"),
    ):
        with pytest.raises(SystemExit):
            _parse_args(["--all", *bad])
        assert message in capsys.readouterr().err
