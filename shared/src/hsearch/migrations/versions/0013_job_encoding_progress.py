"""job encoding progress: chunks encoded of the document being encoded

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01

A document of many chunks (840,000 characters: thousands) held a worker for minutes
while the job reported ``0/1`` and the command line asked whether a worker ran. The
worker now records the document it encodes, its chunks encoded and their total, and
when (``encoding_at``: also what the sweeper reads to tell a busy worker).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(sa.Column("encoding_document", sa.String(length=512), nullable=True))
        batch.add_column(sa.Column("encoding_done", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("encoding_total", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("encoding_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("encoding_at")
        batch.drop_column("encoding_total")
        batch.drop_column("encoding_done")
        batch.drop_column("encoding_document")
