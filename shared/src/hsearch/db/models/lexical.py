from __future__ import annotations

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base


class LexicalCorpusStats(Base):
    """Per-tenant corpus size for BM25 (chunks and their total length in terms)."""

    __tablename__ = "lexical_corpus_stats"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    encoder: Mapped[str] = mapped_column(String(256), default="")
    chunk_count: Mapped[int] = mapped_column(BigInteger, default=0)
    total_length: Mapped[int] = mapped_column(BigInteger, default=0)


class LexicalTermStats(Base):
    """Per-tenant document frequency (in chunks) of one lexical term, for BM25 IDF."""

    __tablename__ = "lexical_term_stats"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    term_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    df: Mapped[int] = mapped_column(BigInteger, default=0)
