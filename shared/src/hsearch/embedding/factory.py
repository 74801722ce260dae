"""Builds the configured encoder.

Importing this module is cheap: the encoder modules import torch, sentence-transformers
and FlagEmbedding only when an encoder is built, so those load only in processes that
encode (a unit test keeps it that way).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from hsearch.config import EncoderKind, EncoderSettings
from hsearch.embedding import bge_m3, offline
from hsearch.embedding.bge_m3 import BGE_M3_FUSION, BgeM3Embedder, missing_bge_m3_files
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.offline import OFFLINE_FUSION, OfflineEmbedder
from hsearch.embedding.protocol import (
    UNMEASURED_FUSION,
    Embedder,
    Embedding,
    EncoderInfo,
    Tokenizer,
)
from hsearch.errors import ConfigurationError
from hsearch.types import FusionDefault, SparseVector

__all__ = [
    "ENCODER_FUSION",
    "EncoderChoice",
    "UnloadedEmbedder",
    "choose_encoder",
    "create_embedder",
    "describe_encoder",
    "describe_encoder_choice",
]

ENCODER_FUSION: Mapping[EncoderKind, FusionDefault] = MappingProxyType(
    {
        EncoderKind.OFFLINE: OFFLINE_FUSION,
        EncoderKind.BGE_M3: BGE_M3_FUSION,
        EncoderKind.FAKE: UNMEASURED_FUSION,
    }
)
"""Each encoder's ``EncoderInfo.fusion``, without loading it: for tools that fuse legs an
encoder recorded earlier (``bench.fusion_replay``). A unit test keeps it equal to what
the encoders declare."""

logger = logging.getLogger(__name__)

_BGE_M3_PATH_SETTING = "HSEARCH_ENCODER__BGE_M3_PATH"
_OFFLINE_PATH_SETTING = "HSEARCH_ENCODER__OFFLINE_MODEL_PATH"


@dataclass(frozen=True, slots=True)
class EncoderChoice:
    """Which encoder the settings select, and why: decided from the settings and the
    files on disk, before anything is loaded."""

    kind: EncoderKind
    """Never ``AUTO``: what ``auto`` resolved to."""
    reason: str
    """For logs and start-up banners: ``"configured"`` or ``"auto: ..."``."""
    bge_m3_path: Path | None = None
    """The checkpoint to load; set exactly when ``kind`` is ``BGE_M3``."""
    bge_m3_missing: tuple[str, ...] = ()
    """``auto`` fell back to offline although a BGE-M3 path is set: what it lacks."""


def choose_encoder(settings: EncoderSettings) -> EncoderChoice:
    """The encoder :func:`create_embedder` builds for ``settings``, loading nothing.

    ``auto`` picks BGE-M3 when ``bge_m3_path`` holds a complete checkpoint, else the
    offline encoder.

    Raises:
        ConfigurationError: ``bge-m3`` was asked for explicitly and
            ``HSEARCH_ENCODER__BGE_M3_PATH`` is unset or not a complete checkpoint; or the
            offline encoder is chosen and ``HSEARCH_ENCODER__OFFLINE_MODEL_PATH`` is set
            to something that is not a sentence-transformers directory.
    """
    kind = settings.kind
    path = settings.bge_m3_path
    if kind is not EncoderKind.AUTO:
        if kind is EncoderKind.BGE_M3:
            if path is None:
                msg = f"encoder kind is bge-m3 but {_BGE_M3_PATH_SETTING} is not set"
                raise ConfigurationError(msg)
            missing = missing_bge_m3_files(path)
            if missing:
                msg = (
                    f"encoder kind is bge-m3 but {_BGE_M3_PATH_SETTING}={path} is not a "
                    f"complete BGE-M3 checkpoint; missing: {', '.join(missing)}"
                )
                raise ConfigurationError(msg)
            return EncoderChoice(kind, "configured", bge_m3_path=path)
        if kind is EncoderKind.OFFLINE:
            _check_offline_path(settings)
        return EncoderChoice(kind, "configured")
    if path is None:
        _check_offline_path(settings)
        return EncoderChoice(EncoderKind.OFFLINE, f"auto: {_BGE_M3_PATH_SETTING} not set")
    missing = missing_bge_m3_files(path)
    if missing:
        _check_offline_path(settings)
        reason = f"auto: {path} is not a complete BGE-M3 checkpoint (missing {', '.join(missing)})"
        return EncoderChoice(EncoderKind.OFFLINE, reason, bge_m3_missing=tuple(missing))
    return EncoderChoice(EncoderKind.BGE_M3, f"auto: checkpoint found at {path}", bge_m3_path=path)


def _check_offline_path(settings: EncoderSettings) -> None:
    path = settings.offline_model_path
    if path is not None and not (path / "modules.json").is_file():
        msg = (
            f"{_OFFLINE_PATH_SETTING}={path} is not a sentence-transformers model directory "
            "(no modules.json); unset it to use the bundled all-MiniLM-L6-v2"
        )
        raise ConfigurationError(msg)


def describe_encoder_choice(settings: EncoderSettings) -> str:
    """Which encoder :func:`create_embedder` would build, and why, without loading it.

    For start-up banners: ``"bge-m3 (auto: checkpoint found at /models/bge-m3)"``.

    Raises:
        ConfigurationError: As :func:`create_embedder` would.
    """
    choice = choose_encoder(settings)
    return f"{choice.kind.value} ({choice.reason})"


def create_embedder(settings: EncoderSettings) -> Embedder:
    """The encoder ``settings.kind`` asks for, loaded and ready.

    ``auto`` picks BGE-M3 when ``bge_m3_path`` holds a complete checkpoint, else the
    offline encoder; the choice and its reason are logged as ``encoder.selected``.

    Raises:
        ConfigurationError: ``bge-m3`` was asked for explicitly and
            ``HSEARCH_ENCODER__BGE_M3_PATH`` is unset or not a complete checkpoint; or the
            offline encoder is chosen and ``HSEARCH_ENCODER__OFFLINE_MODEL_PATH`` is set
            to something that is not a sentence-transformers directory.
        EncoderError: The chosen model failed to load.
    """
    choice = choose_encoder(settings)
    if choice.bge_m3_missing:
        # Set but unusable is likely a mistake (a half-finished download): say so loudly.
        logger.warning(
            "encoder.bge_m3_incomplete path=%s missing=%s",
            settings.bge_m3_path,
            ",".join(choice.bge_m3_missing),
        )
    embedder: Embedder
    if choice.bge_m3_path is not None:
        embedder = BgeM3Embedder(
            choice.bge_m3_path,
            device=settings.device,
            batch_size=settings.batch_size,
            max_length=settings.max_length,
        )
    elif choice.kind is EncoderKind.FAKE:
        embedder = FakeEmbedder()
    else:
        embedder = OfflineEmbedder(
            settings.offline_model_path, device=settings.device, batch_size=settings.batch_size
        )
    info = embedder.info
    logger.info(
        "encoder.selected name=%s dimension=%d version=%s sparse=%s reason=%r",
        info.name,
        info.dimension,
        info.version,
        info.sparse_kind.value,
        choice.reason,
    )
    return embedder


def describe_encoder(settings: EncoderSettings) -> EncoderInfo:
    """The info of the encoder :func:`create_embedder` would build, read from its files
    without loading its weights (milliseconds, where loading takes seconds); loaded after
    all when the files do not tell (an offline model whose last module is of a kind
    :func:`hsearch.embedding.offline.declared_info` does not read).

    Raises:
        ConfigurationError: As :func:`create_embedder` would.
        EncoderError: The model's files cannot be read (or, loaded, it failed).
    """
    choice = choose_encoder(settings)
    if choice.bge_m3_path is not None:
        return bge_m3.declared_info(choice.bge_m3_path)
    if choice.kind is EncoderKind.FAKE:
        return FakeEmbedder().info
    declared = offline.declared_info(settings.offline_model_path)
    return declared if declared is not None else create_embedder(settings).info


class UnloadedEmbedder:
    """The configured encoder's identity, without its model: for a process that only
    reads and deletes chunks (``hsearch reconcile``, ``hsearch tenants delete``), which
    checks the collection against the encoder but never encodes. Anything that would
    encode raises :class:`ConfigurationError`."""

    def __init__(self, info: EncoderInfo) -> None:
        self._info = info

    @property
    def info(self) -> EncoderInfo:
        return self._info

    @property
    def tokenizer(self) -> Tokenizer:
        raise self._refused()

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        raise self._refused()

    def embed_query(self, text: str, *, dense: bool = True, sparse: bool = True) -> Embedding:
        raise self._refused()

    def embed_queries(
        self, texts: Sequence[str], *, dense: bool = True, sparse: bool = True
    ) -> list[Embedding]:
        raise self._refused()

    def embed_query_without_model(self, text: str) -> SparseVector | None:
        raise self._refused()

    def _refused(self) -> ConfigurationError:
        return ConfigurationError(
            f"the encoder {self._info.name} was not loaded in this process (built to "
            "read and delete chunks only): nothing can be encoded here"
        )
