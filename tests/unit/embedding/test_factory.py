from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding import factory
from hsearch.embedding.bge_m3 import is_bge_m3_dir, missing_bge_m3_files
from hsearch.embedding.factory import (
    EncoderChoice,
    UnloadedEmbedder,
    choose_encoder,
    create_embedder,
    describe_encoder,
    describe_encoder_choice,
)
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.offline import declared_info
from hsearch.embedding.protocol import Embedder
from hsearch.errors import ConfigurationError, EncoderError

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


@pytest.mark.process
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


def _sentence_transformer(root: Path, modules: list[tuple[str, str, dict[str, object]]]) -> Path:
    """A sentence-transformers directory of ``(type, path, config)`` modules, no weights."""
    root.mkdir(parents=True)
    listed = []
    for i, (kind, sub, config) in enumerate(modules):
        listed.append({"idx": i, "name": str(i), "path": sub, "type": f"st.models.{kind}"})
        (root / sub).mkdir(exist_ok=True)
        (root / sub / "config.json").write_text(json.dumps(config))
    (root / "modules.json").write_text(json.dumps(listed))
    return root


@pytest.mark.parametrize(
    ("modules", "dimension"),
    [
        # all-MiniLM-L6-v2's layout: mean pooling (the older format), normalised.
        (
            [
                ("Transformer", "", {"hidden_size": 384}),
                ("Pooling", "1_Pooling", {"word_embedding_dimension": 384,
                                          "pooling_mode_mean_tokens": True}),
                ("Normalize", "2_Normalize", {}),
            ],
            384,
        ),
        # Two pooling modes concatenated; no flag set means mean.
        ([("Pooling", "p", {"word_embedding_dimension": 8, "pooling_mode_cls_token": True,
                             "pooling_mode_max_tokens": True})], 16),
        ([("Pooling", "p", {"word_embedding_dimension": 8})], 8),
        # The newer format.
        ([("Pooling", "p", {"embedding_dimension": 8, "pooling_mode": ["mean", "max"]})], 16),
        ([("Pooling", "p", {"embedding_dimension": 8, "pooling_mode": "cls"})], 8),
        # A projection after the pooling sets the width.
        (
            [
                ("Pooling", "p", {"embedding_dimension": 8, "pooling_mode": "mean"}),
                ("Dense", "d", {"in_features": 8, "out_features": 4}),
                ("Dropout", "x", {}),
            ],
            4,
        ),
    ],
)  # fmt: skip
def test_an_offline_model_declares_its_width_in_its_files(
    tmp_path: Path, modules: list[tuple[str, str, dict[str, object]]], dimension: int
) -> None:
    info = declared_info(_sentence_transformer(tmp_path / "model", modules))
    assert info is not None
    assert info.dimension == dimension
    assert info.name == "offline-minilm-bm25"


@pytest.mark.parametrize(
    "modules",
    [
        [("Pooling", "p", {"embedding_dimension": 8}), ("LayerNorm", "n", {"dimension": 8})],
        [("Pooling", "p", {"pooling_mode": "mean"})],  # no width
        [("Transformer", "", {"hidden_size": 8})],  # token embeddings last: not read here
    ],
)
def test_what_the_files_do_not_say_is_left_to_loading(
    tmp_path: Path, modules: list[tuple[str, str, dict[str, object]]]
) -> None:
    assert declared_info(_sentence_transformer(tmp_path / "model", modules)) is None


def test_a_truncated_output_is_left_to_loading(tmp_path: Path) -> None:
    root = _sentence_transformer(tmp_path / "model", [("Pooling", "p", {"embedding_dimension": 8})])
    (root / "config_sentence_transformers.json").write_text(json.dumps({"truncate_dim": 4}))
    assert declared_info(root) is None


def test_describe_encoder_loads_only_when_the_files_do_not_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded: list[EncoderSettings] = []

    def load(settings: EncoderSettings) -> FakeEmbedder:
        loaded.append(settings)
        return FakeEmbedder(8)

    monkeypatch.setattr(factory, "create_embedder", load)
    readable = _sentence_transformer(
        tmp_path / "readable", [("Pooling", "p", {"embedding_dimension": 8})]
    )
    settings = EncoderSettings(kind=EncoderKind.OFFLINE, offline_model_path=readable)
    assert describe_encoder(settings).dimension == 8
    assert loaded == []
    unreadable = _sentence_transformer(
        tmp_path / "unreadable", [("Transformer", "", {"hidden_size": 8})]
    )
    settings = EncoderSettings(kind=EncoderKind.OFFLINE, offline_model_path=unreadable)
    assert describe_encoder(settings) == FakeEmbedder(8).info
    assert loaded == [settings]
    assert describe_encoder(EncoderSettings(kind=EncoderKind.FAKE)) == FakeEmbedder().info


def test_the_unloaded_encoder_refuses_to_encode() -> None:
    unloaded: Embedder = UnloadedEmbedder(FakeEmbedder().info)
    assert unloaded.info == FakeEmbedder().info
    calls: list[Callable[[], object]] = [
        lambda: unloaded.tokenizer,
        lambda: unloaded.embed_documents(["a"]),
        lambda: unloaded.embed_query("a"),
        lambda: unloaded.embed_queries(["a"]),
    ]
    for call in calls:
        with pytest.raises(ConfigurationError, match="not loaded"):
            call()


def test_describing_an_unreadable_checkpoint_is_an_encoder_error(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path / "m3")  # every file there, config.json not JSON
    (path / "config.json").write_text("{not json")
    with pytest.raises(EncoderError, match="cannot read the BGE-M3 checkpoint"):
        describe_encoder(EncoderSettings(kind=EncoderKind.BGE_M3, bge_m3_path=path))
