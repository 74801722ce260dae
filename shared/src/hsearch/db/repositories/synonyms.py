"""A tenant's synonyms, stored as ``PUT /v1/synonyms`` took them."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from hsearch.db.base import utcnow
from hsearch.db.models import SynonymSet


class SynonymRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's rules (none when it never stored any)."""
        row = self._session.get(SynonymSet, tenant_id, populate_existing=True)
        return list((row.rules or {}).get("synonyms", [])) if row else []

    def put(self, tenant_id: str, rules: list[dict[str, Any]]) -> None:
        """Replace the tenant's rules by ``rules``."""
        row = self._session.get(SynonymSet, tenant_id)
        if row is None:
            self._session.add(SynonymSet(tenant_id=tenant_id, rules={"synonyms": rules}))
        else:
            row.rules = {"synonyms": rules}
            row.updated_at = utcnow()
        self._session.flush()
