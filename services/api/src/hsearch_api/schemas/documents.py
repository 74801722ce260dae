from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from hsearch.graph.links import (
    DEFAULT_LINK_TYPE,
    MAX_LINK_TYPE_LENGTH,
    MAX_LINK_WEIGHT,
    MAX_LINKS,
    Link,
    TextLinks,
)
from hsearch.types import JobKind, JobStatus
from hsearch.vectorstore.schema import TITLE_MAX_LENGTH

Tag = Annotated[str, Field(min_length=1, max_length=128)]


class LinkCreate(BaseModel):
    """A link to another document of the tenant (docs/graph.md)."""

    model_config = ConfigDict(extra="forbid")

    target: str = Field(
        min_length=1,
        max_length=512,
        description="The linked document's external id; it need not be ingested yet "
        "(the link resolves when it is).",
    )
    type: str = Field(
        default=DEFAULT_LINK_TYPE,
        min_length=1,
        max_length=MAX_LINK_TYPE_LENGTH,
        description="What the link is (a free name): a search can follow only some types.",
        examples=["link", "mention", "cites"],
    )
    weight: float = Field(
        default=1.0,
        gt=0,
        le=MAX_LINK_WEIGHT,
        description="How much the link counts in the graph leg (1 unless given).",
    )

    def link(self) -> Link:
        return Link(self.target, self.type, self.weight)


Links = Annotated[list[LinkCreate], Field(max_length=MAX_LINKS)]


class DocumentCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    external_id: str = Field(
        min_length=1, max_length=512, description="Your id; unique per tenant."
    )
    title: str = Field(default="", max_length=TITLE_MAX_LENGTH)
    # The upper bound is a setting (ingest.max_document_chars), enforced by the job
    # service: a bound written here would be a second, possibly different, number.
    text: str = Field(
        min_length=1,
        description="At most `ingest.max_document_chars` characters (a server setting).",
    )
    source: str = Field(default="", max_length=512)
    lang: str = Field(
        default="",
        max_length=16,
        description="The text's language as a BCP 47 tag whose language is an ISO 639-1 "
        "code (`en`, `en-GB`, `ja`, `pt-BR`); `und` or empty: undetermined (the script "
        "decides; Latin words are read as English). Only `en` gets English stop words and "
        "stems (docs/analyzer.md); any other tag (`english`, `eng`) is refused with a 422.",
        examples=["en"],
    )
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    metadata: dict[str, Any] = Field(default_factory=dict)
    links: Links = Field(
        default_factory=list,
        description=f"Links to other documents of the tenant (at most {MAX_LINKS}); a "
        "(target, type) pair given twice counts once, with its larger weight.",
    )
    text_links: list[TextLinks] | None = Field(
        default=None,
        description="Links to find in the text: `hyperlinks` (Markdown, HTML and "
        "[[wiki]] links naming a document by external id, path or title) and `mentions` "
        "(other documents' titles named in the text). Null: the tenant's setting.",
    )


class DocumentBatchCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "documents": [
                        {
                            "external_id": "kb-42",
                            "title": "Resetting a password",
                            "text": "Open Settings, then Security, and choose Reset password.",
                            "source": "help-center",
                            "lang": "en",
                            "tags": ["team-a"],
                            "metadata": {"year": 2026},
                        }
                    ]
                }
            ]
        },
    )

    # The upper bound is a setting (ingest.max_documents_per_request), see ``text``.
    documents: list[DocumentCreate] = Field(
        min_length=1,
        description="At most `ingest.max_documents_per_request` documents (a server setting).",
    )
    webhook_url: str | None = Field(
        default=None,
        max_length=2048,
        description="Called (POST, signed per Standard Webhooks with the server's "
        "webhook secret) once the job has ended, retried with backoff until delivered.",
        examples=["https://example.com/hooks/hsearch"],
    )


class DocumentDeleteByFilter(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        json_schema_extra={"examples": [{"filter": {"source": {"eq": "help-center"}}}]},
    )

    filter: dict[str, Any] | None = Field(
        default=None,
        description="The documents to delete, in the search filter language "
        "(docs/filters.md), on their fields (not `ordinal`).",
        examples=[{"source": {"eq": "news"}, "created_at": {"lt": 1700000000}}],
    )
    everything: StrictBool = Field(
        default=False,
        alias="all",
        description="Delete every document of the tenant (and send no filter).",
    )
    webhook_url: str | None = Field(
        default=None,
        max_length=2048,
        description="Called once the job has ended, as for an ingest job.",
    )


class ItemErrorRead(BaseModel):
    ordinal: int
    external_id: str
    error: str


class WebhookRead(BaseModel):
    url: str
    attempts: int
    delivered_at: datetime | None
    next_attempt_at: datetime | None = Field(
        description="When the next attempt is due; null once delivered or given up."
    )
    error: str | None = Field(description="The last attempt's error.")


