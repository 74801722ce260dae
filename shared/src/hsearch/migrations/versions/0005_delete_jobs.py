"""delete jobs: a job's kind, a delete job's filter, and what it deleted

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(
            sa.Column(
                "kind",
                sa.Enum("ingest", "delete", name="job_kind", native_enum=False, length=16),
                nullable=False,
                server_default="ingest",
            )
        )
        batch.add_column(
            sa.Column(
                "filter",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )
        batch.add_column(sa.Column("deleted", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.alter_column("kind", server_default=None)
        batch.alter_column("deleted", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("deleted")
        batch.drop_column("filter")
        batch.drop_column("kind")
