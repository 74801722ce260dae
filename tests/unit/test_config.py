from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from hsearch.config import EncoderKind, SearchSettings, Settings
from hsearch.types import FusionMethod, Leg


def test_embedded_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("HSEARCH_"):
            monkeypatch.delenv(key)
    s = Settings(_env_file=None, data_dir=tmp_path)  # type: ignore[call-arg]
    assert s.database_url == f"sqlite:///{tmp_path.resolve() / 'hsearch.sqlite'}"
    assert s.broker_url.startswith("sqla+sqlite:///")
    assert s.milvus_uri.endswith("milvus.db")
    assert s.encoder.kind is EncoderKind.AUTO
    assert s.search.fusion == "adaptive"
    assert s.search.rrf_k == 60
    assert s.search.rrf_weights == {"dense": 0.7, "sparse": 0.3}
    assert s.search.adaptive_weights == {"dense": 0.95, "sparse": 0.05}


def test_default_weights_follow_the_method() -> None:
    s = SearchSettings(adaptive_weights={"dense": 0.9, "sparse": 0.1})
    assert s.default_weights(FusionMethod.ADAPTIVE) == {"dense": 0.9, "sparse": 0.1}
    assert (
        s.default_weights(FusionMethod.RRF)
        == s.default_weights(FusionMethod.SCORE)
        == {"dense": 0.7, "sparse": 0.3}
    )
    s.default_weights(FusionMethod.RRF)[Leg.DENSE] = 0.0
    assert s.rrf_weights["dense"] == 0.7, "callers get a copy"


def test_nested_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_DATABASE__URL", "postgresql+psycopg://u:p@h/db")
    monkeypatch.setenv("HSEARCH_REDIS__URL", "redis://r:6379/0")
    monkeypatch.setenv("HSEARCH_MILVUS__URI", "http://m:19530")
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_K", "10")
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dense": 0.5, "sparse": 0.5}')
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.database_url == "postgresql+psycopg://u:p@h/db"
    assert s.broker_url == "redis://r:6379/0", "the broker follows Redis when it is set"
    assert s.milvus_uri == "http://m:19530"
    assert s.search.rrf_k == 10
    assert s.search.rrf_weights == {"dense": 0.5, "sparse": 0.5}
    assert "u:p" not in repr(s), "secrets stay out of reprs"


def test_invalid_values_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_OVERLAP_CHARS", "5000")
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_MAX_CHARS", "1000")
    with pytest.raises(ValidationError, match="chunk_overlap_chars"):
        Settings(_env_file=None)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dence": 0.7, "sparse": 0.3}', "rrf_weights.dence"),
        ("HSEARCH_SEARCH__ADAPTIVE_WEIGHTS", '{"dense": 1.5, "sparse": 0.1}', "adaptive_weights"),
        ("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dense": 0, "sparse": 0}', "rrf_weights"),
        ("HSEARCH_SEARCH__FUSION", "magic", "fusion"),
        # Limits the API advertises must be reachable together.
        ("HSEARCH_SEARCH__MAX_TOP_K", "600", r"max_top_k \(600\) <= search.candidates"),
        ("HSEARCH_SEARCH__LEG_TIMEOUT_S", "12", "leg_timeout_s .12.0. must not exceed"),
    ],
)
def test_misconfigured_search_fails_at_start(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, message: str
) -> None:
    """A typo in a setting stops the server at start instead of failing every search."""
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError, match=message):
        Settings(_env_file=None)  # type: ignore[call-arg]
