from __future__ import annotations

import unicodedata
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from hsearch.lexical.analyzer import (
    MAX_TERM_CHARS,
    STOP_WORDS,
    TERM_ID_BOUND,
    UNSTEMMED_PREFIX,
    Token,
    analyze,
    analyze_query,
    is_cjk,
    match_terms,
    query_term_frequencies,
    term_frequencies,
    term_id,
    token_count,
    token_spans,
    tokens,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", ["hello", "world"]),
        (
            "\uff21\uff22\uff23 \uff44\uff45\uff46 \uff11\uff12\uff13",
            ["abc", "def", "123"],
        ),  # full-width
        ("Straße STRASSE", ["strasse", "strasse"]),  # case folding, not just lower()
        ("hybrid_search", ["hybrid", "search"]),  # underscores separate
        ("3.14 v2", ["3", "14", "v2"]),
        ("don't", ["don", "t"]),
        ("café cafe\u0301 CAFÉ", ["cafe", "cafe", "cafe"]),  # Latin accents fold away
        ("йод иод", ["йод", "иод"]),  # marks on other scripts tell letters apart
        ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),  # combining vowel signs stay in their word
        ("", []),
        ("  ...!?  — ", []),
        ("___", []),
    ],
)
def test_word_tokens(text: str, expected: list[str]) -> None:
    # A language without stop words or stems (anything but English): tokens and folding.
    terms = analyze(text, lang="xx")
    assert [term.removeprefix(UNSTEMMED_PREFIX) for term in terms] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("東京都", ["東京", "京都"]),
        (
            "東京は日本の首都です。",
            ["東京", "京は", "は日", "日本", "本の", "の首", "首都", "都で", "です"],
        ),
        ("東", ["東"]),  # a one-character run stays a unigram
        ("東 京", ["東", "京"]),
        ("カタカナ・テスト", ["カタ", "タカ", "カナ", "テス", "スト"]),  # the middle dot separates
        ("ｶﾀｶﾅ", ["カタ", "タカ", "カナ"]),  # half-width katakana normalised first
        ("한국어 텍스트", ["한국", "국어", "텍스", "스트"]),
        ("中文搜索", ["中文", "文搜", "搜索"]),
        ("iPhone15と東京2024年", ["iphone15", "と東", "東京", "2024", "年"]),
        ("Milvusで検索", ["milvus", "で検", "検索"]),
        ("葛\U000e0100飾", ["葛飾"]),  # ideographic variation selectors are dropped
    ],
)
def test_cjk_bigrams(text: str, expected: list[str]) -> None:
    assert analyze(text) == expected


@pytest.mark.parametrize(
    ("char", "expected"),
    [
        ("東", True),
        ("ひ", True),
        ("カ", True),
        ("ｶ", True),  # half-width katakana
        ("한", True),
        ("\U00020000", True),  # CJK Extension B
        ("a", False),
        ("・", True),  # in a CJK block; a run still stops there: it is not a word character
        ("1", False),
        ("é", False),
        ("", False),
    ],
)
def test_is_cjk(char: str, expected: bool) -> None:
    assert is_cjk(char) is expected


def test_tokens_carry_offsets_into_the_original_text() -> None:
    text = "\uff21\uff30\uff29: hybrid_search で東京都!"  # full-width API
    assert list(tokens(text)) == [
        Token("\uff21\uff30\uff29", 0, 3, cjk=False),
        Token("hybrid", 5, 11, cjk=False),
        Token("search", 12, 18, cjk=False),
        Token("で東京都", 19, 23, cjk=True),
    ]
    for token in tokens(text):
        assert text[token.start : token.end] == token.text


@given(st.text())
def test_token_spans_and_count_follow_the_tokens(text: str) -> None:
    # A word is one span; a CJK run one span per character, as a tokenizer counts it.
    expected: list[tuple[int, int]] = []
    for token in tokens(text):
        if token.cjk:
            expected.extend((i, i + 1) for i in range(token.start, token.end))
        else:
            expected.append((token.start, token.end))
    assert token_spans(text) == expected
    assert token_count(text) == len(expected)


