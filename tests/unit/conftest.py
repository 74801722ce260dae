"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from tests.unit.search.corpus import AilingEmbedder, AilingModelSparseEmbedder


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[sessionmaker[Session]]:
    """Sessions on a fresh SQLite database migrated with Alembic (one per test)."""
    url = f"sqlite:///{tmp_path / 'meta.sqlite'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    yield create_session_factory(engine)
    engine.dispose()


@pytest.fixture
def ailing() -> Iterator[AilingEmbedder]:
    """An encoder whose model fails or hangs when told (``ailment``), released after."""
    embedder = AilingEmbedder()
    yield embedder
    embedder.release()


@pytest.fixture
def ailing_model_sparse() -> Iterator[AilingModelSparseEmbedder]:
    embedder = AilingModelSparseEmbedder()
    yield embedder
    embedder.release()
