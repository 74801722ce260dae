from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hsearch.embedding.factory
from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.bge_m3 import is_bge_m3_dir, missing_bge_m3_files
from hsearch.embedding.factory import create_embedder, describe_encoder_choice
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import ConfigurationError

_FACTORY_LOGGER = "hsearch.embedding.factory"
_COMPLETE = (
    "config.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "model.safetensors",
    "sparse_linear.pt",
    "colbert_linear.pt",
)


class _Recorder(FakeEmbedder):
    """Stands in for a model-backed encoder: records how the factory built it."""

    def __init__(self, path: Path | None, **kwargs: Any) -> None:
        super().__init__()
        self.path = path
        self.kwargs = kwargs


class _OfflineStub(_Recorder):
    pass


class _BgeM3Stub(_Recorder):
    pass


@pytest.fixture
def stubs(monkeypatch: pytest.MonkeyPatch) -> None:
    # Models take seconds to load: unit tests check which class the factory builds, and
    # with what, and leave loading to the integration suite.
    monkeypatch.setattr(hsearch.embedding.factory, "OfflineEmbedder", _OfflineStub)
    monkeypatch.setattr(hsearch.embedding.factory, "BgeM3Embedder", _BgeM3Stub)


def _checkpoint(root: Path, files: tuple[str, ...] = _COMPLETE) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in files:
        (root / name).write_text("{}")
    return root


def test_missing_files_of_a_complete_checkpoint(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3")
    assert missing_bge_m3_files(path) == []
    assert is_bge_m3_dir(path)


def test_pytorch_bin_and_sentencepiece_are_accepted(tmp_path: Path) -> None:
    files = tuple(f for f in _COMPLETE if f not in {"model.safetensors", "tokenizer.json"})
    path = _checkpoint(tmp_path / "m3", (*files, "pytorch_model.bin", "sentencepiece.bpe.model"))
    assert is_bge_m3_dir(path)


def test_missing_files_are_listed(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3", ("config.json", "tokenizer.json"))
    assert missing_bge_m3_files(path) == [
        "tokenizer_config.json",
        "sparse_linear.pt",
        "colbert_linear.pt",
        "model.safetensors|pytorch_model.bin",
    ]
    assert not is_bge_m3_dir(path)
    assert not is_bge_m3_dir(tmp_path / "absent")


@pytest.mark.usefixtures("stubs")
def test_fake(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_FACTORY_LOGGER)
    embedder = create_embedder(EncoderSettings(kind=EncoderKind.FAKE))
    assert type(embedder) is FakeEmbedder
    assert "encoder.selected name=fake" in caplog.text


@pytest.mark.usefixtures("stubs")
def test_offline_gets_its_settings(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text("[]")
    settings = EncoderSettings(
        kind=EncoderKind.OFFLINE, offline_model_path=tmp_path, device="cuda:1", batch_size=7
    )
    embedder = create_embedder(settings)
    assert isinstance(embedder, _OfflineStub)
    assert embedder.path == tmp_path
    assert embedder.kwargs == {"device": "cuda:1", "batch_size": 7}


@pytest.mark.usefixtures("stubs")
def test_offline_with_a_wrong_model_path_names_the_setting(tmp_path: Path) -> None:
    settings = EncoderSettings(kind=EncoderKind.OFFLINE, offline_model_path=tmp_path)
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__OFFLINE_MODEL_PATH"):
        create_embedder(settings)


@pytest.mark.usefixtures("stubs")
def test_explicit_bge_m3(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3")
    settings = EncoderSettings(
        kind=EncoderKind.BGE_M3, bge_m3_path=path, batch_size=4, max_length=128
    )
    embedder = create_embedder(settings)
    assert isinstance(embedder, _BgeM3Stub)
    assert embedder.path == path
    assert embedder.kwargs == {"device": "cpu", "batch_size": 4, "max_length": 128}


@pytest.mark.usefixtures("stubs")
def test_explicit_bge_m3_without_path_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__BGE_M3_PATH is not set"):
        create_embedder(EncoderSettings(kind=EncoderKind.BGE_M3))


@pytest.mark.usefixtures("stubs")
def test_explicit_bge_m3_with_incomplete_dir_lists_what_is_missing(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3", ("config.json",))
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__BGE_M3_PATH") as caught:
        create_embedder(EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=path))
    assert "sparse_linear.pt" in caught.value.message


@pytest.mark.usefixtures("stubs")
def test_auto_prefers_a_complete_bge_m3(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_FACTORY_LOGGER)
    path = _checkpoint(tmp_path / "m3")
    embedder = create_embedder(EncoderSettings(bge_m3_path=path))
    assert isinstance(embedder, _BgeM3Stub)
    assert "encoder.selected" in caplog.text
    assert "checkpoint found" in caplog.text


@pytest.mark.usefixtures("stubs")
def test_auto_without_path_is_offline(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_FACTORY_LOGGER)
    embedder = create_embedder(EncoderSettings())
    assert isinstance(embedder, _OfflineStub)
    assert "not set" in caplog.text


@pytest.mark.usefixtures("stubs")
def test_auto_with_incomplete_dir_falls_back_and_warns(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=_FACTORY_LOGGER)
    path = _checkpoint(tmp_path / "m3", ("config.json",))
    embedder = create_embedder(EncoderSettings(bge_m3_path=path))
    assert isinstance(embedder, _OfflineStub)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "encoder.bge_m3_incomplete" in warnings[0].getMessage()


def test_importing_the_factory_loads_no_model_library() -> None:
    heavy = ("torch", "transformers", "sentence_transformers", "FlagEmbedding")
    code = (
        "import sys, hsearch.embedding.factory, hsearch.embedding.bge_m3, "
        "hsearch.embedding.offline, hsearch.embedding.fake; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]"


def test_describe_does_not_load_anything(tmp_path: Path) -> None:
    # No stubs: describing must never construct an encoder.
    path = _checkpoint(tmp_path / "m3")
    assert describe_encoder_choice(EncoderSettings(bge_m3_path=path)) == (
        f"bge-m3 (auto: checkpoint found at {path})"
    )
    assert describe_encoder_choice(EncoderSettings()) == (
        "offline (auto: HSEARCH_ENCODER__BGE_M3_PATH not set)"
    )
    assert describe_encoder_choice(EncoderSettings(kind=EncoderKind.FAKE)) == "fake (configured)"
    incomplete = _checkpoint(tmp_path / "half", ("config.json",))
    assert "missing" in describe_encoder_choice(EncoderSettings(bge_m3_path=incomplete))


def test_describe_raises_like_create() -> None:
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__BGE_M3_PATH"):
        describe_encoder_choice(EncoderSettings(kind=EncoderKind.BGE_M3))
