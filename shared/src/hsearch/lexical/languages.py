"""The ``lang`` tags a document may carry, checked when it is submitted.

The analyzer reads a tag's primary subtag (:func:`hsearch.lexical.analyzer.analyze`):
``en`` gets the English rules (stop words, stems), any other language none, and an empty
tag or ``und`` lets the script decide (Latin words read as English). The chunker picks its
sentence rules by the same subtag. A tag the analyzer does not recognise as English is
read as another language, so ``english`` or ``eng`` would silently lose the English
rules: tags are refused unless their primary subtag is an ISO 639-1 code, as BCP 47
requires for a language that has one (``en-GB``, ``pt-BR``, ``zh-Hant``; any case, ``_``
or ``-`` between subtags). Pure: no I/O.
"""

from __future__ import annotations

import re

__all__ = ["ISO_639_1", "UNKNOWN_LANG", "lang_problem"]

UNKNOWN_LANG = "und"
"""BCP 47's tag for an undetermined language: as an empty tag, the script decides."""

_ISO_639_1_CODES = """
aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs
cu cv cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha
he hi ho hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn
ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb
nd ne ng nl nn no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd
se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw
ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
"""

ISO_639_1: frozenset[str] = frozenset(_ISO_639_1_CODES.split())
"""The two-letter language codes of ISO 639-1 (the current ones)."""

_HINTS: dict[str, str] = {
    # ISO 639-2 codes and English names of the languages most often written this way.
    **dict.fromkeys(("eng", "english"), "en"),
    **dict.fromkeys(("jpn", "japanese"), "ja"),
    **dict.fromkeys(("deu", "ger", "german"), "de"),
    **dict.fromkeys(("fra", "fre", "french"), "fr"),
    **dict.fromkeys(("spa", "spanish"), "es"),
    **dict.fromkeys(("zho", "chi", "chinese"), "zh"),
    **dict.fromkeys(("kor", "korean"), "ko"),
    **dict.fromkeys(("ita", "italian"), "it"),
    **dict.fromkeys(("por", "portuguese"), "pt"),
    **dict.fromkeys(("rus", "russian"), "ru"),
    **dict.fromkeys(("nld", "dut", "dutch"), "nl"),
    **dict.fromkeys(("ara", "arabic"), "ar"),
    **dict.fromkeys(("vie", "vietnamese"), "vi"),
    # Deprecated ISO 639-1 codes.
    "iw": "he",
    "in": "id",
    "ji": "yi",
}

_SUBTAG = re.compile(r"[a-z0-9]{1,8}")

ACCEPTED = (
    "accepted: a BCP 47 tag whose language is an ISO 639-1 two-letter code (en, en-GB, "
    "de, ja, pt-BR, zh-Hant), 'und' or empty for an undetermined language"
)


def lang_problem(lang: str) -> str | None:
    """Why ``lang`` is not a tag the analyzer reads, naming what is accepted; ``None``
    when it is one."""
    if lang == "":
        return None
    subtags = lang.strip().lower().replace("_", "-").split("-")
    primary = subtags[0]
    if (primary in ISO_639_1 or primary == UNKNOWN_LANG) and all(
        _SUBTAG.fullmatch(s) for s in subtags[1:]
    ):
        return None
    hint = _HINTS.get(primary)
    said = f"{lang!r} is not a language tag the analyzer reads"
    if hint is not None:
        said += f" (did you mean {hint!r}?)"
    return f"{said}; {ACCEPTED}"
