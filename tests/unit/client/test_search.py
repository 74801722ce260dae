"""``hsearch search``: one hit per document by default, titles and snippets with the
matches marked (bold on a terminal, brackets in a pipe), ``--chunks`` for every
passage, ``--cursor`` for the next page, ``--json`` for the API's response; a refused
search exits 1 with the error."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from hsearch.client.display import MARK_TTY, marked, search_lines
from hsearch.config import IngestSettings
from hsearch_client import SearchResponse
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import Cli, cli_for, live_api

LONG = " ".join(f"The river {i} floods the valley in spring." for i in range(40))
DOCS = [
    {"external_id": "long", "title": "Floods", "text": LONG},
    {"external_id": "short", "title": "Rivers & seas", "text": "A river floods the plain."},
    {"external_id": "desert", "title": "Deserts", "text": "Deserts get very little rain."},
]


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """The command line against the live API, the documents indexed in small chunks."""
    settings = api_settings(tmp_path / "server").model_copy(
        update={
            "ingest": IngestSettings(
                chunk_max_tokens=32, chunk_overlap_tokens=8, flush_min_interval_s=0
            )
        }
    )
    with live_api(settings) as api:
        run = cli_for(api, tmp_path)
        docs = tmp_path / "docs.jsonl"
        docs.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
        assert run("ingest", str(docs), "--wait").exit_code == 0
        yield run


def test_search_prints_titles_and_marked_snippets(cli: Cli) -> None:
    result = cli("search", "river floods", "--mode", "keyword")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("2 results for 'river floods' (keyword, ")
    titles = [line for line in lines if line[:2] in ("1.", "2.")]
    assert {t.split("  ")[0][3:] for t in titles} == {"Floods", "Rivers & seas"}
    assert any("passages" in t for t in titles), "the long document matched in several"
    # Not a terminal: the matches in brackets, the text unescaped.
    assert "   A [river] [floods] the plain." in lines
    assert "\x1b[" not in result.output


def test_search_chunks_and_pages(cli: Cli) -> None:
    every = cli("search", "river floods", "--mode", "keyword", "--chunks", "--top-k", "3")
    assert every.exit_code == 0, every.output
    lines = every.output.splitlines()
    assert lines[0].startswith("14 results")
    assert lines[-1].startswith("next page: --cursor ")
    cursor = lines[-1].removeprefix("next page: --cursor ")
    following = cli(
        "search",
        "river floods",
        "--mode",
        "keyword",
        "--chunks",
        "--top-k",
        "3",
        "--cursor",
        cursor,
    )
    assert following.exit_code == 0, following.output
    assert any(line.startswith("4. ") for line in following.output.splitlines())


def test_search_json_is_the_api_s_response(cli: Cli) -> None:
    result = cli("search", "deserts", "--mode", "keyword", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["hits"][0]["external_id"] == "desert"
    assert body["hits"][0]["snippet"] == "<em>Deserts</em> get very little rain."
    assert SearchResponse.model_validate(body).total == 1


def test_a_refused_search_exits_1_with_its_error(cli: Cli) -> None:
    refused = cli("search", "river", "--top-k", "100000")
    assert refused.exit_code == 1
    assert "error (invalid_request): top_k" in refused.output
    bad = cli("search", "river", "--filter", "{source")
    assert bad.exit_code == 1
    assert "--filter: not JSON" in bad.output
    invalid = cli("search", "river", "--filter", '{"color": {"eq": "red"}}')
    assert invalid.exit_code == 1
    assert "error (invalid_filter)" in invalid.output


def test_matches_are_bold_on_a_terminal_and_bracketed_elsewhere() -> None:
    snippet = "Fish &amp; <em>chips</em> by the <em>sea</em>…"
    on, off = MARK_TTY
    assert marked(snippet, tty=True) == f"Fish & {on}chips{off} by the {on}sea{off}…"
    assert marked(snippet, tty=False) == "Fish & [chips] by the [sea]…"
    response = SearchResponse.model_validate(
        {
            "query": "chips",
            "mode": "hybrid",
            "method": "rrf",
            "top_k": 1,
            "total": 2,
            "total_relation": "gte",
            "degraded": ["dense"],
            "next_cursor": "c1",
            "hits": [
                {
                    "chunk_id": "c",
                    "document_id": "d",
                    "external_id": "menu",
                    "title": "Menu",
                    "text": "Fish & chips by the sea",
                    "snippet": snippet,
                    "score": 0.5,
                }
            ],
        }
    )
    lines = search_lines(response, tty=True)
    assert lines[0] == "at least 2 results for 'chips' (hybrid, 0 ms); degraded: dense"
    assert lines[2] == f"1. {on}Menu{off}  (menu, score 0.5)"
    assert lines[3] == f"   Fish & {on}chips{off} by the {on}sea{off}…"
    assert lines[-1] == "next page: --cursor c1"
