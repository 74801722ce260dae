"""FlagRerankerAdapter's checks of a checkpoint directory (nothing is loaded)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hsearch.errors import ConfigurationError, EncoderError
from hsearch.rerank.factory import create_reranker
from hsearch.rerank.flag import FlagRerankerAdapter, missing_reranker_files
from tests.unit.rerank.checkpoints import COMPLETE, CROSS_ENCODER_CONFIG, make_checkpoint

SETTING = "HSEARCH_RERANK__MODEL_PATH"


def test_missing_files_of_an_empty_directory(tmp_path: Path) -> None:
    assert missing_reranker_files(tmp_path) == [
        "config.json",
        "tokenizer_config.json",
        "model.safetensors|pytorch_model.bin",
        "tokenizer.json|sentencepiece.bpe.model",
    ]


def test_missing_files_of_no_directory(tmp_path: Path) -> None:
    assert missing_reranker_files(tmp_path / "absent") == [
        f"{tmp_path / 'absent'} (not a directory)"
    ]


def test_alternatives_are_enough(tmp_path: Path) -> None:
    names = ("config.json", "tokenizer_config.json", "pytorch_model.bin", "sentencepiece.bpe.model")
    assert missing_reranker_files(make_checkpoint(tmp_path / "m", names)) == []
    assert missing_reranker_files(make_checkpoint(tmp_path / "c", COMPLETE)) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        # A BGE-M3 (embedder) directory: transformers would add a random head silently.
        ({"architectures": ["XLMRobertaModel"]}, "ForSequenceClassification"),
        ({"architectures": None}, "ForSequenceClassification"),
        ({"id2label": {"0": "NO", "1": "YES"}}, "has 2 labels"),
        ({"id2label": None}, "has 2 labels"),  # transformers' default
        ({"max_position_embeddings": 130}, "exceeds the model's 128 positions"),
    ],
)
def test_not_a_cross_encoder(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    config = {k: v for k, v in {**CROSS_ENCODER_CONFIG, **change}.items() if v is not None}
    path = make_checkpoint(tmp_path / "m", COMPLETE, config)
    with pytest.raises(ConfigurationError, match=SETTING) as excinfo:
        create_reranker(path)
    assert problem in str(excinfo.value)
    # The adapter checks the same before FlagEmbedding sees the path.
    with pytest.raises(EncoderError, match=problem):
        FlagRerankerAdapter(path)


def test_adapter_checks_files_before_loading(tmp_path: Path) -> None:
    with pytest.raises(EncoderError, match="not a complete reranker checkpoint"):
        FlagRerankerAdapter(tmp_path)


@pytest.mark.parametrize(
    ("batch_size", "max_length", "message"),
    [(0, 512, "batch_size must be >= 1"), (32, 8, "max_length must be >= 16")],
)
def test_adapter_validates_arguments(
    tmp_path: Path, batch_size: int, max_length: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FlagRerankerAdapter(tmp_path, batch_size=batch_size, max_length=max_length)
