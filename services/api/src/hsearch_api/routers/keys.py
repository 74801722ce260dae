"""``/v1/keys``: a tenant's own keys, behind a key with the ``admin`` scope; ``/v1/tokens``:
scoped search tokens, minted with a key holding ``search`` or ``admin``."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, status

from hsearch.tenancy.service import KeyView
from hsearch_api.deps import AdminTenantDep, MintTenantDep, PrincipalDep, TenancyDep
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses
from hsearch_api.schemas.keys import (
    KeyCreate,
    KeyCreated,
    KeyList,
    KeyRead,
    TokenCreate,
    TokenCreated,
)

router = APIRouter(prefix="/v1", tags=["keys"], responses=COMMON_ERRORS)


@router.post("/keys", status_code=status.HTTP_201_CREATED, responses=error_responses(413))
def create_key(
    body: KeyCreate, tenant: AdminTenantDep, principal: PrincipalDep, tenancy: TenancyDep
) -> KeyCreated:
    """Create a key for the tenant; the answer holds the key, shown this once."""
    created = tenancy.create_key(
        tenant,
        scopes=body.scopes,
        name=body.name,
        expires_at=body.expires_at,
        actor=principal.actor,
    )
    return KeyCreated(**key_read(created.view).model_dump(), key=created.key)


@router.get("/keys")
def list_keys(tenant: AdminTenantDep, tenancy: TenancyDep) -> KeyList:
    """The tenant's keys (revoked and expired ones too), without the keys themselves."""
    return KeyList(keys=[key_read(k) for k in tenancy.list_keys(tenant)])


@router.delete("/keys/{key_id}", responses=error_responses(404))
def revoke_key(
    key_id: uuid.UUID, tenant: AdminTenantDep, principal: PrincipalDep, tenancy: TenancyDep
) -> KeyRead:
    """Revoke one of the tenant's keys: refused at once here, within auth.cache_ttl_s
    by every API process."""
    return key_read(tenancy.revoke_key(key_id, tenant_id=tenant, actor=principal.actor))


@router.post(
    "/tokens", status_code=status.HTTP_201_CREATED, tags=["tokens"], responses=error_responses(413)
)
def create_token(
    body: TokenCreate, _tenant: MintTenantDep, principal: PrincipalDep, tenancy: TenancyDep
) -> TokenCreated:
    """Mint a short-lived search token restricted to a filter, for a browser to search with."""
    minted = tenancy.mint_token(
        principal, filter=body.filter, max_top_k=body.max_top_k, expires_in_s=body.expires_in_s
    )
    return TokenCreated(token=minted.token, expires_at=minted.expires_at)


def key_read(view: KeyView) -> KeyRead:
    return KeyRead(
        id=view.id,
        prefix=view.prefix,
        scopes=list(view.scopes),
        name=view.name,
        created_at=view.created_at,
        expires_at=view.expires_at,
        revoked_at=view.revoked_at,
        last_used_at=view.last_used_at,
    )
