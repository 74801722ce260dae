"""bench.answers' scores: answer recall on normalised text, citation precision and
recall against the right passages, the cite-the-top-passage baseline."""

from __future__ import annotations

from bench.answers import Scored, Totals, normalise, summarise


def scored(
    sentences: list[tuple[str, tuple[int, ...], tuple[int, ...]]],
    right: set[int],
    *,
    recall: bool = True,
) -> Scored:
    return Scored(
        answered=True,
        recall=recall,
        sentences=sentences,
        passages=["Rivers carry water to the sea.", "Deserts are dry.", "Oceans are big."],
        right=right,
        ttft_ms=100.0,
        answer_ms=500.0,
        tokens_in=300,
        tokens_out=20,
        unsupported=0,
    )


def test_normalise_folds_case_width_and_punctuation() -> None:
    assert normalise("G. Stanley  Hall!") == "g stanley hall"
    assert normalise("\uff21\uff22\uff23") == "abc"  # full-width ABC


def test_precision_counts_citations_and_recall_the_right_passages_cited() -> None:
    totals = Totals()
    totals.add([{1}, {2}], right={1, 3})
    assert totals.citations == 2
    assert totals.right_citations == 1
    assert totals.recalls == [0.5]
    scores = totals.scores()
    assert scores["citation_precision"] == 0.5
    assert scores["citation_recall"] == 0.5
    assert scores["citation_f1"] == 0.5


def test_the_baseline_cites_the_top_passage_for_every_sentence() -> None:
    one = scored(
        [("Rivers carry water to the sea.", (2,), (1,)), ("Deserts are dry.", (), (2,))], {2}
    )
    result = summarise([one], thresholds=(0.5,))
    assert result["answers"]["citation_precision"] == 0.5
    assert result["answers"]["citation_recall"] == 1.0
    assert result["baseline"]["citation_precision"] == 0.0
    assert result["baseline"]["citation_recall"] == 0.0
    # Replayed at the same threshold with the markers rule: the service's own result.
    assert result["sweep"]["markers@0.5"] == {
        k: result["answers"][k] for k in ("citation_precision", "citation_recall", "citation_f1")
    }
    assert result["answers"]["answer_recall"] == 1.0
    assert result["answers"]["answer_ms"] == {"p50": 500.0, "p95": 500.0}
