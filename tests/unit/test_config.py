from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from hsearch.config import FALLBACK_WEIGHTS, EncoderKind, SearchSettings, Settings
from hsearch.errors import ConfigurationError
from hsearch.types import FusionDefault, FusionMethod, Leg


def test_embedded_defaults(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("HSEARCH_"):
            monkeypatch.delenv(key)
    s = Settings(_env_file=None, data_dir=tmp_path)
    assert s.database_url == f"sqlite:///{tmp_path.resolve() / 'hsearch.sqlite'}"
    assert s.broker_url.startswith("sqla+sqlite:///")
    assert s.milvus_uri.endswith("milvus.db")
    assert s.encoder.kind is EncoderKind.AUTO
    # Fusion is unset: the encoder's default applies (resolve_fusion).
    assert s.search.fusion is None
    assert s.search.rrf_k is None
    assert s.search.rrf_weights is None
    assert s.search.adaptive_weights is None


ENCODER = FusionDefault.of(FusionMethod.RRF, {"dense": 0.8, "sparse": 0.2}, k=20)


def test_unset_fusion_resolves_to_the_encoders_default() -> None:
    assert SearchSettings().resolve_fusion(ENCODER) == ENCODER
    assert SearchSettings().resolve_fusion(ENCODER, FusionMethod.RRF) == ENCODER
    assert SearchSettings().resolve_fusion(ENCODER, "rrf") == ENCODER


def test_another_method_never_inherits_the_encoders_weights_or_k() -> None:
    s = SearchSettings()
    for method in (FusionMethod.SCORE, FusionMethod.SUM, FusionMethod.ADAPTIVE):
        resolved = s.resolve_fusion(ENCODER, method)
        assert resolved.method is method
        assert resolved.leg_weights() == FALLBACK_WEIGHTS[method]
        assert resolved.k == 60
    assert FALLBACK_WEIGHTS[FusionMethod.ADAPTIVE] == {"dense": 0.95, "sparse": 0.05}
    assert FALLBACK_WEIGHTS[FusionMethod.RRF] == {"dense": 0.7, "sparse": 0.3}


def test_the_operators_settings_override_the_encoder() -> None:
    s = SearchSettings(fusion="adaptive")
    assert s.resolve_fusion(ENCODER) == FusionDefault.of(
        "adaptive", {"dense": 0.95, "sparse": 0.05}
    )
    assert s.resolve_fusion(ENCODER, "rrf") == ENCODER, "a request's method comes first"
    s = SearchSettings(adaptive_weights={"dense": 0.9, "sparse": 0.1}, rrf_k=30)
    assert s.resolve_fusion(ENCODER) == FusionDefault.of("rrf", {"dense": 0.8, "sparse": 0.2}, 30)
    assert s.resolve_fusion(ENCODER, "adaptive") == FusionDefault.of(
        "adaptive", {"dense": 0.9, "sparse": 0.1}, 30
    )
    s = SearchSettings(rrf_weights={"dense": 0.5, "sparse": 0.5})
    for method in ("rrf", "score", "sum"):
        assert s.resolve_fusion(ENCODER, method).leg_weights() == {"dense": 0.5, "sparse": 0.5}
    assert s.resolve_fusion(ENCODER).k == 20, "k stays the encoder's"


READING = FusionDefault.of(
    "adaptive", {"dense": 0.9, "sparse": 0.1}, 100, keyword_coverage=True, length_words=16
)


def test_what_adaptive_reads_of_the_query_goes_with_the_encoders_method() -> None:
    s = SearchSettings()
    assert s.resolve_fusion(READING) == READING
    assert s.resolve_fusion(READING, "adaptive") == READING
    for method in ("rrf", "score", "sum"):
        resolved = s.resolve_fusion(READING, method)
        assert (resolved.keyword_coverage, resolved.length_words) == (False, None)
    # An operator's weights or k keep the encoder's reading of the query.
    tuned = SearchSettings(adaptive_weights={"dense": 0.5, "sparse": 0.5}, rrf_k=20)
    resolved = tuned.resolve_fusion(READING)
    assert (resolved.keyword_coverage, resolved.length_words, resolved.k) == (True, 16, 20)
    # Adaptive asked of an encoder whose method is another reads nothing of the query...
    assert not SearchSettings().resolve_fusion(ENCODER, "adaptive").keyword_coverage
    # ...unless the operator says so; the operator can also turn the readings off.
    on = SearchSettings(keyword_coverage=True, length_words=8)
    resolved = on.resolve_fusion(ENCODER, "adaptive")
    assert (resolved.keyword_coverage, resolved.length_words) == (True, 8)
    assert on.resolve_fusion(ENCODER) == ENCODER, "rrf reads nothing of the query"
    off = SearchSettings(keyword_coverage=False, length_words=0)
    resolved = off.resolve_fusion(READING)
    assert (resolved.keyword_coverage, resolved.length_words) == (False, None)


def test_the_readings_belong_to_adaptive_only() -> None:
    with pytest.raises(ValueError, match="adaptive only"):
        FusionDefault.of("rrf", {"dense": 1.0}, keyword_coverage=True)
    with pytest.raises(ValueError, match="adaptive only"):
        FusionDefault.of("sum", {"dense": 1.0}, length_words=8)
    with pytest.raises(ValueError, match="length_words"):
        FusionDefault.of("adaptive", {"dense": 1.0}, length_words=0)
    with pytest.raises(ValueError, match="length_words"):
        FusionDefault.of("adaptive", {"dense": 1.0}, length_words=2.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="keyword_coverage"):
        FusionDefault.of("adaptive", {"dense": 1.0}, keyword_coverage="no")  # type: ignore[arg-type]
    assert READING.describe() == "adaptive dense=0.9,sparse=0.1 k=100 coverage length=16"
    with pytest.raises(ValidationError):
        SearchSettings(length_words=-1)


def test_environment_overrides_the_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_SEARCH__FUSION", "score")
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dense": 0.6, "sparse": 0.4}')
    resolved = Settings(_env_file=None).search.resolve_fusion(ENCODER)
    assert resolved == FusionDefault.of("score", {"dense": 0.6, "sparse": 0.4})


def test_fusion_default_is_complete_ordered_and_validated() -> None:
    default = FusionDefault.of("sum", {Leg.SPARSE: 0.3, "dense": 1.0})
    assert default.weights == ((Leg.DENSE, 1.0), (Leg.SPARSE, 0.3)), "every leg, in Leg order"
    assert default == FusionDefault.of(FusionMethod.SUM, {"dense": 1, "sparse": 0.3}, k=60)
    assert hash(default) == hash(FusionDefault.of("sum", {"dense": 1.0, "sparse": 0.3}))
    assert FusionDefault.of("rrf", {"dense": 1}).leg_weights() == {"dense": 1.0, "sparse": 0.0}
    assert default.describe() == "sum dense=1,sparse=0.3"
    assert ENCODER.describe() == "rrf dense=0.8,sparse=0.2 k=20"
    with pytest.raises(ValueError, match="between 0 and 1"):
        FusionDefault.of("rrf", {"dense": 1.5})
    with pytest.raises(ValueError, match="at least one leg"):
        FusionDefault.of("rrf", {"dense": 0, "sparse": 0})
    with pytest.raises(ValueError, match="k: must be an integer between 1 and 1000"):
        FusionDefault.of("rrf", {"dense": 1}, k=0)
    with pytest.raises(ValueError, match="dence"):
        FusionDefault.of("rrf", {"dence": 1})
    with pytest.raises(ValueError, match="magic"):
        FusionDefault.of("magic", {"dense": 1})


def test_nested_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_DATABASE__URL", "postgresql+psycopg://u:p@h/db")
    monkeypatch.setenv("HSEARCH_REDIS__URL", "redis://r:6379/0")
    monkeypatch.setenv("HSEARCH_MILVUS__URI", "http://m:19530")
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_K", "10")
    monkeypatch.setenv("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dense": 0.5, "sparse": 0.5}')
    s = Settings(_env_file=None)
    assert s.database_url == "postgresql+psycopg://u:p@h/db"
    assert s.broker_url == "redis://r:6379/0", "the broker follows Redis when it is set"
    assert s.milvus_uri == "http://m:19530"
    assert s.search.rrf_k == 10
    assert s.search.rrf_weights == {"dense": 0.5, "sparse": 0.5}
    assert "u:p" not in repr(s), "secrets stay out of reprs"


def test_invalid_values_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_OVERLAP_TOKENS", "300")
    monkeypatch.setenv("HSEARCH_INGEST__CHUNK_MAX_TOKENS", "256")
    with pytest.raises(ValidationError, match="chunk_overlap_tokens"):
        Settings(_env_file=None)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dence": 0.7, "sparse": 0.3}', "rrf_weights.dence"),
        ("HSEARCH_SEARCH__ADAPTIVE_WEIGHTS", '{"dense": 1.5, "sparse": 0.1}', "adaptive_weights"),
        ("HSEARCH_SEARCH__RRF_WEIGHTS", '{"dense": 0, "sparse": 0}', "rrf_weights"),
        ("HSEARCH_SEARCH__FUSION", "magic", "fusion"),
        ("HSEARCH_SEARCH__RRF_K", "0", "rrf_k"),
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
        Settings(_env_file=None)


@pytest.mark.parametrize(
    ("client", "api", "url"),
    [
        ({}, {}, "http://127.0.0.1:8000"),
        ({}, {"host": "0.0.0.0", "port": 9000}, "http://127.0.0.1:9000"),
        ({}, {"host": "::1"}, "http://[::1]:8000"),
        ({"url": "https://search.example.org/"}, {"port": 9000}, "https://search.example.org"),
    ],
)
def test_the_command_line_finds_the_api(
    client: dict[str, str], api: dict[str, object], url: str, tmp_path: Path
) -> None:
    s = Settings(_env_file=None, data_dir=tmp_path, client=client, api=api)
    assert s.client_url == url
    assert s.client_state_dir == tmp_path / "ingest-state"


def test_the_api_key_is_read_from_hsearch_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSEARCH_API_KEY", "hsk-live-7f3e9a")
    s = Settings(_env_file=None)
    assert s.api_key is not None
    assert s.api_key.get_secret_value() == "hsk-live-7f3e9a"
    assert "hsk-live-7f3e9a" not in repr(s)


def _settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for key in list(__import__("os").environ):
        if key.startswith("HSEARCH_"):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return Settings(_env_file=None)


@pytest.mark.parametrize(
    ("name", "replacement"),
    [
        ("HSEARCH_INGEST__CHUNK_MAX_CHARS", "HSEARCH_INGEST__CHUNK_MAX_TOKENS"),
        ("HSEARCH_INGEST__CHUNK_OVERLAP_CHARS", "HSEARCH_INGEST__CHUNK_OVERLAP_TOKENS"),
    ],
)
def test_a_variable_an_earlier_version_read_is_refused_with_its_replacement(
    monkeypatch: pytest.MonkeyPatch, name: str, replacement: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"{name} is no longer read: use {replacement}"):
        _settings(monkeypatch, **{name: "1200"})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "HSEARCH_API__PROT",
            "HSEARCH_API__PROT is not a setting: HSEARCH_API has no field 'prot'",
        ),
        (
            "HSEARCH_SERACH__FUSION",
            "HSEARCH_SERACH__FUSION is not a setting: the settings has no field 'serach'",
        ),
        (
            "HSEARCH_DATA_DIR__X",
            "HSEARCH_DATA_DIR__X is not a setting: HSEARCH_DATA_DIR takes no sub-settings",
        ),
        (
            "HSEARCH_INGEST_CHUNK_MAX_TOKENS",
            "HSEARCH_INGEST_CHUNK_MAX_TOKENS is not a setting: a section's fields take two "
            "underscores, HSEARCH_INGEST__CHUNK_MAX_TOKENS$",
        ),
        ("hsearch_api__prot", "HSEARCH_API__PROT is not a setting"),
    ],
)
def test_a_variable_that_sets_nothing_is_refused_by_name(
    monkeypatch: pytest.MonkeyPatch, name: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=f"^environment: {message}"):
        _settings(monkeypatch, **{name: "1"})


