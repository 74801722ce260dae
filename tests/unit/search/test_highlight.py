"""Snippets: window choice, term marking (English and Japanese), HTML safety."""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hsearch.errors import InvalidRequestError
from hsearch.lexical.analyzer import analyze
from hsearch.search.highlight import MIN_SNIPPET_CHARS, make_snippet

FILLER_A = "lorem ipsum dolor sit amet " * 20
FILLER_B = "consectetur adipiscing elit sed do " * 20


def marked(snippet: str, pre: str = "<em>", post: str = "</em>") -> list[str]:
    return re.findall(f"{re.escape(pre)}(.*?){re.escape(post)}", snippet)


def source_text(snippet: str, ellipsis: str = "…") -> str:
    """The text the snippet shows, markers and ellipses removed, entities decoded."""
    plain = snippet.replace("<em>", "").replace("</em>", "")
    plain = plain.removeprefix(ellipsis).removesuffix(ellipsis)
    return html.unescape(plain)


# --------------------------------------------------------------------------- English


def test_marks_terms_case_insensitively() -> None:
    assert (
        make_snippet("Hybrid search with MILVUS: milvus is fast.", "milvus Search")
        == "Hybrid <em>search</em> with <em>MILVUS</em>: <em>milvus</em> is fast."
    )


def test_marks_whole_words_only() -> None:
    # A word whose stem matches is marked ("searching"), never a substring ("research").
    assert (
        make_snippet("searching research search", "search")
        == "<em>searching</em> research <em>search</em>"
    )


def test_marks_stems_and_folded_words_never_stop_words() -> None:
    assert (
        make_snippet("Volcanoes and plate boundaries", "volcano and plates")
        == "<em>Volcanoes</em> and <em>plate</em> boundaries"
    )
    assert make_snippet("Le café et le CAFE", "cafe") == "Le <em>café</em> et le <em>CAFE</em>"
    assert (
        make_snippet("programming languages and memory", "programming languages and memory")
        == "<em>programming</em> <em>languages</em> and <em>memory</em>"
    )
    assert make_snippet("The Who and the band", "the who") == "The Who and the band"


def test_underscores_and_punctuation_separate_words() -> None:
    assert (
        make_snippet("hybrid_search (search).", "search")
        == "hybrid_<em>search</em> (<em>search</em>)."
    )


def test_normalises_like_the_lexical_leg() -> None:
    # full-width letters (NFKC) and case folding (ß → ss)
    full_width_api = "\uff21\uff30\uff29"
    assert make_snippet(f"{full_width_api} docs", "api") == f"<em>{full_width_api}</em> docs"
    assert make_snippet("Die STRASSE ist lang", "Straße") == "Die <em>STRASSE</em> ist lang"
    assert make_snippet("Café au lait", "cafe\u0301") == "<em>Café</em> au lait"


def test_a_variation_selector_stays_inside_its_word() -> None:
    # The analyzer reads "x<VS17>y" as the one term "xy" (the selector is presentation
    # only), so the whole word is marked for the query "xy", selector included.
    text = "x\U000e0100y z"
    assert make_snippet(text, "xy") == "<em>x\U000e0100y</em> z"


def test_picks_the_window_with_the_matches() -> None:
    text = FILLER_A + "the milvus vector database supports hybrid search natively. " + FILLER_B
    snippet = make_snippet(text, "hybrid milvus", max_chars=80)
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert marked(snippet) == ["milvus", "hybrid"]
    assert len(source_text(snippet)) <= 80
    assert source_text(snippet) in text


def test_prefers_more_distinct_terms_over_repeats() -> None:
    repeats = "milvus milvus milvus milvus milvus. "
    both = "milvus does hybrid retrieval. "
    text = repeats + FILLER_A + both + FILLER_B
    snippet = make_snippet(text, "milvus hybrid", max_chars=60)
    assert "<em>hybrid</em>" in snippet
    assert "<em>milvus</em>" in snippet


def test_more_matches_win_when_distinct_terms_tie() -> None:
    text = "alpha one. " + FILLER_A + "alpha alpha alpha. " + FILLER_B
    snippet = make_snippet(text, "alpha", max_chars=40)
    assert marked(snippet) == ["alpha"] * 3


def test_does_not_cut_words_at_the_window_edges() -> None:
    text = FILLER_A + "target " + FILLER_B
    snippet = source_text(make_snippet(text, "target", max_chars=50))
    words = set(text.split())
    for word in snippet.split():
        assert word in words


