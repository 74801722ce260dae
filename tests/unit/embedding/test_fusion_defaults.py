"""Each encoder declares its fusion default, and ``ENCODER_FUSION`` says the same without
loading it. The model libraries are replaced by stubs: only the metadata is checked."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from tokenizers import Tokenizer
from tokenizers.models import WordLevel

from hsearch.config import EncoderKind
from hsearch.embedding.bge_m3 import BGE_M3_FUSION, BgeM3Embedder
from hsearch.embedding.factory import ENCODER_FUSION
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.offline import OFFLINE_FUSION, OfflineEmbedder
from hsearch.embedding.protocol import UNMEASURED_FUSION
from hsearch.types import FusionDefault, FusionMethod


class _Model:
    """Stands in for SentenceTransformer and BGEM3FlagModel: a dimension, a window and a
    (word-level) tokenizer, no weights."""

    max_seq_length = 256

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs
        # BGEM3FlagModel's (_M3Model) wraps it the transformers way.
        self.tokenizer: Tokenizer | SimpleNamespace = Tokenizer(
            WordLevel({"[UNK]": 0}, unk_token="[UNK]")
        )

    def get_embedding_dimension(self) -> int:
        return 384


def _stub(monkeypatch: pytest.MonkeyPatch, module: str, **attributes: Any) -> None:
    stub = types.ModuleType(module)
    for name, value in attributes.items():
        setattr(stub, name, value)
    monkeypatch.setitem(sys.modules, module, stub)


def test_the_offline_encoder_declares_its_measured_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _stub(monkeypatch, "sentence_transformers", SentenceTransformer=_Model)
    (tmp_path / "modules.json").write_text("[]")
    info = OfflineEmbedder(tmp_path).info
    assert info.fusion == OFFLINE_FUSION == ENCODER_FUSION[EncoderKind.OFFLINE]


class _Module:
    """Stands in for the torch module: moved and set to eval at load, nothing more."""

    def float(self) -> _Module:
        return self

    def to(self, device: str) -> _Module:
        del device
        return self

    def eval(self) -> _Module:
        return self


class _M3Model(_Model):
    """BGEM3FlagModel's surface the adapter reads at load: its device, its torch module
    and a transformers-style tokenizer (a backend and a special-tokens map)."""

    target_devices = ("cpu",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = _Module()
        self.tokenizer = SimpleNamespace(backend_tokenizer=self.tokenizer, special_tokens_map={})


def test_bge_m3_declares_its_papers_rule(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _stub(monkeypatch, "FlagEmbedding", BGEM3FlagModel=_M3Model)
    for name in ("tokenizer_config.json", "tokenizer.json", "model.safetensors"):
        (tmp_path / name).write_text("{}")
    for name in ("sparse_linear.pt", "colbert_linear.pt"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 1024}))
    info = BgeM3Embedder(tmp_path).info
    assert info.fusion == BGE_M3_FUSION == ENCODER_FUSION[EncoderKind.BGE_M3]
    # dense + 0.3 x sparse, summed as raw scores
    assert FusionDefault.of(FusionMethod.SUM, {"dense": 1.0, "sparse": 0.3}) == BGE_M3_FUSION


def test_the_fake_encoder_declares_nothing() -> None:
    assert FakeEmbedder().info.fusion == UNMEASURED_FUSION == ENCODER_FUSION[EncoderKind.FAKE]


def test_every_concrete_kind_has_a_default() -> None:
    assert set(ENCODER_FUSION) == set(EncoderKind) - {EncoderKind.AUTO}


def test_the_fusion_default_is_not_part_of_the_fingerprint() -> None:
    info = FakeEmbedder().info
    other = dataclasses.replace(info, fusion=BGE_M3_FUSION)
    assert other.fingerprint == info.fingerprint, "changing it re-indexes nothing"
