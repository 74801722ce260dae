"""A Python client of the hsearch API.

:class:`Client` (blocking) and :class:`AsyncClient` (asyncio) send the API's requests
and return its answers as typed values (:mod:`hsearch_client.models`); an error answer
raises the :class:`~hsearch_client.errors.ApiError` of its stable code
(:mod:`hsearch_client.errors`); a request that may pass another time (no connection,
502/503/504, a 429) is tried again as :class:`Retry` says, honouring ``Retry-After``.
Lists are iterators that follow the API's cursors, and an answer's stream is an
iterator of typed events.

    from hsearch_client import Client

    with Client("http://127.0.0.1:8000", api_key="hsk_...") as client:
        for hit in client.search("volcanoes", top_k=3, group_by_document=True).hits:
            print(hit.title, hit.score)
"""

from hsearch_client._async import AsyncClient
from hsearch_client._core import Retry
from hsearch_client._sync import DEFAULT_URL, Client
from hsearch_client.errors import (
    ApiError,
    ApiUnavailableError,
    ClientError,
    ConnectionFailedError,
    FieldError,
)
from hsearch_client.models import (
    Answer,
    AnswerEvent,
    BudgetLine,
    CitationEvent,
    Claim,
    Community,
    CommunityDetail,
    CommunityList,
    DeltaEvent,
    Document,
    DocumentInput,
    DocumentLinks,
    DoneEvent,
    ErrorEvent,
    GraphOptions,
    Hit,
    Job,
    JobAccepted,
    JobStatus,
    LazyReport,
    Link,
    ProgressEvent,
    RetrievalEvent,
    SearchMode,
    SearchResponse,
    TenantSettings,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_URL",
    "Answer",
    "AnswerEvent",
    "ApiError",
    "ApiUnavailableError",
    "AsyncClient",
    "BudgetLine",
    "CitationEvent",
    "Claim",
    "Client",
    "ClientError",
    "Community",
    "CommunityDetail",
    "CommunityList",
    "ConnectionFailedError",
    "DeltaEvent",
    "Document",
    "DocumentInput",
    "DocumentLinks",
    "DoneEvent",
    "ErrorEvent",
    "FieldError",
    "GraphOptions",
    "Hit",
    "Job",
    "JobAccepted",
    "JobStatus",
    "LazyReport",
    "Link",
    "ProgressEvent",
    "RetrievalEvent",
    "Retry",
    "SearchMode",
    "SearchResponse",
    "TenantSettings",
    "__version__",
]
