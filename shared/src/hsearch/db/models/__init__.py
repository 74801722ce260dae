"""ORM models: the single source of the schema (Alembic autogenerates from them)."""

from hsearch.db.models.document import Document
from hsearch.db.models.identity import DatabaseIdentity
from hsearch.db.models.job import IngestionJob, JobItem, JobItemStatus, JobStatus
from hsearch.db.models.lexical import (
    LexicalCorpusStats,
    LexicalTermStats,
    LexicalVocabulary,
    SynonymSet,
)
from hsearch.db.models.link import DocumentLink
from hsearch.db.models.tenant import ApiKey, AuditEvent, Tenant

__all__ = [
    "ApiKey",
    "AuditEvent",
    "DatabaseIdentity",
    "Document",
    "DocumentLink",
    "IngestionJob",
    "JobItem",
    "JobItemStatus",
    "JobStatus",
    "LexicalCorpusStats",
    "LexicalTermStats",
    "LexicalVocabulary",
    "SynonymSet",
    "Tenant",
]
