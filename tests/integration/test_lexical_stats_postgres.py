"""The tenant's BM25 statistics on Postgres: a group's term changes go in as one
statement (two arrays unnested), adding to, creating and removing term rows exactly as
the SQLite statement does (tests/unit/lexical/test_statistics.py)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import transaction
from hsearch.db.repositories.lexical import LexicalStatsRepository
from hsearch.db.repositories.tenants import TenantRepository

pytestmark = pytest.mark.integration


def test_term_deltas_add_create_and_remove_rows(
    sessions: sessionmaker[Session], tenant: str
) -> None:
    big = 2**62 + 7  # term ids are 64-bit
    with transaction(sessions) as session:
        TenantRepository(session).ensure(tenant)
        LexicalStatsRepository(session).apply_delta(
            tenant, chunks=3, length=30, term_deltas={1: 2, 5: 1, big: 3}
        )
    with transaction(sessions) as session:
        LexicalStatsRepository(session).apply_delta(
            tenant, chunks=-1, length=-10, term_deltas={1: 1, 5: -1, big: -1, 9: 4, 11: 0}
        )
    with transaction(sessions) as session:
        stats = LexicalStatsRepository(session)
        assert stats.corpus(tenant) == (2, 20)
        assert stats.document_frequencies(tenant, [1, 5, 9, 11, big]) == {1: 3, 9: 4, big: 2}


def test_tenants_keep_their_own_rows(sessions: sessionmaker[Session], tenant: str) -> None:
    other = f"{tenant}x"
    with transaction(sessions) as session:
        for name in (tenant, other):
            TenantRepository(session).ensure(name)
        LexicalStatsRepository(session).apply_delta(tenant, chunks=1, length=4, term_deltas={7: 1})
        LexicalStatsRepository(session).apply_delta(other, chunks=1, length=4, term_deltas={7: 5})
    with transaction(sessions) as session:
        stats = LexicalStatsRepository(session)
        assert stats.document_frequencies(tenant, [7]) == {7: 1}
        assert stats.document_frequencies(other, [7]) == {7: 5}
