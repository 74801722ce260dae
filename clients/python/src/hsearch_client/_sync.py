"""The blocking client: :class:`Client`."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Self

import httpx

from hsearch_client import _endpoints as endpoints
from hsearch_client._core import (
    Attempts,
    EventReader,
    Failure,
    Request,
    Retry,
    answer_event,
    parse,
    read_answer,
    transport_failure,
)
from hsearch_client.models import (
    Answer,
    AnswerEvent,
    CommunityDetail,
    CommunityList,
    Document,
    DocumentDeleted,
    DocumentInput,
    DocumentLinks,
    DocumentPage,
    GraphOptions,
    Hit,
    Job,
    JobAccepted,
    JobPage,
    Link,
    SearchResponse,
    TenantSettings,
)

__all__ = ["DEFAULT_URL", "Client"]

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "hsearch-client/0.1.0"


class Client:
    """A client of one hsearch API with one credential.

    ``api_key`` (an API key or a search token) is sent as ``Authorization: Bearer``; it
    decides the tenant and what the client may do. Requests that may pass another
    time (no connection, 502/503/504, a 429 that names its wait) are tried again as
    ``retry`` says (:class:`Retry`: 3 more tries by default, honouring ``Retry-After``);
    ``on_retry`` hears of each wait before it is taken. Any other error answer raises
    the :class:`~hsearch_client.errors.ApiError` of its code at once.

    ``requests`` counts the HTTP requests sent, tries included. ``sleep`` and ``clock``
    are for tests.
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retry: Retry | None = None,
        on_retry: Callable[[str], None] | None = None,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        sent = {"User-Agent": USER_AGENT, **(headers or {})}
        if api_key:
            sent["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.base_url, headers=sent, timeout=timeout_s, transport=transport
        )
        self.retry = retry or Retry()
        self._on_retry = on_retry
        self._sleep = sleep
        self._clock = clock
        self.requests = 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # Search.

    def search(
        self,
        query: str,
        *,
        top_k: int | None = None,
        offset: int | None = None,
        cursor: str | None = None,
        mode: str | None = None,
        filter: Mapping[str, Any] | None = None,
        group_by_document: bool | None = None,
        facets: Sequence[str | Mapping[str, Any]] | None = None,
        sort: Sequence[str | Mapping[str, Any]] | None = None,
        highlight: bool | None = None,
        graph: GraphOptions | Mapping[str, Any] | None = None,
        include_linked: bool | None = None,
        **fields: Any,
    ) -> SearchResponse:
        """``POST /v1/search``: one page of hits. A field left ``None`` is not sent (the
        server's default applies: chunks, not documents, unless ``group_by_document``);
        any other request field (``fusion``, ``weights``, ``track_total``, ...) is sent
        by its API name. The graph leg runs when ``weights`` gives it a weight
        (``{"sparse": 0.7, "graph": 0.3}``), following links as ``graph`` says; with
        ``include_linked`` each hit lists its document's ``linked_pages``."""
        request = endpoints.search(
            query,
            {
                "top_k": top_k,
                "offset": offset,
                "cursor": cursor,
                "mode": mode,
                "filter": filter,
                "group_by_document": group_by_document,
                "facets": facets,
                "sort": sort,
                "highlight": highlight,
                "graph": graph,
                "include_linked": include_linked,
                **fields,
            },
        )
        return parse(SearchResponse.model_validate, self._send(request), "POST /v1/search")

    def search_pages(
        self, query: str, *, max_pages: int | None = None, **fields: Any
    ) -> Iterator[SearchResponse]:
        """The pages of one search, following ``next_cursor`` (the same fused list, so
        pages neither repeat nor skip hits across writes) until the window ends or
        ``max_pages`` were read. ``fields`` as for :meth:`search`."""
        page = self.search(query, **fields)
        fields.pop("offset", None)
        pages = 1
        yield page
        while page.next_cursor and (max_pages is None or pages < max_pages):
            page = self.search(query, **{**fields, "cursor": page.next_cursor})
            pages += 1
            yield page

    def search_hits(self, query: str, *, limit: int | None = None, **fields: Any) -> Iterator[Hit]:
        """The hits of one search, page after page (at most ``limit``)."""
        seen = 0
        for page in self.search_pages(query, **fields):
            for hit in page.hits:
                if limit is not None and seen >= limit:
                    return
                seen += 1
                yield hit

    # Answers.

    def answer(
        self,
        query: str,
        *,
        passages: int | None = None,
        messages: Sequence[Mapping[str, str]] | None = None,
        filter: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Answer:
        """``POST /v1/answer``: an answer whose citations the server checked; without a
        model (or when it fails) ``answer`` is ``None``, ``degraded`` says why and the
        passages are there. Other fields (``mode``, ``expand``, ``max_tokens``, ...) by
        their API names."""
        body = {"passages": passages, "messages": messages, "filter": filter, **fields}
        data = self._send(endpoints.answer(query, body, stream=False))
        return parse(Answer.model_validate, data, "POST /v1/answer")

    def answer_stream(
        self,
        query: str,
        *,
        passages: int | None = None,
        messages: Sequence[Mapping[str, str]] | None = None,
        filter: Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Iterator[AnswerEvent]:
        """``POST /v1/answer`` streamed: its events as they come (``RetrievalEvent``,
        ``DeltaEvent`` texts, ``CitationEvent`` per checked sentence, ``ErrorEvent``
        when the model broke off, ``DoneEvent`` with the whole answer last). A refused
        request raises before any event; closing the iterator early closes the stream
        (the server then cancels the model's request)."""
        body = {"passages": passages, "messages": messages, "filter": filter, **fields}
        request = endpoints.answer(query, body, stream=True)
        attempts = self._attempts(request)
        while True:
            attempts.tries += 1
            self.requests += 1
            try:
                with self._http.stream(
                    request.method, request.path, content=request.body, headers=request.headers()
                ) as resp:
                    if resp.is_error:
                        resp.read()
                        failure = read_answer(resp)  # raises what will not pass
                        assert isinstance(failure, Failure)
                    else:
                        reader = EventReader()
                        for name, data in reader.events(resp.iter_lines()):
                            event = answer_event(name, data)
                            if event is not None:
                                yield event
                        return
            except httpx.TransportError as exc:
                failure = transport_failure(exc)
            self._wait(attempts, failure)

    # Documents.

    def submit_documents(
        self,
        documents: Sequence[DocumentInput | Mapping[str, Any]],
        *,
        webhook_url: str | None = None,
    ) -> JobAccepted:
        """``POST /v1/documents``: a batch to index, as one job (``wait_for_job``)."""
        data = self._send(endpoints.submit_documents(documents, webhook_url=webhook_url))
        return parse(JobAccepted.model_validate, data, "POST /v1/documents")

    def upload_ndjson(self, body: bytes, *, webhook_url: str | None = None) -> JobAccepted:
        """``POST /v1/documents:ndjson``: ``body`` holds one JSON document per line;
        errors name the line."""
        data = self._send(endpoints.upload_ndjson(body, webhook_url=webhook_url))
        return parse(JobAccepted.model_validate, data, "POST /v1/documents:ndjson")

    def delete_documents(
        self,
        *,
        filter: Mapping[str, Any] | None = None,
        everything: bool = False,
        webhook_url: str | None = None,
    ) -> JobAccepted:
        """``POST /v1/documents:delete``: every document the filter selects (or all of
        them with ``everything``), as a job."""
        request = endpoints.delete_documents(
            filter=filter, everything=everything, webhook_url=webhook_url
        )
        return parse(JobAccepted.model_validate, self._send(request), "POST /v1/documents:delete")

    def get_document(self, external_id: str, *, include_text: bool = False) -> Document:
        """One document: indexed, or pending in a job; with ``include_text`` its full
        text as submitted too."""
        request = endpoints.get_document(external_id, include_text=include_text)
        return parse(Document.model_validate, self._send(request), request.path)

    def update_document(
        self,
        external_id: str,
        *,
        source: str | None = None,
        tags: Sequence[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        links: Sequence[Link | Mapping[str, Any]] | None = None,
    ) -> Document:
        """``PATCH``: ``source`` and ``tags`` replaced, ``metadata`` merged (a key set
        to ``None`` is deleted), without re-encoding; ``links`` replace the links the
        document was given (those found in its text stay), ``[]`` removes them."""
        fields = {"source": source, "tags": tags, "metadata": metadata, "links": links}
        request = endpoints.update_document(external_id, fields)
        return parse(Document.model_validate, self._send(request), request.path)

    def get_document_links(
        self, external_id: str, *, types: str | Sequence[str] | None = None
    ) -> DocumentLinks:
        """An indexed document's links: ``out`` (its own, resolved or not) and ``back``
        (from the indexed documents linking to it), by type; only ``types`` when given."""
        request = endpoints.get_document_links(external_id, types=types)
        return parse(DocumentLinks.model_validate, self._send(request), request.path)

    def list_communities(
        self,
        *,
        level: int | None = None,
        parent: str | None = None,
        concepts: str | Sequence[str] | None = None,
        limit: int | None = None,
    ) -> CommunityList:
        """The tenant's concept communities (lazy search's Level 1 index): of ``level``,
        children of ``parent``, or those holding ``concepts`` first (a key only: a
        search token is refused)."""
        request = endpoints.list_communities(
            level=level, parent=parent, concepts=concepts, limit=limit
        )
        return parse(CommunityList.model_validate, self._send(request), request.path)

    def get_settings(self) -> TenantSettings:
        """The tenant's settings (``GET /v1/settings``)."""
        request = endpoints.get_settings()
        return parse(TenantSettings.model_validate, self._send(request), request.path)

    def update_settings(self, *, text_links: Sequence[str] | None = None) -> TenantSettings:
        """Change the tenant's settings (those not given stay; an ``ingest`` key).
        Documents indexed already keep their links until ``hsearch links relink``."""
        request = endpoints.update_settings({"text_links": text_links})
        return parse(TenantSettings.model_validate, self._send(request), request.path)

    def get_community(self, community_id: str) -> CommunityDetail:
        """One concept community with its chunks, best first."""
        request = endpoints.get_community(community_id)
        return parse(CommunityDetail.model_validate, self._send(request), request.path)

    def delete_document(self, external_id: str) -> DocumentDeleted:
        request = endpoints.delete_document(external_id)
        return parse(DocumentDeleted.model_validate, self._send(request), request.path)

    def documents_page(
        self, *, source: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> DocumentPage:
        """One page of the tenant's documents, in external id order."""
        request = endpoints.documents_page(source=source, limit=limit, cursor=cursor)
        return parse(DocumentPage.model_validate, self._send(request), "GET /v1/documents")

    def list_documents(
        self, *, source: str | None = None, limit: int | None = None
    ) -> Iterator[Document]:
        """The tenant's documents in external id order, page after page (at most
        ``limit``)."""
        cursor: str | None = None
        left = limit
        while left is None or left > 0:
            size = endpoints.page_size(left)
            page = self.documents_page(source=source, limit=size, cursor=cursor)
            rows = page.documents[:size]
            yield from rows
            left = None if left is None else left - len(rows)
            cursor = page.next_cursor
            if not cursor:
                return

    # Jobs.

    def get_job(self, job_id: uuid.UUID | str) -> Job:
        request = endpoints.get_job(job_id)
        return parse(Job.model_validate, self._send(request), request.path)

    def cancel_job(self, job_id: uuid.UUID | str) -> Job:
        """Cancel a queued or running job (a finished one: ``JobFinishedError``)."""
        request = endpoints.cancel_job(job_id)
        return parse(Job.model_validate, self._send(request), request.path)

    def jobs_page(
        self, *, status: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> JobPage:
        """One page of the tenant's jobs, newest first."""
        request = endpoints.jobs_page(status=status, limit=limit, cursor=cursor)
        return parse(JobPage.model_validate, self._send(request), "GET /v1/jobs")

    def list_jobs(self, *, status: str | None = None, limit: int | None = None) -> Iterator[Job]:
        """The tenant's jobs, newest first, page after page (at most ``limit``)."""
        cursor: str | None = None
        left = limit
        while left is None or left > 0:
            size = endpoints.page_size(left)
            page = self.jobs_page(status=status, limit=size, cursor=cursor)
            rows = page.jobs[:size]
            yield from rows
            left = None if left is None else left - len(rows)
            cursor = page.next_cursor
            if not cursor:
                return

    def wait_for_job(
        self, job_id: uuid.UUID | str, *, timeout_s: float = 300.0, poll_interval_s: float = 1.0
    ) -> Job:
        """The job once it has finished, read every ``poll_interval_s``; raises
        ``TimeoutError`` after ``timeout_s``."""
        deadline = self._clock() + timeout_s
        while True:
            job = self.get_job(job_id)
            if job.finished:
                return job
            if self._clock() + poll_interval_s > deadline:
                msg = f"job {job_id} still {job.status} after {timeout_s:g} s"
                raise TimeoutError(msg)
            self._sleep(poll_interval_s)

    # Transport.

    def _attempts(self, request: Request) -> Attempts:
        return Attempts(self.retry, request.where(self.base_url), self._clock)

    def _send(self, request: Request) -> Any:
        """The body of ``request``'s answer, tried again as :attr:`retry` says."""
        attempts = self._attempts(request)
        while True:
            attempts.tries += 1
            self.requests += 1
            try:
                resp = self._http.request(
                    request.method,
                    request.path,
                    params=request.params,
                    content=request.body,
                    headers=request.headers(),
                )
            except httpx.TransportError as exc:
                answer: Any = transport_failure(exc)
            else:
                answer = read_answer(resp)
            if not isinstance(answer, Failure):
                return answer
            self._wait(attempts, answer)

    def _wait(self, attempts: Attempts, failure: Failure) -> None:
        pause, said = attempts.pause(failure)
        if self._on_retry is not None:
            self._on_retry(said)
        self._sleep(pause)
