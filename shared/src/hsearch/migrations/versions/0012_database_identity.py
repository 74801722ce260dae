"""database identity: the id a data directory's vector data is recorded against

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01

A data directory's Milvus Lite data belongs to one metadata database: started with
another (a Postgres URL set on a directory first used with SQLite), its chunks were
served as ghost hits. ``database_identity`` holds one row, a random id made here; the
data directory records it on first start and ``hsearch run`` refuses a database whose
id differs (:mod:`hsearch.datadir`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    table = op.create_table(
        "database_identity",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_database_identity")),
    )
    op.bulk_insert(table, [{"id": uuid.uuid4(), "created_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("database_identity")