class EncodingRead(BaseModel):
    document: str = Field(description="The external id of the document being encoded.")
    done: int = Field(description="Its chunks encoded so far.")
    total: int = Field(description="Its chunks in all.")
    updated_at: datetime = Field(description="When the worker last reported.")


class JobRead(BaseModel):
    id: uuid.UUID
    kind: JobKind = Field(
        description="`ingest` (index the submitted documents) or `delete` (delete the "
        "documents a filter selected when the job started)."
    )
    status: JobStatus
    total: int | None = Field(
        description="Documents the job holds. null for a delete job that has not started: "
        "its filter selects the documents when a worker starts it, so the number is "
        "known then (documents indexed after that are not deleted by it)."
    )
    indexed: int
    skipped: int
    failed: int
    deleted: int = Field(description="Documents a delete job deleted.")
    processed: int
    error: str | None
    attempts: int = Field(
        description="Times a worker started the job afresh: 1 once it has started, one more "
        "for each re-run of an interrupted part (a worker that died, a failed attempt, a "
        "shutdown). A large job runs in turns, taking turns with other jobs; a turn that "
        "follows one ended as planned is not an attempt."
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    searchable_at: datetime | None = Field(
        description="When its documents became searchable (sealed in the store); null "
        "until the job has succeeded (or partly)."
    )
    errors: list[ItemErrorRead]
    webhook: WebhookRead | None = Field(
        default=None, description="The job's webhook delivery, when it has one."
    )
    request_id: str | None = Field(
        default=None,
        description="The X-Request-Id of the request that submitted the job: the API's "
        "and the worker's log lines about it carry the same id.",
    )
    encoding: EncodingRead | None = Field(
        default=None,
        description="While a worker runs the job and encodes a document of more chunks "
        "than one group (`ingest.batch_chunks`): that document and how many of its chunks "
        "are encoded, updated after each group. null otherwise.",
    )


class JobAccepted(BaseModel):
    job_id: uuid.UUID
    status: JobStatus
    total: int | None = Field(
        description="Documents submitted; null for a delete job (`POST "
        "/v1/documents:delete`), whose documents are selected when it starts: poll "
        "`status_url` for the number."
    )
    status_url: str


class JobPageRead(BaseModel):
    jobs: list[JobRead] = Field(description="Newest first; `errors` is empty in a list.")
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class DocumentRead(BaseModel):
    external_id: str
    status: str = Field(
        description="`indexed`, or `pending` when only a job not finished yet holds it."
    )
    title: str
    source: str
    lang: str
    tags: list[str]
    metadata: dict[str, Any]
    chunk_count: int
    pending_jobs: list[uuid.UUID] = Field(
        description="Unfinished jobs holding a version of it (a newer one, when indexed)."
    )
    created_at: datetime | None
    updated_at: datetime | None
    text: str | None = Field(
        default=None,
        description="The full text as submitted (of the indexed version): only with "
        "`?include=text` on `GET /v1/documents/{external_id}`, else null; null for a "
        "document only pending. A hit's `char_start`/`char_end` index into it.",
    )


class DocumentPageRead(BaseModel):
    documents: list[DocumentRead]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class DocumentDeleted(BaseModel):
    external_id: str
    deleted_chunks: int
    superseded_jobs: list[uuid.UUID] = Field(
        default_factory=list,
        description="Unfinished jobs whose pending submission of the document will not be "
        "indexed: it was submitted before the delete (its item is skipped).",
    )


class DocumentPatch(BaseModel):
    """Fields that change without re-encoding. The title, text and language shape the
    vectors: change them by submitting the document again."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"tags": ["team-a", "archived"]}]},
    )

    source: str | None = Field(default=None, max_length=512)
    tags: list[Tag] | None = Field(default=None, max_length=64)
    links: Links | None = Field(
        default=None,
        description="Replace the links the document was given (links found in its text "
        "stay); `[]` removes them. A later submission of the document replaces them again.",
    )
    metadata: dict[str, Any] | None = Field(
        default=None,
        description="A JSON Merge Patch (RFC 7396) of the stored metadata: a key set here "
        "is set, a key set to null is deleted, keys not named are kept, and objects are "
        "merged key by key at any depth (other values, lists included, replace). "
        "`source` and `tags` are replaced whole.",
        examples=[{"rank": None, "reviewed": True}],
    )


class LinkedDocumentRead(BaseModel):
    external_id: str
    title: str | None = Field(
        description="Null: no document of that external id is indexed (the link is "
        "unresolved until one is)."
    )
    type: str
    weight: float
    direction: str = Field(description="`out`: this document links to it; `in`: it links here.")
    origin: str = Field(
        description="`given` (submitted or set by PATCH) or `text` (found in the text)."
    )


class DocumentLinksRead(BaseModel):
    external_id: str
    out: list[LinkedDocumentRead] = Field(
        description="Its links, resolved or not, by type then target."
    )
    back: list[LinkedDocumentRead] = Field(
        description="The indexed documents linking to it, by type then source."
    )
