"""The tenant's BM25 statistics on Postgres: a group's term changes go in as one
statement (two arrays unnested), adding to, creating and removing term rows exactly as
the SQLite statement does (tests/unit/lexical/test_statistics.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import transaction
from hsearch.db.repositories.lexical import LexicalStatsRepository, TermDeltas, VocabularyRepository
from hsearch.db.repositories.tenants import TenantRepository
from tests.unit.lexical.test_statistics import check_term_deltas

pytestmark = pytest.mark.integration


def test_term_deltas_add_create_and_remove_rows(
    sessions: sessionmaker[Session], tenant: str
) -> None:
    check_term_deltas(sessions, tenant)


def test_tenants_keep_their_own_rows(sessions: sessionmaker[Session], tenant: str) -> None:
    other = f"{tenant}x"
    with transaction(sessions) as session:
        for name in (tenant, other):
            TenantRepository(session).ensure(name)
        LexicalStatsRepository(session).apply_delta(
            tenant, chunks=1, length=4, term_deltas=TermDeltas.of({7: 1})
        )
        LexicalStatsRepository(session).apply_delta(
            other, chunks=1, length=4, term_deltas=TermDeltas.of({7: 5})
        )
    with transaction(sessions) as session:
        stats = LexicalStatsRepository(session)
        assert stats.document_frequencies(tenant, [7]) == {7: 1}
        assert stats.document_frequencies(other, [7]) == {7: 5}


def test_the_vocabulary_lists_each_word_once_per_tenant(
    sessions: sessionmaker[Session], tenant: str
) -> None:
    """One statement (an array unnested), listed words left as they are, on Postgres as
    on SQLite (tests/unit/api/test_search_box.py)."""
    other = f"{tenant}v"
    with transaction(sessions) as session:
        for name in (tenant, other):
            TenantRepository(session).ensure(name)
        VocabularyRepository(session).add(tenant, ["boundary", "layer", "naïve"])
        VocabularyRepository(session).add(other, ["plate"])
    with transaction(sessions) as session:
        VocabularyRepository(session).add(tenant, ["layer", "plate"])
        VocabularyRepository(session).add(tenant, [])
    with transaction(sessions) as session:
        words = VocabularyRepository(session)
        assert sorted(words.words(tenant)) == ["boundary", "layer", "naïve", "plate"]
        assert words.words(other) == ["plate"]
