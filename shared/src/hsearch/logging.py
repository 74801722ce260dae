"""Logging set-up shared by the API, the workers and the CLI."""

from __future__ import annotations

import logging


def configure_logging(level: str = "INFO") -> None:
    """Plain key=value lines on stderr; dotted event names come from the callers."""
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # Third-party chatter that drowns our own events at INFO.
    for noisy in ("httpx", "urllib3", "filelock", "sentence_transformers", "transformers"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
