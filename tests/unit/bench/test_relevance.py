"""The relevance command line: its flags and their checks."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.relevance import _parse_args


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
