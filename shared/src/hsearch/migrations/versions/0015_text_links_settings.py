"""text links: the tenant's setting, and each document's choice

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-09

Which kinds of links are found in a document's text: a tenant's setting
(``tenants.text_links``, for submissions that do not say; none by default) and, on each
indexed document, what its submission said (``documents.text_links``; null: the
tenant's setting), so ``hsearch links relink`` finds a document's links again as its
indexing did.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(sa.Column("text_links", _JSON, nullable=True))
    with op.batch_alter_table("documents") as batch:
        batch.add_column(sa.Column("text_links", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("documents") as batch:
        batch.drop_column("text_links")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("text_links")
