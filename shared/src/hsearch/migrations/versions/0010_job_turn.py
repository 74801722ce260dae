"""job turn: every message for a job carries its turn, so duplicates are dropped

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

The sweeper re-sends a job that has waited between turns longer than its lease,
although its message may still be queued; both messages then ran a turn and each
sent the job back, so the job kept two messages (and more with every long wait) and
ran several turns per round of the queue. ``turn`` counts the turns started; a message
carries the value it was sent with and starts a turn only while the job still has it.
Messages sent by the previous release carry none and run as before.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A constant default, as in 0009: added in place on SQLite, and processes of the
    # previous release keep inserting jobs during a rolling upgrade.
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(sa.Column("turn", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("turn")
