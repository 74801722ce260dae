"""job webhooks: a URL called when the job ends, and its delivery state

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(sa.Column("webhook_url", sa.String(length=2048), nullable=True))
        batch.add_column(
            sa.Column("webhook_attempts", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("webhook_next_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(
            sa.Column("webhook_delivered_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch.add_column(sa.Column("webhook_error", sa.Text(), nullable=True))
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.alter_column("webhook_attempts", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("webhook_error")
        batch.drop_column("webhook_delivered_at")
        batch.drop_column("webhook_next_at")
        batch.drop_column("webhook_attempts")
        batch.drop_column("webhook_url")
