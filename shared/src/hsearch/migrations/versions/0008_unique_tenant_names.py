"""unique tenant names: two tenants can no longer share one

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Before this revision ``hsearch tenants create`` accepted a name another tenant had.
Duplicates that exist are renamed, not refused (refusing would stop an upgrade on data
the operator may not be able to change before the API starts): the oldest tenant of a
name keeps it, each later one gets its id appended (``"Acme (t_1f2e)"``, the rule
:func:`hsearch.db.repositories.tenants.disambiguated_name` applies). Each rename is
written to the audit log (actor ``migration:0008``, action ``tenant.rename``). The
downgrade drops the constraint and leaves the names as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_NAME_LENGTH = 256
_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")

_tenants = sa.table(
    "tenants",
    sa.column("id", sa.String),
    sa.column("name", sa.String),
    sa.column("created_at", sa.DateTime(timezone=True)),
)
_audit = sa.table(
    "audit_log",
    sa.column("at", sa.DateTime(timezone=True)),
    sa.column("actor", sa.String),
    sa.column("action", sa.String),
    sa.column("tenant_id", sa.String),
    sa.column("detail", _JSON),
)


def _renamed(name: str, tenant_id: str) -> str:
    # Frozen copy of disambiguated_name: a migration must not change with the code.
    suffix = f" ({tenant_id})"
    return name[: _NAME_LENGTH - len(suffix)] + suffix


def rename_duplicates(bind: sa.engine.Connection) -> list[tuple[str, str, str]]:
    """Rename every tenant whose name an older tenant holds; ``(id, old, new)`` each."""
    rows = bind.execute(
        sa.select(_tenants.c.id, _tenants.c.name).order_by(_tenants.c.created_at, _tenants.c.id)
    ).all()
    taken = {name for _, name in rows}
    seen: set[str] = set()
    renames = []
    for tenant_id, name in rows:
        if name not in seen:
            seen.add(name)
            continue
        new = _renamed(name, tenant_id)
        if new in taken:
            raise RuntimeError(
                f"tenants.name: cannot rename tenant {tenant_id!r} (a duplicate of "
                f"{name!r}) to {new!r}: another tenant has that name; rename one of them "
                "by hand and upgrade again"
            )
        taken.add(new)
        renames.append((tenant_id, name, new))
    now = datetime.now(UTC)
    for tenant_id, old, new in renames:
        bind.execute(sa.update(_tenants).where(_tenants.c.id == tenant_id).values(name=new))
        bind.execute(
            sa.insert(_audit).values(
                at=now,
                actor="migration:0008",
                action="tenant.rename",
                tenant_id=tenant_id,
                detail={"from": old, "to": new, "reason": "duplicate name"},
            )
        )
    return renames


def upgrade() -> None:
    rename_duplicates(op.get_bind())
    with op.batch_alter_table("tenants") as batch:
        batch.create_unique_constraint(batch.f("uq_tenants_name"), ["name"])


def downgrade() -> None:
    with op.batch_alter_table("tenants") as batch:
        batch.drop_constraint(batch.f("uq_tenants_name"), type_="unique")
