"""A text's language, for documents that come without a ``lang`` (``hsearch ingest``
reading text, Markdown, HTML and PDF files): py3langid (a modernised langid.py: naive
Bayes over byte n-grams, its model shipped in the package, numpy only), chosen for its
size and speed (docs/ingestion.md, Languages).

The answer is always a tag the API accepts (:func:`hsearch.lexical.languages.lang_problem`,
checked by the tests: this client asks the API and imports none of its rules): an ISO
639-1 code, which all the model's two-letter labels are, or ``und``, the tag of an
undetermined language (the analyzer's script rules then decide, as for an empty tag),
for a language the model is not sure of or one it names with three letters (``zxx``,
``yue``); never an empty string.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["MIN_CONFIDENCE", "SAMPLE_CHARS", "UNDETERMINED", "detect_language"]

UNDETERMINED = "und"
"""BCP 47's tag for an undetermined language."""

MIN_CONFIDENCE = 0.5
"""The model's probability (normalised over its languages) below which the language is
``und``: short or mixed texts, numbers, code."""

SAMPLE_CHARS = 10_000
"""Only the start of a long text is read: a language shows in a few paragraphs, and the
time grows with the length."""

_lock = threading.Lock()
_identifier: Any = None


def _model() -> Any:
    # Loaded once, on first use (a few seconds: the model is decompressed): a run that
    # reads no file never pays for it.
    global _identifier  # noqa: PLW0603 - one model per process, loaded lazily
    with _lock:
        if _identifier is None:
            from py3langid.langid import (  # noqa: PLC0415 - only when a text is detected
                MODEL_FILE,
                LanguageIdentifier,
            )

            _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _identifier


def detect_language(text: str) -> str:
    """The language of ``text`` as an ISO 639-1 code (``en``, ``fr``, ``ja``), or
    ``und`` when it cannot be told with confidence."""
    sample = text[:SAMPLE_CHARS]
    if not any(c.isalpha() for c in sample):
        return UNDETERMINED
    lang, confidence = _model().classify(sample)
    code = str(lang)
    if float(confidence) < MIN_CONFIDENCE or len(code) != 2 or not code.isalpha():
        return UNDETERMINED
    return code
