"""The package README's examples run as they are, in order, against the live API (its
URL put for the one they name, its key in ``HSEARCH_API_KEY``), and print what they
say."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.unit.hsearch_client.conftest import Served

README = Path(__file__).resolve().parents[3] / "clients" / "python" / "README.md"
URL = "http://127.0.0.1:8000"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text("utf-8"), flags=re.DOTALL)


def test_the_readme_has_examples() -> None:
    assert len(examples()) == 5
    assert all(URL in code for code in examples())


def test_the_readme_examples_run_against_the_api(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HSEARCH_API_KEY", served.key)
    printed = []
    for number, code in enumerate(examples(), start=1):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            # The README's own code, as a reader would paste it.
            exec(compile(code.replace(URL, served.url), f"README example {number}", "exec"), {})
        printed.append(out.getvalue().splitlines())
    submit, pages, answers, concurrent, errors = printed
    assert submit[0] == "succeeded 2"
    assert submit[1].startswith("volcano How volcanoes form ")
    assert "<em>Volcanoes</em>" in submit[1]
    assert pages[:3] == ["0 ['river', 'volcano']", "river indexed 1", "volcano indexed 1"]
    assert pages[3].split()[1] == "2"  # the job, with its two documents indexed
    assert answers[0] == "Volcanoes form where magma rises through the crust.[1]"
    assert answers[1].startswith("[1] volcano: Volcanoes form where magma rises")
    assert answers[2].endswith(".[1] (sentence 0 checked)")
    assert answers[3] == "citations: 1"
    assert concurrent == ["volcano river", "river", "volcano"]
    assert errors[0] == "404 document_not_found"
    assert errors[1].startswith("[('top_k', ")
    assert len(errors) == 2, "the last search answers"
