"""concepts: each document's chunks' concepts (the Level 1 index of lazy search)

Revision ID: 0016
Revises: 0015
Create Date: 2027-01-12

The concepts (noun phrases and entities) of each chunk of an indexed document, aligned
with its ``chunk_ids``: ``{"v": extractor version, "chunks": [[concept, ...], ...]}``;
null until extracted (documents indexed before this revision: ``hsearch reconcile``
extracts them). A tenant's concept graph and communities are built from them in memory
(docs/lazy.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("concepts", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("concepts")
