"""Alembic migrations; the ORM models in ``hsearch.db.models`` are the single source."""
