"""api keys: tenants' status, hashed scoped keys, the operators' audit log

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    # Existing tenants stay usable: they are active (the default is dropped after).
    with op.batch_alter_table("tenants") as batch:
        batch.add_column(
            sa.Column(
                "status",
                sa.Enum("active", "suspended", name="tenant_status", native_enum=False, length=16),
                nullable=False,
                server_default="active",
            )
        )
    with op.batch_alter_table("tenants") as batch:
        batch.alter_column("status", server_default=None)

    op.create_table(
        "api_keys",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column(
            "role",
            sa.Enum("tenant", "operator", name="credential_role", native_enum=False, length=16),
            nullable=False,
        ),
        sa.Column("prefix", sa.String(length=32), nullable=False),
        sa.Column("secret_hmac", sa.String(length=64), nullable=False),
        sa.Column("scopes", _JSON, nullable=False),
        sa.Column("name", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(role = 'operator' AND tenant_id IS NULL) OR "
            "(role = 'tenant' AND tenant_id IS NOT NULL)",
            name=op.f("ck_api_keys_role_tenant"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("fk_api_keys_tenant_id_tenants"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("prefix", name=op.f("uq_api_keys_prefix")),
    )
    with op.batch_alter_table("api_keys") as batch:
        batch.create_index(batch.f("ix_api_keys_tenant_id"), ["tenant_id"], unique=False)

    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=256), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("tenant_id", sa.String(length=64), nullable=True),
        sa.Column("target", sa.String(length=512), nullable=True),
        sa.Column("detail", _JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    with op.batch_alter_table("audit_log") as batch:
        batch.create_index(batch.f("ix_audit_log_at"), ["at"], unique=False)
        batch.create_index(batch.f("ix_audit_log_tenant_id"), ["tenant_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_index(batch.f("ix_audit_log_tenant_id"))
        batch.drop_index(batch.f("ix_audit_log_at"))
    op.drop_table("audit_log")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_index(batch.f("ix_api_keys_tenant_id"))
    op.drop_table("api_keys")
    with op.batch_alter_table("tenants") as batch:
        batch.drop_column("status")
