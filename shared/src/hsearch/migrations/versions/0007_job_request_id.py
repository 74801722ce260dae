"""job request id: the X-Request-Id of the request that submitted a job

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable: jobs submitted before this revision have none.
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.add_column(sa.Column("request_id", sa.String(length=128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ingestion_jobs") as batch:
        batch.drop_column("request_id")
