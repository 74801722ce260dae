from __future__ import annotations

import uuid

from sqlalchemy import Float, ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base


class DocumentLink(Base):
    """A link from an indexed document to another document of its tenant
    (:mod:`hsearch.graph.links`): given with the document or found in its text.

    Both ends are document ids, which are derived from the tenant and the external id
    (:func:`hsearch.ingestion.ids.document_id`), so a link to a document not yet
    ingested is written as it is and resolves when that document's row appears; the
    target's external id is kept to name it while it does not exist. A link goes with
    the version of its source document that carried it: replaced when the document is
    indexed again, removed when it is deleted (:mod:`hsearch.ingestion.derived.links`).
    """

    __tablename__ = "document_links"
    # The key reads a document's out-links; the index its back-links.
    __table_args__ = (Index("ix_document_links_target", "tenant_id", "target_id"),)

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    source_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    target_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    type: Mapped[str] = mapped_column(String(64), primary_key=True)
    target_external_id: Mapped[str] = mapped_column(String(512))
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    origin: Mapped[str] = mapped_column(String(16), default="given")
    """``given`` (submitted with the document or set by ``PATCH``) or ``text`` (found in
    its text, :mod:`hsearch.graph.extract`)."""
