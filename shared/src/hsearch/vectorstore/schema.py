"""The chunk collection's fields: one description read by the Milvus adapter (to
build the schema), by the filter compiler (whitelist, types) and by facets.

One collection holds both vector fields; the two search legs are two parallel
requests against it (see docs/adr/0001-one-collection-two-vector-fields.md for why not
two collections).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class FieldType(StrEnum):
    STRING = "string"
    INT = "int"
    FLOAT = "float"
    BOOL = "bool"
    STRING_ARRAY = "string_array"
    JSON = "json"


@dataclass(frozen=True, slots=True)
class FieldSpec:
    name: str
    type: FieldType
    max_length: int = 0  # strings: bytes; arrays: per element
    max_capacity: int = 0  # arrays only
    filterable: bool = True
    facetable: bool = True


TENANT_FIELD = "tenant_id"
PRIMARY_FIELD = "chunk_id"
DENSE_FIELD = "dense"
SPARSE_FIELD = "sparse"
TEXT_FIELD = "text"
METADATA_FIELD = "metadata"
OFFSET_FIELDS = ("char_start", "char_end")
"""Where a chunk lies in its document's text (character offsets, end exclusive): returned
with every hit, neither filterable nor facetable."""

# Scalar fields users may filter and facet on. ``metadata`` is a JSON column whose
# nested paths (``metadata.author.name``) are addressable too.
USER_FIELDS: tuple[FieldSpec, ...] = (
    FieldSpec("document_id", FieldType.STRING, max_length=64, facetable=False),
    FieldSpec("external_id", FieldType.STRING, max_length=512, facetable=False),
    FieldSpec("source", FieldType.STRING, max_length=512),
    FieldSpec("lang", FieldType.STRING, max_length=16),
    FieldSpec("tags", FieldType.STRING_ARRAY, max_length=128, max_capacity=64),
    FieldSpec("created_at", FieldType.INT),
    FieldSpec("ordinal", FieldType.INT, facetable=False),
    FieldSpec(METADATA_FIELD, FieldType.JSON),
)

USER_FIELDS_BY_NAME: dict[str, FieldSpec] = {f.name: f for f in USER_FIELDS}

# Fields a document's chunks can change in place, without re-encoding (the title, the
# text and the language shape the vectors).
UPDATABLE_FIELDS: frozenset[str] = frozenset({"source", "tags", METADATA_FIELD})

# Fields returned with every hit (never the vectors).
OUTPUT_FIELDS: tuple[str, ...] = (
    PRIMARY_FIELD,
    "document_id",
    "external_id",
    "title",
    TEXT_FIELD,
    "source",
    "lang",
    "tags",
    "created_at",
    "ordinal",
    *OFFSET_FIELDS,
    METADATA_FIELD,
)

# Fields a search leg returns with each candidate: every output field but the text, the
# one large field, which is fetched for the hits of a page only (``VectorStore.texts``).
CANDIDATE_FIELDS: tuple[str, ...] = tuple(f for f in OUTPUT_FIELDS if f != TEXT_FIELD)

TITLE_MAX_LENGTH = 1024
TEXT_MAX_LENGTH = 65535
