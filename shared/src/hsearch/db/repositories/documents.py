from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hsearch.db.models import Document


class DocumentRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, document_id: uuid.UUID) -> Document | None:
        return self._session.get(Document, document_id)

    def get_for_update(self, document_id: uuid.UUID) -> Document | None:
        # Serialises two workers indexing the same document (Postgres row lock).
        return self._session.scalar(
            select(Document).where(Document.id == document_id).with_for_update()
        )

    def add(self, document: Document) -> None:
        self._session.add(document)
        self._session.flush()

    def count(self, tenant_id: str) -> int:
        return int(
            self._session.scalar(
                select(func.count()).select_from(Document).where(Document.tenant_id == tenant_id)
            )
            or 0
        )