@given(st.text(alphabet=st.characters(max_codepoint=0x2FF)) | st.text())
def test_token_count_of_latin_text_counts_the_tokens(text: str) -> None:
    # Text below the first combining mark is counted by a simpler regex: the same count.
    assert token_count(text) == len(token_spans(text))
    assert token_count(text + "東京") == len(token_spans(text)) + 2


def test_token_spans_of_mixed_scripts() -> None:
    text = "API: hybrid で東京!"
    assert token_spans(text) == [(0, 3), (5, 11), (12, 13), (13, 14), (14, 15)]
    assert token_count(text) == 5


@given(st.text())
def test_tokens_analyse_like_the_text(text: str) -> None:
    # Token by token, the analysis gives exactly the terms of the whole text, as long as
    # normalisation does not move boundaries: NFKC can turn a symbol into a letter
    # (circled Hangul into jamo), and variation selectors vanish from between two tokens.
    assume(unicodedata.normalize("NFKC", text) == text)
    assume(not any(unicodedata.name(c, "").startswith("VARIATION SELECTOR") for c in text))
    # Case folding turns one combining mark into a letter (Greek ypogegrammeni → iota).
    assume("\u0345" not in text)
    assert [term for token in tokens(text) for term in analyze(token.text)] == analyze(text)


def test_overlong_tokens_are_dropped_but_digests_kept() -> None:
    digest = "a" * MAX_TERM_CHARS
    assert analyze(f"x {digest} {'b' * (MAX_TERM_CHARS + 1)} y") == ["x", digest, "y"]


def test_term_ids_are_pinned() -> None:
    # These ids are stored in every index built with this analyzer: if this test fails,
    # bump ANALYZER_VERSION (the encoder version then changes and collections reindex).
    assert term_id("hello") == 840348987
    assert term_id("東京") == 577897315


def test_term_frequencies_counts_and_length() -> None:
    vector, length = term_frequencies("the cat and the hat, the end", lang="xx")
    assert length == 7
    counts = vector.to_dict()
    assert counts[term_id("=the")] == 3.0
    assert counts[term_id("=cat")] == 1.0
    assert sum(counts.values()) == length
    assert list(vector.indices) == sorted(vector.indices)
    # English (or unknown) text: the stop words are not counted, nor in the length.
    english, length = term_frequencies("the cats and the hat, the end")
    assert length == 3
    assert english.to_dict() == {term_id("cat"): 1.0, term_id("hat"): 1.0, term_id("end"): 1.0}


def test_term_frequencies_of_empty_text() -> None:
    vector, length = term_frequencies("")
    assert length == 0
    assert len(vector) == 0


@given(st.text())
def test_analyze_never_yields_empty_or_spaced_terms(text: str) -> None:
    for term in analyze(text):
        assert term
        assert not any(ch.isspace() for ch in term)
        assert len(term) <= MAX_TERM_CHARS


@given(st.text(), st.text())
def test_whitespace_separates_analysis(left: str, right: str) -> None:
    # Terms never span a space: a document analyses like the sum of its parts.
    assert analyze(f"{left} {right}") == analyze(left) + analyze(right)


@given(st.text(max_size=20))
def test_term_id_in_range_and_deterministic(term: str) -> None:
    tid = term_id(term)
    assert 0 <= tid < TERM_ID_BOUND
    assert term_id(term) == tid


@given(st.text())
def test_counts_sum_to_length(text: str) -> None:
    vector, length = term_frequencies(text)
    assert length == len(analyze(text))
    assert sum(vector.values) == length
    assert all(v >= 1.0 for v in vector.values)
    assert all(0 <= i < TERM_ID_BOUND for i in vector.indices)


# ------------------------------------------------------------------ English rules (lex2)


def test_stop_words_are_dropped_from_documents_and_queries() -> None:
    text = "programming languages and memory"
    assert analyze(text) == ["program", "languag", "memori"]
    assert "and" not in analyze_query(text)
    assert term_id("and") not in query_term_frequencies(text).indices
    assert analyze("The Who") == analyze_query("to be or not to be") == []
    assert {"and", "the", "of", "who", "what", "s", "t"} <= STOP_WORDS


