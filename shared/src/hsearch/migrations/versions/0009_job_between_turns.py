"""job between turns: a job's attempts count re-runs, not turns

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

A job runs in turns (``ingest.batches_per_task`` batches each, then back to the queue)
and ``attempts`` counted every turn: a healthy job of 10,000 documents ended with
attempts 157. ``between_turns`` marks a job whose last turn ended as planned, so that
its next turn is not counted as an attempt; an interrupted turn (a killed worker, a
failed attempt, a shutdown) leaves it false, and the re-run counts. Jobs between turns
when this revision runs count their next turn once more, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default: SQLite adds the column in place (no rebuild of the table), and
    # processes of the previous release, which insert jobs without it, keep working
    # while a rolling upgrade runs.
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(
            sa.Column("between_turns", sa.Boolean(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("between_turns")
