from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Enum, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base, JSONType, utcnow
from hsearch.types import CredentialRole, TenantStatus

__all__ = ["ApiKey", "AuditEvent", "Tenant"]


def _enum(cls: type[StrEnum], name: str) -> Enum:
    # Plain strings (no native ENUM type), as the job statuses: a new value is no DDL.
    return Enum(
        cls, name=name, native_enum=False, length=16, values_callable=lambda e: [m.value for m in e]
    )


class Tenant(Base):
    """A tenant: the isolation unit (Milvus partition key, metadata scope)."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    # Unique, so two concurrent ``hsearch tenants create`` of one name cannot both succeed
    # (compared as stored: exactly, after trimming).
    name: Mapped[str] = mapped_column(String(256), unique=True)
    status: Mapped[TenantStatus] = mapped_column(
        _enum(TenantStatus, "tenant_status"), default=TenantStatus.ACTIVE
    )
    # Bumped whenever the tenant's searchable data changes; cache keys include it.
    data_generation: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # The kinds of links found in a document's text when its submission does not say
    # (hsearch.graph.links.TextLinks values; None: none). Read at indexing.
    text_links: Mapped[list[str] | None] = mapped_column(JSONType, default=None)


class ApiKey(Base):
    """A credential: a tenant's key (scoped) or an operator's (no tenant).

    Only the HMAC-SHA-256 of the whole key under the server key is stored
    (``secret_hmac``, hex); the key itself is shown once, when it is created. Keys are
    found by their public ``prefix`` (``hsk_<12 hex>``), which is unique and safe to
    show and log. Rows are never deleted while their tenant exists: revoking sets
    ``revoked_at``, so an audit trail can always name the key that acted.
    """

    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint(
            "(role = 'operator' AND tenant_id IS NULL) OR "
            "(role = 'tenant' AND tenant_id IS NOT NULL)",
            name="role_tenant",
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    tenant_id: Mapped[str | None] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    role: Mapped[CredentialRole] = mapped_column(_enum(CredentialRole, "credential_role"))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    secret_hmac: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str]] = mapped_column(JSONType)
    name: Mapped[str] = mapped_column(String(256), default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(default=None)
    # Written when an API process verifies the key against the database: at most once
    # per ``auth.cache_ttl_s`` per process, not on every request.
    last_used_at: Mapped[datetime | None] = mapped_column(default=None)


class AuditEvent(Base):
    """One operator action: a command run on the server (``hsearch tenants``, ``keys``,
    ``operator``) or an API request an operator credential made for a tenant.

    No foreign keys: the trail outlives the keys and tenants it names.
    """

    __tablename__ = "audit_log"

    # Insertion order, even for events of one instant (SQLite numbers only INTEGER keys).
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(256))
    """Who: ``key:<prefix>`` for a credential, ``cli:<os user>`` for a command."""
    action: Mapped[str] = mapped_column(String(64))
    """What, as a dotted event (``tenant.create``, ``key.revoke``, ``api.request``)."""
    tenant_id: Mapped[str | None] = mapped_column(String(64), index=True, default=None)
    target: Mapped[str | None] = mapped_column(String(512), default=None)
    """On what: a key id, or the request's method and path."""
    detail: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
