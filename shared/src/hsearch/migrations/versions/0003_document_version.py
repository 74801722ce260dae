"""document version: the submission a document's indexed version comes from

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("version", sa.BigInteger(), nullable=False, server_default="0"))
    with op.batch_alter_table("documents") as batch:
        batch.alter_column("version", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("version")
