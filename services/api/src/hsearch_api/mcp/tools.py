"""The MCP tools: what a model may call, with what arguments, and what it gets back.

Five tools, each a thin mapping onto one API operation: ``search`` (``POST
/v1/search``), ``answer`` (``POST /v1/answer``), ``get_document`` and ``list_documents``
(``GET /v1/documents...``) and ``submit_documents`` (``POST /v1/documents``, the
``ingest`` scope). Their input schemas are the API's own request models cut to the
fields a model needs (:func:`tool_models`: the constraints and descriptions are the
API's, with the server's limits when the app builds them), and their results are the
API's answers cut to what a model reads well: structured content (``outputSchema``)
and the same JSON as text, for clients that read only text.

The tools do not know how the API is reached: a :class:`Backend` does, per call. The
API's ``/mcp`` endpoint gives them the services the routers call, as the request's
caller (:mod:`hsearch_api.mcp.local`); ``hsearch mcp`` (stdio) gives them an HTTP client
of the API (:mod:`hsearch_api.mcp.remote`). An error of either is a tool result with
``isError`` and the API's error body (``{"error": code, "detail": ...}``), never an
exception the model cannot read.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, create_model
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from hsearch import __version__
from hsearch.ingestion.api.jobs import MAX_PAGE
from hsearch_api.schemas.answers import AnswerRequestBody
from hsearch_api.schemas.documents import DocumentCreate
from hsearch_api.schemas.search import SearchRequest

__all__ = [
    "Backend",
    "BackendFor",
    "ToolError",
    "ToolModels",
    "build_server",
    "tool_models",
]

SNIPPET_TEXT_CHARS = 1200
"""A hit's passage text, cut at this many characters in a search result."""
MAX_SUBMITTED = 100
"""Documents one ``submit_documents`` call takes (a bigger batch: the HTTP API)."""

INSTRUCTIONS = """\
hsearch is a hybrid (keyword + semantic) search engine over one tenant's documents.
Use `search` to find documents or passages, `answer` for a question answered from the
documents with citations the server checked, `get_document` to read one document
(its full text) and `list_documents` to browse them; `submit_documents` adds documents
(it needs a key with the ingest scope). Results carry `external_id`: pass it to
`get_document`."""