@pytest.mark.parametrize(
    ("forms", "term"),
    [
        (["volcano", "volcanoes", "Volcanoes", "VOLCANO"], "volcano"),
        (["run", "running", "runs"], "run"),
        (["language", "languages"], "languag"),
    ],
)
def test_inflections_share_a_stem(forms: list[str], term: str) -> None:
    assert {tuple(analyze(form)) for form in forms} == {(term,)}
    for form in forms:  # a query in any form holds the documents' stem
        assert term in analyze_query(form)


@pytest.mark.parametrize(
    "forms",
    [
        ["cafe", "café", "CAFÉ", "cafe\u0301", "\uff43\uff41\uff46\uff45"],  # full-width "cafe"
        ["muller", "Müller", "MÜLLER"],
        ["viet", "Việt"],
        ["volcanoes", "\uff56\uff4f\uff4c\uff43\uff41\uff4e\uff4f\uff45\uff53"],  # full-width
        ["api", "\uff21\uff30\uff29"],  # full-width "API"
    ],
)
def test_accents_and_widths_fold(forms: list[str]) -> None:
    assert len({tuple(analyze(form)) for form in forms}) == 1
    assert len({tuple(analyze_query(form)) for form in forms}) == 1


@pytest.mark.parametrize("lang", ["", None, "en", "EN", "en-GB", "en_US", "und"])
def test_english_or_unknown_language_gets_english_rules(lang: str | None) -> None:
    assert analyze("The volcanoes", lang=lang) == ["volcano"]


@pytest.mark.parametrize("lang", ["de", "fr", "ja", "vi", "eng-x"])
def test_other_languages_keep_their_words(lang: str) -> None:
    assert analyze("The volcanoes 2024", lang=lang) == ["=the", "=volcanoes", "2024"]


def test_queries_match_documents_in_any_language() -> None:
    # A query has no language: it holds the English stem and the marked folded word, so
    # it matches an English document (stems) and a German one (folded words) alike.
    query = set(analyze_query("Volcanoes"))
    assert query == {"volcano", "=volcanoes"}
    assert set(analyze("volcanoes", lang="en")) <= query
    assert set(analyze("Volcanoes", lang="de")) <= query
    assert set(analyze("Vulkane", lang="de")) <= set(analyze_query("vulkane"))
    assert not set(analyze_query("number")) & set(analyze("numbering", lang="de"))


@given(st.text())
def test_english_documents_hold_no_marked_words(text: str) -> None:
    # So a query's marked forms (for other languages) never match an English document.
    assert not any(term.startswith(UNSTEMMED_PREFIX) for term in analyze(text))
    assert all(
        term.startswith(UNSTEMMED_PREFIX)
        for term in analyze(text, lang="de")
        if any(c.isalpha() and c.isascii() for c in term)
    )


def test_japanese_is_unchanged() -> None:
    # The English rules touch Latin words only: CJK bigrams are those of lex1.
    text = "東京は日本の首都です。"
    expected = ["東京", "京は", "は日", "日本", "本の", "の首", "首都", "都で", "です"]
    assert analyze(text) == analyze(text, lang="ja") == analyze_query(text) == expected
    assert analyze("Milvusで検索する") == ["milvus", "で検", "検索", "索す", "する"]
    assert analyze("Milvusで検索する", lang="ja")[0] == "=milvus"  # Latin, not English


def test_other_scripts_are_not_stemmed() -> None:
    assert analyze("вулканы volcanoes") == ["вулканы", "volcano"]
    assert analyze("ηφαίστεια") == ["ηφαίστεια"]  # Greek keeps its accents


def test_match_terms_reads_a_word_like_a_query() -> None:
    assert match_terms("Volcanoes") == {"volcano", "=volcanoes"}
    assert match_terms("café") == {"cafe", "=cafe"}
    assert match_terms("and") == match_terms("The") == frozenset()


def test_analysis_is_the_same_on_every_thread() -> None:
    words = [f"{w}{suffix}" for w in ("volcano", "run", "connect") for suffix in ("", "s", "ing")]
    expected = [analyze(w) for w in words] * 50
    with ThreadPoolExecutor(max_workers=8) as pool:
        assert list(pool.map(analyze, words * 50)) == expected


@given(st.text())
def test_a_query_holds_the_terms_of_the_same_text_as_a_document(text: str) -> None:
    assert set(analyze(text)) <= set(analyze_query(text))
