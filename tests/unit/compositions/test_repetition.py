"""A model that loops is recognised by its text's end, and ordinary text is not."""

from __future__ import annotations

import pytest

from hsearch.compositions.answers.repetition import looping

# What SmolLM2-135M wrote for JSQuAD questions (bench.answers --records).
LOOPS = [
    "あなたのコミニカの通貨は、キュルやカリブ・ドルのカリブ・ドルのカリブ・ドルのカリブ・ドルのカリ",
    "ラオスの首都は、ラオスのラカエッパエラララララララララララララララララララララララララ",
    "文章は、コンゴ共和国のコンゴ共和国のコンゴ共和国のコンゴ共和国のコンゴ共和国の",
    "The passage is about rivers. The passage is about rivers. The passage is about rivers. "
    "The passage is about rivers. ",
    "Answer: " + "1. The passage says " * 4,
    "-" * 24,
]

PROSE = [
    "Volcanoes form where magma rises through the crust [1]. Hawaii sits over a hotspot [2].",
    "文章は、1977年3月にマリアン・ングアビはコンゴ共和国の正式名称とドニ・サスヌゲソが政権の座に就いた。",
    "He laughed: ha ha ha ha. Then he said it again, very, very, very slowly.",
    "Wait...... what?",
    "The numbers 1111 and 2222 are not a loop, nor is the year 1999 or 2000.",
    "a " + " " * 60,  # white space alone is not a unit
    "",
    "-" * 23,
]


@pytest.mark.parametrize("text", LOOPS)
def test_a_loop_at_the_end_is_recognised(text: str) -> None:
    assert looping(text)


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_text_is_not_a_loop(text: str) -> None:
    assert not looping(text)


def test_a_loop_that_ended_is_not_recognised_later() -> None:
    # The check is of the end: what the model writes after a repeated run counts.
    assert not looping("のカリブ・ドル" * 5 + "。それでおしまいです、と文章は言っています。")


def test_the_thresholds_are_arguments() -> None:
    assert not looping("abcabcabc", min_span=24)
    assert looping("abcabcabc", min_repeats=3, min_span=9)
    assert not looping("x" * 100, max_unit=0)