class ToolError(Exception):
    """A refusal a tool reports as its result: the API's stable ``code`` and detail."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class Backend(Protocol):
    """The API operations the tools call, each returning the API's JSON answer; a
    refusal raises :class:`ToolError` (or an error the backend's :meth:`refusal` maps)."""

    async def search(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def answer(self, body: dict[str, Any]) -> dict[str, Any]: ...

    async def get_document(self, external_id: str, *, include_text: bool) -> dict[str, Any]: ...

    async def document_links(
        self, external_id: str, *, types: list[str] | None
    ) -> dict[str, Any]: ...

    async def list_documents(
        self, *, source: str | None, limit: int, cursor: str | None
    ) -> dict[str, Any]: ...

    async def submit_documents(self, documents: list[dict[str, Any]]) -> dict[str, Any]: ...

    def refusal(self, exc: Exception) -> ToolError | None:
        """``exc`` as the API's error, or ``None`` when it is not one of them."""
        ...


BackendFor = Callable[[Context], Awaitable[Backend]]
"""The backend of one tool call (the caller of the request that carried it)."""


# Inputs: the API's request models, cut to what a model needs.


def _field(model: type[BaseModel], name: str, **changes: Any) -> tuple[Any, FieldInfo]:
    """``model``'s field ``name`` (its type and constraints), with ``changes`` (a default,
    a description)."""
    info = copy.copy(model.model_fields[name])
    for attribute, value in changes.items():
        setattr(info, attribute, value)
    return info.annotation, info


FILTER_DESCRIPTION = (
    "Optional. Only documents matching this condition, in hsearch's filter language: "
    '{"source": {"eq": "handbook"}}, {"tags": {"contains_any": ["hr"]}}, '
    '{"metadata.year": {"range": {"gte": 2020}}}, combined with {"and": [...]}, '
    '{"or": [...]} and {"not": ...}. Fields: external_id, source, lang, tags, created_at, '
    "metadata.<key>."
)


@dataclass(frozen=True, slots=True)
class ToolModels:
    """The tools' input models, built from the API's request models."""

    search: type[ArgModelBase]
    answer: type[ArgModelBase]
    get_document: type[ArgModelBase]
    document_links: type[ArgModelBase]
    list_documents: type[ArgModelBase]
    submit_documents: type[ArgModelBase]


def tool_models(
    search_request: type[SearchRequest] = SearchRequest,
    answer_request: type[AnswerRequestBody] = AnswerRequestBody,
) -> ToolModels:
    """The tools' inputs from the API's request models: the app passes the models it
    serves (with the server's limits, ``search_request_model(settings.search, legs)``);
    the defaults are the models without them (``hsearch mcp``: the server checks)."""
    search = create_model(
        "SearchArguments",
        __base__=ArgModelBase,
        query=_field(search_request, "query", description="What to search for, in words."),
        top_k=_field(search_request, "top_k", description="Results to return (default 10)."),
        mode=_field(
            search_request,
            "mode",
            description="`hybrid` (default: keywords and meaning), `keyword` (exact words, "
            "names, codes) or `semantic` (meaning, other wordings).",
        ),
        filter=_field(search_request, "filter", description=FILTER_DESCRIPTION),
        group_by_document=_field(
            search_request,
            "group_by_document",
            default=True,
            description="True (default here): one result per document, its best passage. "
            "False: every matching passage, several per document (to quote or compare "
            "passages).",
        ),
        sort=_field(search_request, "sort"),
        cursor=_field(
            search_request,
            "cursor",
            description="The `next_cursor` of a previous result, with the same query and "
            "arguments: the next results.",
        ),
    )
    answer = create_model(
        "AnswerArguments",
        __base__=ArgModelBase,
        query=_field(answer_request, "query", description="The question, in words."),
        passages=_field(answer_request, "passages"),
        mode=_field(answer_request, "mode"),
        filter=_field(answer_request, "filter", description=FILTER_DESCRIPTION),
        messages=_field(answer_request, "messages"),
        strategy=_field(
            answer_request,
            "strategy",
            description="`default`: answer from the passages one search finds (fast). "
            "`lazy`: for questions that need several linked facts (who directed the film "
            "that..., the country of the composer of...): tests candidates, follows "
            "document links and related concepts, and answers from the claims it took, "
            "within `budget` (slower).",
        ),
        budget=_field(answer_request, "budget"),
    )
    get_document = create_model(
        "GetDocumentArguments",
        __base__=ArgModelBase,
        external_id=_field(
            DocumentCreate,
            "external_id",
            description="The document's id, as results give it (`external_id`).",
        ),
        include_text=(
            bool,
            Field(
                default=True,
                description="Include the document's full text (default true); false for "
                "its fields only.",
            ),
        ),
    )
    document_links = create_model(
        "DocumentLinksArguments",
        __base__=ArgModelBase,
        external_id=_field(
            DocumentCreate,
            "external_id",
            description="The document's id, as results give it (`external_id`).",
        ),
        types=(
            list[str] | None,
            Field(
                default=None,
                description="Only links of these types (`link`, `mention`, or the types "
                "the documents were given); default: every type.",
            ),
        ),
    )
    list_documents = create_model(
        "ListDocumentsArguments",
        __base__=ArgModelBase,
        source=(str | None, Field(default=None, description="Only documents of this source.")),
        limit=(
            int,
            Field(default=50, ge=1, le=MAX_PAGE, description="Documents per page (default 50)."),
        ),
        cursor=(
            str | None,
            Field(
                default=None,
                description="The `next_cursor` of a previous page: the page after it.",
            ),
        ),
    )
    submit_documents = create_model(
        "SubmitDocumentsArguments",
        __base__=ArgModelBase,
        documents=(
            list[DocumentCreate],
            Field(
                min_length=1,
                max_length=MAX_SUBMITTED,
                description="The documents: each with an `external_id` (yours, unique; the "
                "same id again replaces the document) and its `text`; `title`, `source`, "
                "`lang`, `tags` and `metadata` optional.",
            ),
        ),
    )
    return ToolModels(
        search=search,
        answer=answer,
        get_document=get_document,
        document_links=document_links,
        list_documents=list_documents,
        submit_documents=submit_documents,
    )


# Results: the API's answers, cut to what a model reads.


class SearchHitResult(BaseModel):
    external_id: str
    title: str
    snippet: str | None = Field(description="The passage around the matches, each in <em>.")
    text: str = Field(description="The matching passage (cut when long).")
    score: float
    source: str
    tags: list[str]
    metadata: dict[str, Any]
    matching_passages: int


class SearchResult(BaseModel):
    query: str
    total: int
    total_is_exact: bool
    hits: list[SearchHitResult]
    next_cursor: str | None = Field(description="Pass as `cursor` for more results.")
    degraded: list[str] = Field(description="Parts of the search that failed (fewer results).")


class CitationResult(BaseModel):
    number: int = Field(description="The marker [number] in the answer.")
    external_id: str
    title: str
    quote: str = Field(description="The passage's sentence that supports the cited sentence.")
    char_start: int | None = Field(description="Where the quote starts in the document's text.")
    char_end: int | None


class PassageResult(BaseModel):
    number: int
    external_id: str
    title: str
    text: str


class AnswerResult(BaseModel):
    answer: str | None = Field(
        description="The answer with citation markers [n]; null when none could be "
        "written (see `degraded`; the passages are still there to read)."
    )
    citations: list[CitationResult] = Field(description="Each checked by the server.")
    unsupported_sentences: int = Field(
        description="Sentences of the answer no passage supports (they cite nothing)."
    )
    passages: list[PassageResult]
    degraded: list[str]
    lazy: dict[str, Any] | None = Field(
        default=None,
        description="`strategy: lazy`: why it stopped, candidates tested and relevant, and "
        "its budget used and allowed.",
    )


class DocumentResult(BaseModel):
    external_id: str
    status: str = Field(description="`indexed`, or `pending` while a job holds it.")
    title: str
    source: str
    lang: str
    tags: list[str]
    metadata: dict[str, Any]
    chunk_count: int
    text: str | None


class LinkedResult(BaseModel):
    external_id: str
    title: str | None = Field(description="Null: no such document is indexed (yet).")
    type: str
    direction: str = Field(description="`out`: the document links to it; `in`: it links here.")


class DocumentLinksResult(BaseModel):
    external_id: str
    out: list[LinkedResult] = Field(description="What the document links to.")
    back: list[LinkedResult] = Field(description="The documents linking to it.")


class DocumentPageResult(BaseModel):
    documents: list[DocumentResult]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page.")


class SubmittedResult(BaseModel):
    job_id: str
    status: str
    total: int | None
    note: str


def search_result(api: Mapping[str, Any]) -> SearchResult:
    return SearchResult(
        query=api["query"],
        total=api["total"],
        total_is_exact=api.get("total_relation", "eq") == "eq",
        next_cursor=api.get("next_cursor"),
        degraded=list(api.get("degraded", [])),
        hits=[
            SearchHitResult(
                external_id=h["external_id"],
                title=h.get("title", ""),
                snippet=h.get("snippet"),
                text=_cut(h.get("text", ""), SNIPPET_TEXT_CHARS),
                score=h["score"],
                source=h.get("source", ""),
                tags=list(h.get("tags", [])),
                metadata=dict(h.get("metadata", {})),
                matching_passages=h.get("matching_chunks", 1),
            )
            for h in api["hits"]
        ],
    )


def answer_result(api: Mapping[str, Any]) -> AnswerResult:
    return AnswerResult(
        answer=api.get("answer"),
        citations=[
            CitationResult(
                number=c["number"],
                external_id=c["external_id"],
                title=c.get("title", ""),
                quote=c["quote"],
                char_start=c.get("char_start"),
                char_end=c.get("char_end"),
            )
            for c in api.get("citations", [])
        ],
        unsupported_sentences=api.get("unsupported_sentences", 0),
        passages=[
            PassageResult(
                number=p["number"],
                external_id=p["external_id"],
                title=p.get("title", ""),
                text=p["text"],
            )
            for p in api.get("passages", [])
        ],
        degraded=list(api.get("degraded", [])),
        lazy=None
        if api.get("lazy") is None
        else {
            key: api["lazy"][key]
            for key in ("stopped", "tested", "relevant", "depth", "levels", "budget")
            if key in api["lazy"]
        },
    )


def document_result(api: Mapping[str, Any]) -> DocumentResult:
    return DocumentResult(
        external_id=api["external_id"],
        status=api["status"],
        title=api.get("title", ""),
        source=api.get("source", ""),
        lang=api.get("lang", ""),
        tags=list(api.get("tags", [])),
        metadata=dict(api.get("metadata", {})),
        chunk_count=api.get("chunk_count", 0),
        text=api.get("text"),
    )


def _linked(api: Mapping[str, Any]) -> LinkedResult:
    return LinkedResult(
        external_id=api["external_id"],
        title=api.get("title"),
        type=api["type"],
        direction=api["direction"],
    )


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# The server.

SEARCH_DESCRIPTION = """\
Search the documents (hybrid: keywords and meaning). Returns the best results with
their title, a snippet (matches in <em>), the matching passage, score and
`external_id`; `next_cursor` pages on. Use it to find which documents talk about
something, or passages to quote; use `answer` instead for a direct answer to a
question, and `get_document` to read a whole document."""

ANSWER_DESCRIPTION = """\
Answer a question from the documents: the server retrieves passages, has a model
write an answer, and checks every citation against the passages. Returns the answer
with markers [n], the citations (document, supporting quote, where it lies) and the
passages used. When no answer can be written (`answer` null, `degraded` says why), read
the passages instead. Prefer it over `search` for questions that want a sentence or
two, not a list of documents."""

GET_DOCUMENT_DESCRIPTION = """\
Read one document by its `external_id` (from `search`, `answer` or
`list_documents`): its fields and, by default, its full text."""

DOCUMENT_LINKS_DESCRIPTION = """\
The documents one document links to and the documents linking to it, each with its
title and the link's type (`link` for hyperlinks, `mention` for a title named in the
text, or the relation the documents were given). To follow a topic from a result to
related documents; read one with `get_document`."""

LIST_DOCUMENTS_DESCRIPTION = """\
List the documents in id order, a page at a time (`next_cursor` for the next page),
optionally of one source. For browsing what there is; to find documents about
something, use `search`."""

SUBMIT_DESCRIPTION = """\
Add or replace documents (by `external_id`): they are indexed in the background and
become searchable within seconds (the result names the job). Needs a key with the
ingest scope; a key that may only search is refused with `insufficient_scope`."""


def build_server(backend_for: BackendFor, *, models: ToolModels) -> MCPServer:
    """An MCP server with the five tools, each calling the backend of its call."""

    async def run(ctx: Context, call: Callable[[Backend], Awaitable[BaseModel]]) -> Any:
        try:
            backend = await backend_for(ctx)
            try:
                result = await call(backend)
            except Exception as exc:
                refused = backend.refusal(exc)
                if refused is None:
                    raise
                raise refused from exc
        except ToolError as exc:
            body = {"error": exc.code, "detail": exc.detail}
            return CallToolResult(
                content=[TextContent(type="text", text=json.dumps(body, ensure_ascii=False))],
                is_error=True,
            )
        structured = result.model_dump(mode="json")
        text = json.dumps(structured, ensure_ascii=False)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured
        )

    async def search(ctx: Context, **arguments: Any) -> Any:
        body = _given(arguments)

        async def call(backend: Backend) -> BaseModel:
            return search_result(await backend.search(body))

        return await run(ctx, call)

    async def answer(ctx: Context, **arguments: Any) -> Any:
        body = _given(arguments)
        if body.get("strategy") == "lazy":
            body.pop("passages", None)  # its context is the claims that fit, not a count

        async def call(backend: Backend) -> BaseModel:
            return answer_result(await backend.answer(body))

        return await run(ctx, call)

    async def get_document(ctx: Context, external_id: str, include_text: bool) -> Any:
        async def call(backend: Backend) -> BaseModel:
            found = await backend.get_document(external_id, include_text=include_text)
            return document_result(found)

        return await run(ctx, call)

    async def document_links(ctx: Context, external_id: str, types: list[str] | None) -> Any:
        async def call(backend: Backend) -> BaseModel:
            found = await backend.document_links(external_id, types=types)
            return DocumentLinksResult(
                external_id=found["external_id"],
                out=[_linked(x) for x in found["out"]],
                back=[_linked(x) for x in found["back"]],
            )

        return await run(ctx, call)

    async def list_documents(
        ctx: Context, source: str | None, limit: int, cursor: str | None
    ) -> Any:
        async def call(backend: Backend) -> BaseModel:
            page = await backend.list_documents(source=source, limit=limit, cursor=cursor)
            return DocumentPageResult(
                documents=[document_result(d) for d in page["documents"]],
                next_cursor=page.get("next_cursor"),
            )

        return await run(ctx, call)

    async def submit_documents(ctx: Context, documents: list[DocumentCreate]) -> Any:
        rows = [d.model_dump(mode="json") for d in documents]

        async def call(backend: Backend) -> BaseModel:
            accepted = await backend.submit_documents(rows)
            return SubmittedResult(
                job_id=str(accepted["job_id"]),
                status=accepted["status"],
                total=accepted.get("total"),
                note="Indexing runs in the background; the documents are searchable once "
                "the job has succeeded (usually seconds).",
            )

        return await run(ctx, call)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    tools = [
        _tool(search, "search", SEARCH_DESCRIPTION, models.search, SearchResult, read_only),
        _tool(answer, "answer", ANSWER_DESCRIPTION, models.answer, AnswerResult, read_only),
        _tool(
            get_document,
            "get_document",
            GET_DOCUMENT_DESCRIPTION,
            models.get_document,
            DocumentResult,
            read_only,
        ),
        _tool(
            document_links,
            "document_links",
            DOCUMENT_LINKS_DESCRIPTION,
            models.document_links,
            DocumentLinksResult,
            read_only,
        ),
        _tool(
            list_documents,
            "list_documents",
            LIST_DOCUMENTS_DESCRIPTION,
            models.list_documents,
            DocumentPageResult,
            read_only,
        ),
        _tool(
            submit_documents,
            "submit_documents",
            SUBMIT_DESCRIPTION,
            models.submit_documents,
            SubmittedResult,
            ToolAnnotations(
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=False,
            ),
        ),
    ]
    return MCPServer(name="hsearch", version=__version__, instructions=INSTRUCTIONS, tools=tools)


def _tool(  # noqa: PLR0917 - a table row: the calls above read as one
    fn: Callable[..., Awaitable[Any]],
    name: str,
    description: str,
    arguments: type[ArgModelBase],
    result: type[BaseModel],
    annotations: ToolAnnotations,
) -> Tool:
    """A tool whose input schema is ``arguments``' and whose output schema is
    ``result``'s."""
    metadata = FuncMetadata(arg_model=arguments, output_model=result)
    return Tool(
        fn=fn,
        name=name,
        description=description,
        parameters=arguments.model_json_schema(by_alias=True),
        fn_metadata=metadata,
        is_async=True,
        context_kwarg="ctx",
        annotations=annotations,
    )


def _given(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A request body of the arguments that were given (``None``: the API's default),
    as JSON values (models, enums)."""
    given = {key: value for key, value in arguments.items() if value is not None}
    body: dict[str, Any] = to_jsonable_python(given)
    return body
