"""Builds the configured reranker, or none.

Importing this module is cheap: FlagEmbedding loads only when an adapter is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from hsearch.errors import ConfigurationError
from hsearch.rerank.flag import (
    FlagRerankerAdapter,
    missing_reranker_files,
    reranker_config_problems,
)
from hsearch.rerank.protocol import Reranker

__all__ = ["create_reranker"]

_MODEL_PATH_SETTING: Final = "HSEARCH_RERANK__MODEL_PATH"


def create_reranker(
    path: Path | None,
    *,
    device: str = "cpu",
    batch_size: int = 32,
    max_length: int = 512,
) -> Reranker | None:
    """The configured reranker: ``None`` when no model path is set (reranking off).

    Raises :class:`ConfigurationError` naming ``HSEARCH_RERANK__MODEL_PATH`` when the path
    is set but holds no complete one-label cross-encoder, and :class:`EncoderError` when
    the files are there but the model does not load.
    """
    if path is None:
        return None
    missing = missing_reranker_files(path)
    if missing:
        msg = (
            f"{_MODEL_PATH_SETTING}={path} is not a complete reranker checkpoint; "
            f"missing: {', '.join(missing)}"
        )
        raise ConfigurationError(msg)
    problems = reranker_config_problems(path, max_length=max_length)
    if problems:
        msg = f"{_MODEL_PATH_SETTING}={path} cannot be used as a reranker: {'; '.join(problems)}"
        raise ConfigurationError(msg)
    return FlagRerankerAdapter(path, device=device, batch_size=batch_size, max_length=max_length)
