"""``/v1/settings``: the tenant's settings (docs/graph.md, Links found in the text)."""

from __future__ import annotations

from collections.abc import Collection

from fastapi import APIRouter

from hsearch.graph.links import TextLinks
from hsearch_api.deps import IngestTenantDep, PrincipalDep, ReadTenantDep, TenancyDep
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses
from hsearch_api.schemas.tenant_settings import TenantSettingsPatch, TenantSettingsRead

router = APIRouter(prefix="/v1", tags=["settings"], responses=COMMON_ERRORS)


@router.get("/settings")
def read_settings(tenant: ReadTenantDep, tenancy: TenancyDep) -> TenantSettingsRead:
    """The tenant's settings."""
    return _read(tenancy.text_links(tenant))


@router.patch("/settings", responses=error_responses(413))
def change_settings(
    body: TenantSettingsPatch, tenant: IngestTenantDep, principal: PrincipalDep, tenancy: TenancyDep
) -> TenantSettingsRead:
    """Change the tenant's settings (those left out stay); nothing indexed is changed: run
    `hsearch links relink` to apply `text_links` to the documents indexed already."""
    if body.text_links is None:
        return _read(tenancy.text_links(tenant))
    return _read(tenancy.set_text_links(tenant, body.text_links, actor=principal.actor))


def _read(text_links: Collection[TextLinks]) -> TenantSettingsRead:
    return TenantSettingsRead(text_links=sorted(text_links))
