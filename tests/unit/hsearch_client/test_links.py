"""Links through the sync and the async client, against the live API: documents
submitted with links (models or dicts) list them out and back as typed values, a patch
replaces or removes them, and a keyword search weighted towards the graph leg brings
back a linked document explained by its path, each hit listing its linked pages."""

from __future__ import annotations

import json
from typing import Any

import httpx

from hsearch_client import AsyncClient, Client, DocumentInput, DocumentLinks, GraphOptions, Link
from hsearch_client.models import LinkedDocument, LinkedPage
from tests.unit.hsearch_client.conftest import Served

VOLCANO = "Volcanoes erupt lava and ash from magma chambers."
# Shares no word with the query: only a link leads to it.
ISLAND = "Hawaii sits over a hotspot in the Pacific plate."
MILK = "Cheese is made from milk by curdling."
GRAPH = {"sparse": 0.7, "graph": 0.3}


def linked(client: Client) -> None:
    """Volcano links to the island and to a document not indexed; milk mentions it."""
    accepted = client.submit_documents(
        [
            DocumentInput(
                external_id="volcano",
                title="Volcanoes",
                text=VOLCANO,
                links=[Link(target="island"), Link(target="gone", type="cites", weight=2.5)],
            ),
            {"external_id": "island", "title": "Islands", "text": ISLAND},
            {
                "external_id": "milk",
                "title": "Milk",
                "text": MILK,
                "links": [{"target": "volcano", "type": "mention"}],
            },
        ]
    )
    job = client.wait_for_job(accepted.job_id, timeout_s=30, poll_interval_s=0.05)
    assert job.status == "succeeded", job


def ends(listed: list[LinkedDocument]) -> list[tuple[str, str, str | None, str]]:
    return [(x.external_id, x.type, x.title, x.direction) for x in listed]


def test_links_are_listed_out_and_back_and_replaced_by_a_patch(served: Served) -> None:
    with Client(served.url, api_key=served.key) as client:
        linked(client)
        links = client.get_document_links("volcano")
        assert isinstance(links, DocumentLinks)
        assert links.external_id == "volcano"
        assert ends(links.out) == [
            ("gone", "cites", None, "out"),
            ("island", "link", "Islands", "out"),
        ]
        assert (links.out[0].weight, links.out[0].origin) == (2.5, "given")
        assert ends(links.back) == [("milk", "mention", "Milk", "in")]
        assert ends(client.get_document_links("island").back) == [
            ("volcano", "link", "Volcanoes", "in")
        ]

        # Only the types asked for, one or several.
        cites = client.get_document_links("volcano", types="cites")
        assert (ends(cites.out), cites.back) == ([("gone", "cites", None, "out")], [])
        both = client.get_document_links("volcano", types=["cites", "mention"])
        assert [x.external_id for x in both.out + both.back] == ["gone", "milk"]

        client.update_document("volcano", links=[Link(target="milk", type="cites")])
        assert ends(client.get_document_links("volcano").out) == [("milk", "cites", "Milk", "out")]
        assert client.get_document_links("island").back == []
        client.update_document("volcano", links=[])
        assert client.get_document_links("volcano").out == []
        # The links given to others stay.
        assert ends(client.get_document_links("volcano").back) == [
            ("milk", "mention", "Milk", "in")
        ]


def test_a_search_follows_links_and_lists_each_hits_linked_pages(served: Served) -> None:
    with Client(served.url, api_key=served.key) as client:
        linked(client)
        keyword: dict[str, Any] = {"mode": "keyword", "group_by_document": True}
        alone = client.search("volcanoes lava", weights={"sparse": 1.0}, **keyword)
        assert [h.external_id for h in alone.hits] == ["volcano"]
        assert alone.hits[0].linked_pages is None

        page = client.search(
            "volcanoes lava",
            weights=GRAPH,
            graph={"types": ["link"]},
            include_linked=True,
            **keyword,
        )
        assert [h.external_id for h in page.hits] == ["volcano", "island"]
        volcano, island = page.hits
        assert volcano.linked_pages == [
            LinkedPage(external_id="island", title="Islands", type="link", direction="out"),
            LinkedPage(external_id="milk", title="Milk", type="mention", direction="in"),
        ]
        assert island.explanation is not None
        graph = island.explanation.legs["graph"]
        assert (graph.rank, island.explanation.legs["sparse"].rank) == (1, None)
        assert graph.detail == {
            "seed": "volcano",
            "hops": 1,
            "path": ["volcano", "island"],
            "via": ["link"],
            "directions": ["out"],
        }

        # Along mentions only, the leg walks back to milk.
        mentions = client.search(
            "volcanoes lava", weights=GRAPH, graph=GraphOptions(types=["mention"]), **keyword
        )
        assert [h.external_id for h in mentions.hits] == ["volcano", "milk"]
        milk = mentions.hits[1].explanation
        assert milk is not None
        assert milk.legs["graph"].detail is not None
        assert milk.legs["graph"].detail["directions"] == ["in"]


