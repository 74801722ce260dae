"""bench.cache_hit runs end to end on embedded parts: every timed request a cache hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import cache_hit


def test_it_times_cache_hits_and_writes_the_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "hit.txt"
    assert (
        cache_hit.main(["--json", "--requests", "5", "--warmup", "1", "--profile", str(profile)])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["requests"] == 5
    assert 0 < result["server_took_p50_ms"] <= result["p50_ms"]
    assert result["response_bytes"] > 10 * 1000, "ten hits of ~1 kB"
    assert "ResultCache.serve" in profile.read_text()
