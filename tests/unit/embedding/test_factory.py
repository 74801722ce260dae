from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding.bge_m3 import is_bge_m3_dir, missing_bge_m3_files
from hsearch.embedding.factory import (
    EncoderChoice,
    choose_encoder,
    create_embedder,
    describe_encoder_choice,
)
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


def test_fake(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=_FACTORY_LOGGER)
    embedder = create_embedder(EncoderSettings(kind=EncoderKind.FAKE))
    assert type(embedder) is FakeEmbedder
    assert "encoder.selected name=fake" in caplog.text


# The choice is decided from the settings and the files on disk; loading the chosen model
# is the integration suite's job (tests/integration/test_*_embedder.py).


def test_offline_with_its_model_directory(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text("[]")
    settings = EncoderSettings(kind=EncoderKind.OFFLINE, offline_model_path=tmp_path)
    assert choose_encoder(settings) == EncoderChoice(EncoderKind.OFFLINE, "configured")


def test_offline_with_a_wrong_model_path_names_the_setting(tmp_path: Path) -> None:
    settings = EncoderSettings(kind=EncoderKind.OFFLINE, offline_model_path=tmp_path)
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__OFFLINE_MODEL_PATH"):
        choose_encoder(settings)
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__OFFLINE_MODEL_PATH"):
        create_embedder(settings)  # refused before anything loads


def test_explicit_bge_m3(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3")
    settings = EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=path)
    assert choose_encoder(settings) == EncoderChoice(
        EncoderKind.BGE_M3, "configured", bge_m3_path=path
    )


def test_explicit_bge_m3_without_path_names_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__BGE_M3_PATH is not set"):
        create_embedder(EncoderSettings(kind=EncoderKind.BGE_M3))


def test_explicit_bge_m3_with_incomplete_dir_lists_what_is_missing(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3", ("config.json",))
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__BGE_M3_PATH") as caught:
        create_embedder(EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=path))
    assert "sparse_linear.pt" in caught.value.message


def test_auto_prefers_a_complete_bge_m3(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3")
    choice = choose_encoder(EncoderSettings(bge_m3_path=path))
    assert (choice.kind, choice.bge_m3_path, choice.bge_m3_missing) == (
        EncoderKind.BGE_M3,
        path,
        (),
    )
    assert choice.reason == f"auto: checkpoint found at {path}"


def test_auto_without_path_is_offline() -> None:
    assert choose_encoder(EncoderSettings()) == EncoderChoice(
        EncoderKind.OFFLINE, "auto: HSEARCH_ENCODER__BGE_M3_PATH not set"
    )


def test_auto_with_incomplete_dir_falls_back_and_says_what_is_missing(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3", ("config.json", "tokenizer.json"))
    choice = choose_encoder(EncoderSettings(bge_m3_path=path))
    assert choice.kind is EncoderKind.OFFLINE
    assert choice.bge_m3_path is None
    # What create_embedder's encoder.bge_m3_incomplete warning lists.
    assert choice.bge_m3_missing == tuple(missing_bge_m3_files(path))
    assert "sparse_linear.pt" in choice.bge_m3_missing
    assert choice.reason.startswith(f"auto: {path} is not a complete BGE-M3 checkpoint")


def test_auto_falling_back_checks_the_offline_path(tmp_path: Path) -> None:
    settings = EncoderSettings(
        bge_m3_path=_checkpoint(tmp_path / "m3", ("config.json",)),
        offline_model_path=tmp_path / "not-a-model",
    )
    with pytest.raises(ConfigurationError, match="HSEARCH_ENCODER__OFFLINE_MODEL_PATH"):
        choose_encoder(settings)
    # With a complete checkpoint the offline path is never used, so never checked.
    settings = settings.model_copy(update={"bge_m3_path": _checkpoint(tmp_path / "full")})
    assert choose_encoder(settings).kind is EncoderKind.BGE_M3


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