async def test_the_async_client_reads_and_patches_links_and_searches_the_graph(
    served: Served,
) -> None:
    with Client(served.url, api_key=served.key) as client:
        linked(client)
    async with AsyncClient(served.url, api_key=served.key) as client:
        links = await client.get_document_links("volcano", types=["link", "mention"])
        assert ends(links.out) == [("island", "link", "Islands", "out")]
        assert ends(links.back) == [("milk", "mention", "Milk", "in")]

        page = await client.search(
            "volcanoes lava",
            mode="keyword",
            group_by_document=True,
            weights=GRAPH,
            graph=GraphOptions(types=["link"], direction="out"),
            include_linked=True,
        )
        assert [h.external_id for h in page.hits] == ["volcano", "island"]
        assert page.hits[1].linked_pages == [
            LinkedPage(external_id="volcano", title="Volcanoes", type="link", direction="in")
        ]

        await client.update_document("volcano", links=[{"target": "milk"}])
        assert ends((await client.get_document_links("volcano")).out) == [
            ("milk", "link", "Milk", "out")
        ]
        await client.update_document("volcano", links=[])
        assert (await client.get_document_links("volcano")).out == []


def test_what_the_link_requests_send() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if request.url.path == "/v1/search":
            body: dict[str, Any] = {"query": "q", "mode": "keyword", "method": "rrf"}
            return httpx.Response(200, json={**body, "top_k": 10, "total": 0, "hits": []})
        if request.url.path.endswith("/links"):
            return httpx.Response(200, json={"external_id": "a/b", "out": [], "back": []})
        if request.method == "POST":
            return httpx.Response(202, json={"job_id": "00000000-0000-0000-0000-000000000001"})
        return httpx.Response(200, json={"external_id": "a/b", "status": "indexed"})

    with Client("http://api.test", transport=httpx.MockTransport(handler)) as client:
        client.search("q", graph=GraphOptions(depth=1, direction="out"), include_linked=True)
        client.search("q", graph={"scoring": "pagerank"})
        client.get_document_links("a/b")
        client.get_document_links("a/b", types=["cites", "link"])
        client.update_document("a/b", links=[Link(target="c"), {"target": "d", "weight": 2}])
        client.update_document("a/b", links=[])
        client.update_document("a/b", tags=["t"])
        client.submit_documents(
            [DocumentInput(external_id="a", text="A.", links=[Link(target="b", type="cites")])]
        )
    bodies = [json.loads(r.content) if r.content else None for r in sent]
    assert bodies[:2] == [
        {"query": "q", "graph": {"depth": 1, "direction": "out"}, "include_linked": True},
        {"query": "q", "graph": {"scoring": "pagerank"}},
    ]
    assert [str(r.url) for r in sent[2:4]] == [
        "http://api.test/v1/documents/a/b/links",
        "http://api.test/v1/documents/a/b/links?type=cites&type=link",
    ]
    assert bodies[4:7] == [
        {"links": [{"target": "c", "type": "link", "weight": 1.0}, {"target": "d", "weight": 2}]},
        {"links": []},
        {"tags": ["t"]},
    ]
    # The tenant's setting applies: ``text_links`` left out is not sent.
    assert bodies[7] == {
        "documents": [
            {
                "external_id": "a",
                "text": "A.",
                "title": "",
                "source": "",
                "lang": "",
                "tags": [],
                "metadata": {},
                "links": [{"target": "b", "type": "cites", "weight": 1.0}],
            }
        ]
    }


def test_the_tenant_settings_and_a_lazy_answer_through_the_client(served: Served) -> None:
    with Client(served.url, api_key=served.key) as client:
        assert client.get_settings().text_links == []
        changed = client.update_settings(text_links=["mentions", "hyperlinks"])
        assert changed.text_links == ["hyperlinks", "mentions"]
        assert client.update_settings().text_links == ["hyperlinks", "mentions"]  # none given
        assert client.get_settings().text_links == ["hyperlinks", "mentions"]
        client.update_settings(text_links=[])

        linked(client)
        answer = client.answer(
            "volcanoes lava",
            mode="keyword",
            strategy="lazy",
            generate=False,
            budget={"relevance_tests": 5},
        )
        assert answer.strategy == "lazy"
        assert answer.lazy is not None
        assert answer.lazy.budget["relevance_tests"].allowed == 5
        assert answer.lazy.budget["relevance_tests"].used <= 5
        assert "volcano" in {p.external_id for p in answer.passages}
        assert all(c.chunk_id for c in answer.lazy.claims)
        events = list(
            client.answer_stream("volcanoes lava", mode="keyword", strategy="lazy", generate=False)
        )
        assert events[0].event == "progress"
        assert events[-1].event == "done"
