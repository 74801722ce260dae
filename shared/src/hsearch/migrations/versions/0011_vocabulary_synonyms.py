"""vocabulary and synonyms: the words typo tolerance matches, a tenant's synonyms

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28

``lexical_vocabulary`` lists the words of each tenant's indexed text (the indexer adds
them); documents indexed before this revision add theirs when they are indexed again
(``hsearch reindex``, or a new version of them). ``synonym_sets`` holds what
``PUT /v1/synonyms`` stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lexical_vocabulary",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("word", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_lexical_vocabulary_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "word", name=op.f("pk_lexical_vocabulary")),
    )
    op.create_table(
        "synonym_sets",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column(
            "rules",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_synonym_sets_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("pk_synonym_sets")),
    )


def downgrade() -> None:
    op.drop_table("synonym_sets")
    op.drop_table("lexical_vocabulary")
