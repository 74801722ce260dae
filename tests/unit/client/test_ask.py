"""``hsearch ask``: the answer streams into the terminal, then its checked citations;
``--json`` prints the whole answer; a refused question exits 1 with the error."""

from __future__ import annotations

import json
from pathlib import Path

from hsearch.llm.scripted import ScriptedLLM
from tests.unit.api.conftest import api_settings
from tests.unit.client.conftest import cli_for, live_api

DOCS = [
    {"external_id": "rivers", "title": "Rivers", "text": "Rivers carry water down to the sea."},
    {"external_id": "deserts", "title": "Deserts", "text": "Deserts get very little rain."},
]


def test_ask_streams_the_answer_then_its_citations(tmp_path: Path) -> None:
    model = ScriptedLLM("Rivers carry water down to the sea [2]. Moons are cheese.")
    with live_api(api_settings(tmp_path / "server"), llm=model) as api:
        cli = cli_for(api, tmp_path)
        docs = tmp_path / "docs.jsonl"
        docs.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
        assert cli("ingest", str(docs), "--wait").exit_code == 0
        result = cli("ask", "Where do rivers carry water?")
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert lines[0] == "Rivers carry water down to the sea.[1] Moons are cheese."
        assert '[1] Rivers (rivers): "Rivers carry water down to the sea."' in lines
        assert "  - Moons are cheese." in lines
        as_json = cli("ask", "Where do rivers carry water?", "--json")
        body = json.loads(as_json.output)
        assert body["citations"][0]["external_id"] == "rivers"
        refused = cli("ask", "Where?", "--passages", "0")
        assert refused.exit_code != 0
        lazy = cli("ask", "Where do rivers carry water?", "--lazy", "--budget", "3")
        assert lazy.exit_code == 0, lazy.output
        out = lazy.output.splitlines()
        assert out[0] == "[starting: 0 tested, 0 relevant, 0 claims]"  # progress, on stderr
        assert any(line.startswith("Rivers carry water down to the sea.") for line in out)
        assert any(
            line.startswith("Lazy search: ") and "relevance tests 2/3" in line for line in out
        ), out
        assert cli("ask", "Where?", "--budget", "3").exit_code == 1
