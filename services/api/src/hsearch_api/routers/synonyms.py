"""``/v1/synonyms``: a tenant's synonyms, applied to the keyword leg at query time
(docs/search.md, Synonyms)."""

from __future__ import annotations

from fastapi import APIRouter

from hsearch_api.deps import AdminTenantDep, PrincipalDep, TenancyDep
from hsearch_api.schemas.errors import COMMON_ERRORS, error_responses
from hsearch_api.schemas.synonyms import SynonymSet

router = APIRouter(prefix="/v1", tags=["synonyms"], responses=COMMON_ERRORS)


@router.get("/synonyms", response_model_exclude_none=True)
def get_synonyms(tenant: AdminTenantDep, tenancy: TenancyDep) -> SynonymSet:
    """The tenant's synonyms."""
    return SynonymSet.model_validate({"synonyms": tenancy.synonyms(tenant)})


@router.put("/synonyms", responses=error_responses(413), response_model_exclude_none=True)
def put_synonyms(
    body: SynonymSet, tenant: AdminTenantDep, principal: PrincipalDep, tenancy: TenancyDep
) -> SynonymSet:
    """Replace the tenant's synonyms; cached results of the old ones are not served."""
    rules = [rule.model_dump(by_alias=True, exclude_none=True) for rule in body.synonyms]
    stored = tenancy.set_synonyms(tenant, rules, actor=principal.actor)
    return SynonymSet.model_validate({"synonyms": stored})
