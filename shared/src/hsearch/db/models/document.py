from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base, JSONType, utcnow


class Document(Base):
    """A document as it is indexed now. Written only when indexing succeeded, so a
    failed re-ingest leaves the previous version (here and in Milvus) intact."""

    __tablename__ = "documents"
    __table_args__ = (UniqueConstraint("tenant_id", "external_id"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    tenant_id: Mapped[str] = mapped_column(ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    external_id: Mapped[str] = mapped_column(String(512))
    title: Mapped[str] = mapped_column(String(1024), default="")
    source: Mapped[str] = mapped_column(String(512), default="")
    lang: Mapped[str] = mapped_column(String(16), default="")
    tags: Mapped[list[str]] = mapped_column(default=list)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", default=dict)
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    chunk_count: Mapped[int] = mapped_column(Integer, default=0)
    # The Milvus primary keys of the indexed chunks: stale ones are deleted by key.
    chunk_ids: Mapped[list[str]] = mapped_column(default=list)
    # Per-chunk term document frequencies this document contributed to the tenant's
    # lexical statistics ({term_id: n_chunks}); subtracted again when it is replaced.
    lexical_terms: Mapped[dict[str, Any]] = mapped_column(default=dict)
    lexical_length: Mapped[int] = mapped_column(Integer, default=0)
    encoder: Mapped[str] = mapped_column(String(256), default="")
    # The submission this version comes from (its job item's id: ids grow in submission
    # order). An older submission never replaces it, whatever order workers see them in.
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    # The kinds of links its submission asked to find in its text (TextLinks values;
    # None: the tenant's setting, read whenever its links are found: at indexing and by
    # ``hsearch links relink``).
    text_links: Mapped[list[str] | None] = mapped_column(JSONType, default=None)
    # Its chunks' concepts, aligned with chunk_ids (hsearch.ingestion.derived.concepts):
    # {"v": extractor version, "chunks": [[concept, ...], ...]}; None: not extracted.
    concepts: Mapped[dict[str, Any] | None] = mapped_column(JSONType, default=None, deferred=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    def filter_fields(self) -> dict[str, Any]:
        """Its filterable fields as its chunks carry them in the store (what a search
        filter or a search token's reads)."""
        created = self.created_at
        if created.tzinfo is None:  # SQLite hands naive UTC back
            created = created.replace(tzinfo=UTC)
        return {
            "document_id": str(self.id),
            "external_id": self.external_id,
            "source": self.source,
            "lang": self.lang,
            "tags": list(self.tags),
            "created_at": int(created.timestamp()),
            "metadata": dict(self.metadata_),
        }
