"""What the keyword leg searches beyond the words typed, and how much it weighs."""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import transaction
from hsearch.db.repositories.lexical import VocabularyRepository
from hsearch.db.repositories.synonyms import SynonymRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.lexical.additions import (
    Expanded,
    ExpansionKind,
    TenantLexicon,
    expand_learned,
    expand_query,
    expansion_candidates,
)
from hsearch.lexical.analyzer import analyze_query, query_term_frequencies, term_id
from hsearch.lexical.expansion import QueryExpander
from hsearch.lexical.synonyms import Synonyms
from hsearch.lexical.typos import Vocabulary
from hsearch.types import SparseVector

WORDS = ["boundary", "boundaries", "layer", "hypersonic", "plate", "automobile"]
HELD = {term_id(t) for w in WORDS for t in analyze_query(w)}


def weigh(tf: SparseVector) -> SparseVector:
    """IDF 2.0 for every term the corpus holds (the stems of WORDS)."""
    return SparseVector.from_mapping({i: 2.0 for i in tf.indices if i in HELD})


def expand(
    query: str, *, typos: bool = True, prefix: bool = False, synonyms: Synonyms | None = None
) -> Expanded:
    lexicon = TenantLexicon(Vocabulary(WORDS), synonyms or Synonyms())
    return expand_query(
        words=query.split(),
        text=query,
        weights=weigh(query_term_frequencies(query)),
        lexicon=lexicon,
        weigh=weigh,
        typos=typos,
        prefix=prefix,
    )


def stem_weight(vector: SparseVector, word: str) -> float:
    return vector.to_dict().get(term_id(analyze_query(word)[0]), 0.0)


def test_a_corrected_word_weighs_less_than_the_word_as_typed() -> None:
    expanded = expand("boundry layer")
    assert [(e.query, e.matched, e.kind, e.typos) for e in expanded.expansions] == [
        ("boundry", "boundary", ExpansionKind.TYPO, 1)
    ]
    assert stem_weight(expanded.vector, "layer") == 2.0
    assert 0 < stem_weight(expanded.vector, "boundary") < 2.0


def test_two_typos_weigh_less_than_one() -> None:
    one = stem_weight(expand("hypersonik").vector, "hypersonic")
    two = stem_weight(expand("hypresonik").vector, "hypersonic")
    assert 0 < two < one < 2.0


def test_words_the_corpus_holds_are_not_corrected_and_typos_can_be_off() -> None:
    assert expand("boundaries layer").expansions == ()
    off = expand("boundry layer", typos=False)
    assert off.expansions == ()
    assert stem_weight(off.vector, "boundary") == 0.0


def test_prefix_completes_the_last_word() -> None:
    expanded = expand("hyper", prefix=True)
    assert [(e.matched, e.kind) for e in expanded.expansions] == [
        ("hypersonic", ExpansionKind.PREFIX)
    ]
    assert expand("hyper").expansions == ()


def test_synonyms_add_what_the_corpus_holds() -> None:
    synonyms = Synonyms([{"words": ["car", "automobile", "motorcar"]}])
    expanded = expand("car", synonyms=synonyms)
    # "motorcar" is held by no document: it adds nothing.
    assert [(e.query, e.matched) for e in expanded.expansions] == [("car", "automobile")]
    assert 0 < stem_weight(expanded.vector, "automobile") < 2.0


def test_a_learned_encoders_additions_are_its_own_weights_scaled_down() -> None:
    lexicon = TenantLexicon(Vocabulary(WORDS), Synonyms([{"words": ["car", "automobile"]}]))
    candidates = expansion_candidates(
        words=["boundry", "car"],
        text="boundry car",
        lexicon=lexicon,
        known=lambda word: word in {"car"},
        typos=True,
        prefix=False,
    )
    assert [(c.matched, c.kind) for c in candidates] == [
        ("boundary", ExpansionKind.TYPO),
        ("automobile", ExpansionKind.SYNONYM),
    ]
    query = SparseVector.from_mapping({1: 0.5, 2: 0.3})  # "boundry", "car" as encoded
    vectors = {
        "boundary": SparseVector.from_mapping({3: 0.4, 2: 0.9}),
        "automobile": SparseVector.from_mapping({4: 0.5}),
    }
    expanded = expand_learned(query, candidates, vectors)
    assert expanded.expansions == tuple(candidates)
    # The query's own terms keep their weights; each addition weighs its factor's share.
    assert expanded.vector.to_dict() == {1: 0.5, 2: 0.3, 3: 0.4 * 0.6, 4: 0.5 * 0.8}
    # An addition the encoder gives no weight (nothing to search for) is left out.
    none = expand_learned(query, candidates, {"boundary": SparseVector.from_mapping({})})
    assert none.expansions == ()
    assert none.vector == query


def test_the_expander_rereads_synonyms_at_once_and_the_vocabulary_at_most_every_refresh(
    sessions: sessionmaker[Session],
) -> None:
    now = [0.0]
    expander = QueryExpander(sessions, refresh_s=5.0, clock=lambda: now[0])
    with transaction(sessions) as session:
        TenantRepository(session).ensure("t")
        VocabularyRepository(session).add("t", ["boundary"])
    first = expander.lexicon("t")
    assert "boundary" in first.vocabulary
    assert not first.synonyms
    assert expander.lexicon("t") is first, "the same generation: nothing is read again"

    def write(words: list[str], rules: list[dict[str, object]] | None = None) -> None:
        with transaction(sessions) as session:
            VocabularyRepository(session).add("t", words)
            if rules is not None:
                SynonymRepository(session).put("t", rules)
            TenantRepository(session).bump_generation("t")

    write(["plate"], [{"words": ["car", "automobile"]}])
    now[0] = 4.9
    second = expander.lexicon("t")
    assert second.synonyms.lookup("car") == [("car", "automobile")]
    assert "plate" not in second.vocabulary, "words read less than refresh_s ago are kept"
    write(["layer"])
    now[0] = 5.0
    third = expander.lexicon("t")
    assert "plate" in third.vocabulary
    assert "layer" in third.vocabulary
