"""Concepts of texts with the real spaCy and GiNZA pipelines: noun chunks and entities
as normalised keys, in order, once each, within the limit; the lexical fallback when a
pipeline cannot load."""

from __future__ import annotations

import pytest

from hsearch.concepts.extract import ConceptExtractor, concept_key, is_japanese


@pytest.fixture(scope="module")
def extractor() -> ConceptExtractor:
    return ConceptExtractor()


def test_english_noun_chunks_and_entities_normalised(extractor: ConceptExtractor) -> None:
    [found] = extractor.extract(
        [
            "The Journal of Mathematical Physics publishes papers. In 1963 the journal "
            "moved to the American Institute of Physics in New York."
        ],
        lang="en",
    )
    # Determiners dropped, nouns lemmatised (papers), "physics" kept whole, the year
    # (a date entity) left out, the journal once, in order of first appearance.
    assert found[:2] == ("journal", "journal of mathematical physics")
    assert "paper" in found
    assert "mathematical physics" in found
    assert "american institute of physics" in found
    assert "new york" in found
    assert "1963" not in found
    assert found.index("paper") < found.index("new york")
    assert len(found) == len(set(found))
    assert all(len(c) >= 2 and c == c.casefold() for c in found)


def test_japanese_noun_chunks_and_entities(extractor: ConceptExtractor) -> None:
    text = "第一次世界大戦は1914年に始まった。アルベルト・アインシュタインは相対性理論を発表した。"
    [found] = extractor.extract([text], lang="ja")
    assert "第一次世界大戦" in found
    assert "アルベルト・アインシュタイン" in found
    assert "相対性理論" in found
    assert not any(c.startswith("1914") for c in found)
    # Untagged text: its script decides, text by text.
    assert extractor.extract([text, "Rivers of Europe."], lang="")[0] == found


def test_the_limit_per_text_and_batches_keep_their_order() -> None:
    small = ConceptExtractor(max_per_text=2, batch_size=1)
    texts = ["Paris, London and Berlin are capitals.", "", "Volcanoes erupt on Iceland."]
    found = small.extract(texts, lang="en")
    assert len(found) == 3
    assert found[0] == ("paris", "london")
    assert found[1] == ()
    assert "volcano" in found[2]


def test_query_concepts_detect_the_language(extractor: ConceptExtractor) -> None:
    assert "world war" in extractor.query_concepts("Who started the First World War?")
    assert "相対性理論" in extractor.query_concepts("相対性理論とは何か")
    assert is_japanese("東京")
    assert not is_japanese("Tokyo")


def test_a_key_drops_edge_words_and_punctuation() -> None:
    words = [
        ("The", " ", "the", True, "DET"),
        ("2018", " ", "2018", False, "NUM"),
        ("Impact", " ", "impact", False, "PROPN"),
        ("Factors", "", "factor", False, "NOUN"),
        ("'s", "", "'s", False, "PART"),
    ]
    assert concept_key(words, japanese=False) == "impact factor"
    assert concept_key([("It", "", "it", True, "PRON")], japanese=False) is None
    assert concept_key([("42", "", "42", False, "PROPN")], japanese=False) is None
    fullwidth_x = "\uff38"  # NFKC: one character
    assert concept_key([(fullwidth_x, "", "x", False, "NOUN")], japanese=False) is None


def test_a_pipeline_that_cannot_load_falls_back_to_lexical_terms() -> None:
    def broken(name: str) -> object:
        raise OSError(f"no model {name}")

    fallback = ConceptExtractor(load=broken)
    [found] = fallback.extract(["Volcanoes erupt where plates meet."], lang="en")
    assert found == ("volcano", "erupt", "plate", "meet")
    assert fallback.version("en").endswith("-lexical")
    assert not ConceptExtractor().version("en").endswith("-lexical")