def test_known_names_and_other_tools_variables_are_accepted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = _settings(
        monkeypatch,
        HSEARCH_INGEST__CHUNK_MAX_TOKENS="128",
        HSEARCH_SEARCH__RRF_WEIGHTS='{"dense": 0.6, "sparse": 0.4}',
        HSEARCH_API_KEY="hsk_x",
        HSEARCH_WORKER_REPLICAS="3",  # the compose file's
        HSEARCH_TEST_POSTGRES_URL="postgresql://x",  # the test suite's
    )
    assert s.ingest.chunk_max_tokens == 128


def test_the_env_file_is_checked_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _settings(monkeypatch)
    env_file = tmp_path / ".env"
    env_file.write_text("HSEARCH_INGEST__CHUNK_MAX_CHARS=1200\nOTHER=1\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match=r"^\.env file: HSEARCH_INGEST__CHUNK_MAX_CHARS"):
        Settings(_env_file=env_file)


@pytest.mark.process
@pytest.mark.parametrize(
    ("variable", "value", "named"),
    [
        ("HSEARCH_API__PROT", "8001", "HSEARCH_API__PROT"),
        ("HSEARCH_INGEST__CHUNK_MAX_CHARS", "900", "HSEARCH_INGEST__CHUNK_MAX_TOKENS"),
        ("HSEARCH_API__PORT", "eighty", "api.port"),
    ],
)
def test_the_command_says_what_is_wrong_with_its_settings_in_one_line(
    tmp_path: Path, variable: str, value: str, named: str
) -> None:
    """`hsearch` started with settings it cannot use: exit 2 and one line naming the
    variable or field on stderr, no traceback."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HSEARCH_")}
    env.update({"HSEARCH_DATA_DIR": str(tmp_path), variable: value})
    done = subprocess.run(
        [sys.executable, "-m", "hsearch.cli", "db", "upgrade"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error (configuration): ")
    assert named in lines[0]
    assert list(tmp_path.iterdir()) == []  # nothing was started, nothing created
