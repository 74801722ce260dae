"""The sync and the async client against the live API: typed search pages followed by
their cursor, an answer with checked citations and its stream as typed events, documents
and jobs read, listed page by page, changed and deleted, and the API's refusals raised
as the classes of their codes."""

from __future__ import annotations

import httpx
import pytest

from hsearch_client import (
    AsyncClient,
    CitationEvent,
    Client,
    DeltaEvent,
    DoneEvent,
    RetrievalEvent,
)
from hsearch_client.errors import (
    DocumentNotFoundError,
    InsufficientScopeError,
    InvalidApiKeyError,
    InvalidRequestError,
    JobFinishedError,
)
from hsearch_client.models import Answer, Document, Hit, Job, SearchResponse
from tests.unit.hsearch_client.conftest import LONG, Served


def test_a_search_is_typed_and_groups_by_document_when_asked(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        # Keyword mode: the fake encoder's dense leg would find every document.
        grouped = client.search("river floods", top_k=50, group_by_document=True, mode="keyword")
        assert isinstance(grouped, SearchResponse)
        assert sorted(h.external_id for h in grouped.hits) == ["long", "short"]
        long_hit = next(h for h in grouped.hits if h.external_id == "long")
        assert isinstance(long_hit, Hit)
        assert long_hit.matching_chunks > 1
        assert long_hit.explanation is not None
        assert long_hit.snippet is not None
        assert "<em>" in long_hit.snippet
        assert grouped.legs
        assert [leg.leg for leg in grouped.legs] == ["sparse"]

        # The API's own default: every matching chunk.
        chunks = client.search("river floods", top_k=50, mode="keyword")
        assert len(chunks.hits) == long_hit.matching_chunks + 1

        newest = client.search("river floods", sort=["metadata.year:desc"], mode="keyword")
        assert [h.external_id for h in newest.hits][:2] == ["short", "long"]
        assert newest.sort is not None
        assert newest.sort.basis == "window"


def test_search_pages_follow_the_cursor_without_repeating_a_hit(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        everything = client.search("river floods", top_k=100)
        pages = list(client.search_pages("river floods", top_k=3))
        assert len(pages) > 2
        assert all(p.next_cursor for p in pages[:-1])
        assert pages[-1].next_cursor is None
        paged = [h.chunk_id for p in pages for h in p.hits]
        assert paged == [h.chunk_id for h in everything.hits]
        assert len(list(client.search_pages("river floods", top_k=3, max_pages=2))) == 2
        hits = list(client.search_hits("river floods", top_k=3, limit=5))
        assert [h.chunk_id for h in hits] == paged[:5]


def test_an_answer_cites_the_passage_that_supports_it(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        answer = client.answer("Where do rivers carry water?", passages=3)
        assert isinstance(answer, Answer)
        assert answer.answer == "Rivers carry water down to the sea.[1]"
        assert answer.citations[0].external_id == "short"
        assert answer.citations[0].quote == "Rivers carry water down to the sea."
        assert answer.passages
        assert answer.degraded == []


def test_the_answer_stream_is_typed_events_in_order(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        events = list(client.answer_stream("Where do rivers carry water?", passages=3))
    assert isinstance(events[0], RetrievalEvent)
    assert events[0].passages
    text = "".join(e.text for e in events if isinstance(e, DeltaEvent))
    assert text.startswith("Rivers carry water down to the sea")
    cited = [e for e in events if isinstance(e, CitationEvent)]
    assert cited[0].citations[0].external_id == "short"
    assert isinstance(events[-1], DoneEvent)
    assert events[-1].answer.answer == "Rivers carry water down to the sea.[1]"


def test_a_stream_closed_early_stops_there(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        stream = client.answer_stream("Where do rivers carry water?")
        first = next(iter(stream))
        assert isinstance(first, RetrievalEvent)
        stream.close()  # type: ignore[attr-defined]  # a generator
        # The connection is free again for the next request.
        assert client.search("river", top_k=1).hits


def test_documents_are_listed_page_by_page_read_changed_and_deleted(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        listed = list(client.list_documents())
        assert [d.external_id for d in listed] == ["desert", "long", "short"]
        assert all(isinstance(d, Document) for d in listed)
        first = client.documents_page(limit=2)
        assert [d.external_id for d in first.documents] == ["desert", "long"]
        assert first.next_cursor is not None
        assert [d.external_id for d in client.list_documents(limit=2)] == ["desert", "long"]

        assert client.get_document("long").text is None
        assert client.get_document("long", include_text=True).text == LONG
        changed = client.update_document("long", tags=["water"], metadata={"year": None})
        assert (changed.tags, changed.metadata) == (["water"], {})

        deleted = client.delete_document("desert")
        assert (deleted.external_id, deleted.deleted_chunks) == ("desert", 1)
        with pytest.raises(DocumentNotFoundError) as missing:
            client.get_document("desert")
        assert (missing.value.status, missing.value.code) == (404, "document_not_found")


def test_jobs_are_listed_and_a_finished_one_cannot_be_cancelled(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        jobs = list(client.list_jobs())
        assert len(jobs) == 1
        assert isinstance(jobs[0], Job)
        assert jobs[0].finished
        assert jobs[0].processed == 3
        assert client.get_job(jobs[0].id).indexed == 3
        with pytest.raises(JobFinishedError):
            client.cancel_job(jobs[0].id)


def test_refusals_are_raised_as_the_class_of_their_code(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.key) as client:
        with pytest.raises(InvalidRequestError) as refused:
            client.search("river", sort=["body"])
        assert refused.value.errors[0].field == "sort[0].field"
        with pytest.raises(InvalidRequestError) as empty:
            client.submit_documents([{"external_id": "x", "text": ""}])
        assert empty.value.errors[0].field.startswith("documents[0].text")
    with Client(indexed.url, api_key=indexed.search_key) as searcher:
        assert searcher.search("river", top_k=1).hits
        with pytest.raises(InsufficientScopeError) as scope:
            searcher.submit_documents([{"external_id": "x", "text": "X."}])
        assert (scope.value.status, scope.value.code) == (403, "insufficient_scope")
    with (
        Client(indexed.url, api_key="hsk_not_a_key") as stranger,
        pytest.raises(InvalidApiKeyError),
    ):
        stranger.search("river")


def test_another_tenant_sees_none_of_the_documents(indexed: Served) -> None:
    with Client(indexed.url, api_key=indexed.other_key) as other:
        assert other.search("river floods", top_k=50).hits == []
        assert list(other.list_documents()) == []
        with pytest.raises(DocumentNotFoundError):
            other.get_document("long")


async def test_the_async_client_does_the_same(indexed: Served) -> None:
    async with AsyncClient(indexed.url, api_key=indexed.key) as client:
        page = await client.search("river floods", top_k=3, group_by_document=True)
        assert page.hits[0].external_id in {"long", "short"}
        pages = [p async for p in client.search_pages("river floods", top_k=3)]
        assert len(pages) > 2
        documents = [d.external_id async for d in client.list_documents(limit=2)]
        assert documents == ["desert", "long"]
        events = [e async for e in client.answer_stream("Where do rivers carry water?")]
        assert isinstance(events[0], RetrievalEvent)
        assert isinstance(events[-1], DoneEvent)
        assert events[-1].answer.citations[0].external_id == "short"
        accepted = await client.submit_documents([{"external_id": "sea", "text": "The sea."}])
        job = await client.wait_for_job(accepted.job_id, timeout_s=30, poll_interval_s=0.05)
        assert job.status == "succeeded"
        assert (await client.get_document("sea")).status == "indexed"
        with pytest.raises(DocumentNotFoundError):
            await client.get_document("nowhere")


def test_what_a_search_sends() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            200,
            json={
                "query": "q",
                "mode": "hybrid",
                "method": "rrf",
                "top_k": 10,
                "total": 0,
                "hits": [],
            },
        )

    client = Client("http://api.test/", api_key="k", transport=httpx.MockTransport(handler))
    client.search("q")
    client.search("q", top_k=3, group_by_document=False, filter={"source": {"eq": "a"}})
    bodies = [httpx.Response(200, content=r.content).json() for r in sent]
    assert bodies == [
        {"query": "q"},
        {"query": "q", "top_k": 3, "filter": {"source": {"eq": "a"}}, "group_by_document": False},
    ]
    assert {(r.method, r.url.path, r.headers["content-type"]) for r in sent} == {
        ("POST", "/v1/search", "application/json")
    }
    assert sent[0].headers["authorization"] == "Bearer k"
