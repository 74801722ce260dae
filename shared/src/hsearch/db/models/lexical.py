from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from hsearch.db.base import Base, utcnow


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


class LexicalVocabulary(Base):
    """A word the tenant's indexed text holds, folded (:mod:`hsearch.lexical.typos`):
    what typo tolerance and prefixes match query words to. Words are only added; one
    no chunk holds any more has a document frequency of 0 and is passed over."""

    __tablename__ = "lexical_vocabulary"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    word: Mapped[str] = mapped_column(String(64), primary_key=True)


class SynonymSet(Base):
    """A tenant's synonyms (:mod:`hsearch.lexical.synonyms`), replaced as a whole."""

    __tablename__ = "synonym_sets"

    tenant_id: Mapped[str] = mapped_column(
        ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    rules: Mapped[dict[str, Any]] = mapped_column(default=dict)
    """``{"synonyms": [rule, ...]}`` as ``PUT /v1/synonyms`` took it."""
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)