def test_no_match_gives_the_leading_window() -> None:
    text = "First sentence here. " + FILLER_A
    snippet = make_snippet(text, "absent", max_chars=40)
    assert snippet.startswith("First sentence here.")
    assert snippet.endswith("…")
    assert "<em>" not in snippet
    assert len(source_text(snippet)) <= 40


def test_short_text_is_whole_and_without_ellipsis() -> None:
    assert make_snippet("Short text.", "nothing") == "Short text."
    assert make_snippet("Short text.", "") == "Short text."
    assert make_snippet("", "query") == ""
    assert make_snippet("   ", "query") == ""
    assert make_snippet("  padded  ", "padded") == "<em>padded</em>"


def test_collapses_whitespace() -> None:
    assert make_snippet("one\n\n  two\tthree", "two") == "one <em>two</em> three"


def test_custom_markers_and_ellipsis() -> None:
    text = FILLER_A + "needle " + FILLER_B
    snippet = make_snippet(text, "needle", max_chars=30, pre="[", post="]", ellipsis="...")
    assert "[needle]" in snippet
    assert snippet.startswith("...")
    assert snippet.endswith("...")


@pytest.mark.parametrize("bad", [0, -1, MIN_SNIPPET_CHARS - 1, True, 10.5])
def test_rejects_tiny_windows(bad: object) -> None:
    with pytest.raises(InvalidRequestError, match="max_chars"):
        make_snippet("text", "q", max_chars=bad)  # type: ignore[arg-type]  # wrong on purpose


# --------------------------------------------------------------------------- HTML


def test_escapes_the_text_but_not_the_markers() -> None:
    snippet = make_snippet("<script>alert(\"x\")</script> & 'it' <em>fake</em>", "alert fake")
    assert snippet == (
        "&lt;script&gt;<em>alert</em>(&quot;x&quot;)&lt;/script&gt; &amp; &#x27;it&#x27;"
        " &lt;em&gt;<em>fake</em>&lt;/em&gt;"
    )


def test_escapes_around_marked_terms() -> None:
    assert make_snippet("B&Q", "b") == "<em>B</em>&amp;Q"
    assert make_snippet("x<y", "x y") == "<em>x</em>&lt;<em>y</em>"


@given(st.text(max_size=300), st.text(max_size=30), st.integers(MIN_SNIPPET_CHARS, 120))
def test_snippets_are_safe_and_faithful(text: str, query: str, max_chars: int) -> None:
    snippet = make_snippet(text, query, max_chars=max_chars)
    plain = snippet.replace("<em>", "").replace("</em>", "")
    # nothing from the text can open a tag or an attribute
    assert "<" not in plain
    assert ">" not in plain
    assert '"' not in plain
    shown = source_text(snippet)
    collapsed = re.sub(r"\s+", " ", text)
    assert shown in collapsed
    assert len(shown) <= max_chars
    terms = set(analyze(query))
    for piece in marked(snippet):
        # a marked run holds a query term; adjacent CJK matches merge into one run, so
        # its single characters count too
        text_of_piece = html.unescape(piece)
        found = set(analyze(text_of_piece)) | set(analyze(" ".join(text_of_piece)))
        assert found & terms, piece


# --------------------------------------------------------------------------- Japanese


def test_japanese_bigrams_inside_unspaced_text() -> None:
    assert make_snippet("今日は東京へ行きます。", "東京") == "今日は<em>東京</em>へ行きます。"


def test_japanese_overlapping_bigrams_merge() -> None:
    snippet = make_snippet("東京都は日本の首都です。東京の天気は晴れ。", "東京の天気")
    assert marked(snippet) == ["東京", "東京の天気"]


def test_japanese_single_character_query() -> None:
    assert make_snippet("京都と東京", "京") == "<em>京</em>都と東<em>京</em>"


def test_japanese_sentence_does_not_match_unrelated_bigrams() -> None:
    # 京都 shares 京 with 東京 but not the bigram
    assert make_snippet("京都に行った", "東京") == "京都に行った"


def test_japanese_window_and_mixed_scripts() -> None:
    text = "あ" * 200 + "Milvusでハイブリッド検索を試す。" + "い" * 200
    snippet = make_snippet(text, "milvus 検索", max_chars=40)
    assert marked(snippet) == ["Milvus", "検索"]
    assert snippet.startswith("…")
    assert snippet.endswith("…")
    assert len(source_text(snippet)) <= 40


def test_half_width_katakana_matches_full_width_query() -> None:
    assert marked(make_snippet("ﾃｽﾄです", "テスト")) == ["ﾃｽﾄ"]
