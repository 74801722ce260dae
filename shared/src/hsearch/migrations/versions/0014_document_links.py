"""document links: the document graph's edges, and the links a submission carries

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-02

A document may link to others (``links`` on a submission, or found in its text): the
links of every indexed document are rows of ``document_links``, keyed by both ends'
document ids, and a job item keeps the links it was submitted with until it is indexed.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "document_links",
        sa.Column("tenant_id", sa.String(length=64), nullable=False),
        sa.Column("source_id", sa.Uuid(), nullable=False),
        sa.Column("target_id", sa.Uuid(), nullable=False),
        sa.Column("type", sa.String(length=64), nullable=False),
        sa.Column("target_external_id", sa.String(length=512), nullable=False),
        sa.Column("weight", sa.Float(), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_document_links_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "source_id", "target_id", "type", name=op.f("pk_document_links")
        ),
    )
    op.create_index("ix_document_links_target", "document_links", ["tenant_id", "target_id"])
    with op.batch_alter_table("job_items") as batch:
        batch.add_column(sa.Column("links", _JSON, nullable=True))
        batch.add_column(sa.Column("text_links", _JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("job_items") as batch:
        batch.drop_column("text_links")
        batch.drop_column("links")
    op.drop_index("ix_document_links_target", table_name="document_links")
    op.drop_table("document_links")
