"""Citations decided by code: the assembler holds every marker back, the checker keeps
only what the passages support, whatever the model wrote."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hsearch.compositions.answers.citations import (
    Closed,
    SentenceAssembler,
    best_quote,
    check_sentence,
    marker_suffix,
    support_score,
)

PASSAGES = [
    "Rivers carry water from the mountains down to the sea.",
    "Volcanoes form where magma reaches the surface.",
    "東京は日本の首都です。人口が多い都市です。",
]


def assemble(chunks: list[str]) -> list[str | Closed]:
    assembler = SentenceAssembler()
    out: list[str | Closed] = []
    for chunk in chunks:
        out += assembler.feed(chunk)
    return out + assembler.finish()


def shown(items: list[str | Closed]) -> str:
    return "".join(i for i in items if isinstance(i, str))


def closed(items: list[str | Closed]) -> list[Closed]:
    return [i for i in items if isinstance(i, Closed)]


def test_markers_are_held_back_and_attached_to_their_sentence() -> None:
    items = assemble(["Paris is the cap", "ital.[1] It has 2.5 mil", "lion people [2, 9]. Done [3"])
    assert shown(items) == "Paris is the capital. It has 2.5 million people. Done"
    assert [(c.text, c.markers) for c in closed(items)] == [
        ("Paris is the capital.", (1,)),
        ("It has 2.5 million people.", (2, 9)),
        ("Done", ()),
    ]


def test_japanese_sentences_end_at_their_full_stop() -> None:
    items = assemble(["東京は日本の首都です[1]。京都は", "古い都です。"])
    assert [(c.text, c.markers) for c in closed(items)] == [
        ("東京は日本の首都です。", (1,)),
        ("京都は古い都です。", ()),
    ]


def test_brackets_that_are_not_markers_stay_text() -> None:
    items = assemble(["See [citation needed] and [a] here."])
    assert shown(items) == "See [citation needed] and [a] here."


@given(st.text(alphabet="ab [].1239,\n。", max_size=60), st.integers(1, 7))
def test_no_marker_survives_any_text_cut_anywhere(text: str, size: int) -> None:
    """Whatever a model writes and however the stream is cut, what is shown holds no
    citation marker, and the sentences closed are what is shown."""
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    items = assemble(chunks)
    visible = shown(items)
    assert not __import__("re").search(r"\[\d+(\s*[,;]\s*\d+)*\]", visible)
    assert "".join(c.text for c in closed(items)).replace(" ", "").replace("\n", "") == (
        visible.replace(" ", "").replace("\n", "")
    )


def test_a_copied_sentence_is_cited_to_its_passage_whatever_the_marker() -> None:
    checked = check_sentence(PASSAGES[0], PASSAGES, markers=[2, 9], threshold=0.5)
    assert [c.passage for c in checked.citations] == [0]
    assert checked.supported
    assert checked.dropped == (2, 9)
    assert marker_suffix(checked.citations) == "[1]"


def test_a_made_up_sentence_is_flagged_and_cites_nothing() -> None:
    checked = check_sentence(
        "Bananas orbit the moon on Tuesdays.", PASSAGES, markers=[1], threshold=0.5
    )
    assert not checked.supported
    assert checked.citations == ()


def test_support_works_for_japanese_without_spaces() -> None:
    assert support_score("東京は日本の首都です。", PASSAGES[2]) == 1.0
    assert support_score("大阪は港町です。", PASSAGES[2]) < 0.5
    checked = check_sentence("東京は日本の首都です。", PASSAGES, threshold=0.5)
    assert [c.passage for c in checked.citations] == [2]


def test_the_model_s_supported_markers_are_kept_in_its_order() -> None:
    both = ["Rivers carry water to the sea.", "Rivers carry water to the sea, fast."]
    checked = check_sentence("Rivers carry water to the sea.", both, markers=[2, 1], threshold=0.5)
    assert [c.passage for c in checked.citations] == [1, 0]


def test_the_quote_is_the_passage_sentence_that_supports() -> None:
    start, end = best_quote("Tokyo has many people", "Tokyo is big. It has many people. The end.")
    assert "Tokyo is big. It has many people. The end."[start:end] == "It has many people."


def test_abbreviations_and_initials_end_no_sentence() -> None:
    items = assemble(
        ["The first president was Dr. Jennifer Callahan. G. Stanley Hall ", "was next."]
    )
    assert [c.text for c in closed(items)] == [
        "The first president was Dr. Jennifer Callahan.",
        "G. Stanley Hall was next.",
    ]
