"""Fake cross-encoder checkpoint directories: the files, never real weights."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CROSS_ENCODER_CONFIG: dict[str, Any] = {
    "architectures": ["XLMRobertaForSequenceClassification"],
    "model_type": "xlm-roberta",
    "id2label": {"0": "LABEL_0"},
    "max_position_embeddings": 514,
    "pad_token_id": 1,
}

COMPLETE = ("config.json", "tokenizer_config.json", "model.safetensors", "tokenizer.json")


def make_checkpoint(
    path: Path, names: tuple[str, ...], config: dict[str, Any] | None = None
) -> Path:
    path.mkdir(parents=True)
    for name in names:
        (path / name).write_bytes(b"x")
    if config is not None:
        (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path
