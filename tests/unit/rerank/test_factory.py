"""create_reranker: the configured reranker or none, refusing bad paths by the setting's name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hsearch.errors import ConfigurationError
from hsearch.rerank import factory as factory_module
from hsearch.rerank.factory import create_reranker
from tests.unit.rerank.checkpoints import COMPLETE, CROSS_ENCODER_CONFIG, make_checkpoint

SETTING = "HSEARCH_RERANK__MODEL_PATH"


def test_no_path_means_no_reranker() -> None:
    assert create_reranker(None) is None


def test_incomplete_path_names_the_setting(tmp_path: Path) -> None:
    path = make_checkpoint(tmp_path / "m", ("config.json",))
    with pytest.raises(ConfigurationError, match=SETTING) as excinfo:
        create_reranker(path)
    assert "model.safetensors|pytorch_model.bin" in str(excinfo.value)
    with pytest.raises(ConfigurationError, match=SETTING):
        create_reranker(tmp_path / "absent")


class _AdapterStub:
    def __init__(self, path: Path, **kwargs: Any) -> None:
        self.path = path
        self.kwargs = kwargs


def test_factory_builds_the_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Stubbed: loading a real checkpoint is the integration suite's job.
    monkeypatch.setattr(factory_module, "FlagRerankerAdapter", _AdapterStub)
    config = {**CROSS_ENCODER_CONFIG, "num_labels": 1}
    del config["id2label"]  # a num_labels key is honoured too
    path = make_checkpoint(tmp_path / "m", COMPLETE, config)
    built = create_reranker(path, device="cuda:0", batch_size=8, max_length=512)
    assert isinstance(built, _AdapterStub)
    assert built.path == path
    assert built.kwargs == {"device": "cuda:0", "batch_size": 8, "max_length": 512}


def test_unreadable_config(tmp_path: Path) -> None:
    path = make_checkpoint(tmp_path / "m", COMPLETE)  # config.json holds "x"
    with pytest.raises(ConfigurationError, match="unreadable"):
        create_reranker(path)


@pytest.mark.process
def test_importing_rerank_loads_no_model_library() -> None:
    heavy = ("torch", "transformers", "FlagEmbedding")
    code = (
        "import sys, hsearch.rerank.factory, hsearch.rerank.flag, hsearch.rerank.fake; "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert result.stdout.strip() == "[]"
