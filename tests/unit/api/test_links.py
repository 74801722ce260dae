"""Links as data (docs/graph.md): submitted with a document (JSON and NDJSON), listed
out and back by ``GET /v1/documents/{id}/links``, replaced by a re-ingest or a
``PATCH``, resolved when their target arrives, removed with their document (the links
to it left unresolved), never another tenant's, refused with the field named."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.unit.api.conftest import Api, ingest


def doc(external_id: str, *links: Any, title: str = "", **fields: Any) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "title": title or external_id.upper(),
        "text": f"The text of {external_id}.",
        "links": [x if isinstance(x, dict) else {"target": x} for x in links],
        **fields,
    }


async def links(client: httpx.AsyncClient, external_id: str, **params: Any) -> dict[str, Any]:
    resp = await client.get(f"/v1/documents/{external_id}/links", params=params)
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def ends(listed: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(x["external_id"], x["type"], x["title"]) for x in listed]


async def test_links_resolve_when_their_target_arrives_and_list_both_ways(api: Api) -> None:
    await ingest(api, [doc("a", "b", {"target": "c", "type": "cites", "weight": 2.5})])
    a = await links(api.client, "a")
    assert ends(a["out"]) == [("c", "cites", None), ("b", "link", None)]
    assert a["out"][0]["weight"] == 2.5
    assert a["back"] == []

    await ingest(api, [doc("b"), doc("c", "a", title="Sea")])
    a = await links(api.client, "a")
    assert ends(a["out"]) == [("c", "cites", "Sea"), ("b", "link", "B")]
    assert ends(a["back"]) == [("c", "link", "Sea")]
    assert {x["direction"] for x in a["out"]} == {"out"}
    assert {x["direction"] for x in a["back"]} == {"in"}
    assert ends((await links(api.client, "b"))["back"]) == [("a", "link", "A")]
    only = await links(api.client, "a", type="cites")
    assert ends(only["out"]) == [("c", "cites", "Sea")]
    assert only["back"] == []


async def test_a_reingest_keeps_or_replaces_links_and_a_delete_removes_them(api: Api) -> None:
    await ingest(api, [doc("a", "b", "c"), doc("b"), doc("c")])
    # The same submission again: unchanged, the links stay.
    resp = await api.client.post("/v1/documents", json={"documents": [doc("a", "b", "c")]})
    job = uuid.UUID(resp.json()["job_id"])
    assert api.services.indexing().process_job(job) == "succeeded"
    assert (await api.client.get(f"/v1/jobs/{job}")).json()["skipped"] == 1
    assert ends((await links(api.client, "a"))["out"]) == [("b", "link", "B"), ("c", "link", "C")]

    # The same text with other links is not "unchanged": the links are replaced.
    resp = await api.client.post("/v1/documents", json={"documents": [doc("a", "c")]})
    job = uuid.UUID(resp.json()["job_id"])
    assert api.services.indexing().process_job(job) == "succeeded"
    assert (await api.client.get(f"/v1/jobs/{job}")).json()["indexed"] == 1
    assert ends((await links(api.client, "a"))["out"]) == [("c", "link", "C")]
    assert (await links(api.client, "b"))["back"] == []

    # Deleting c leaves a's link to it unresolved; deleting a removes its own links.
    assert (await api.client.delete("/v1/documents/c")).status_code == 200
    assert ends((await links(api.client, "a"))["out"]) == [("c", "link", None)]
    await ingest(api, [doc("c", title="Back")])
    assert ends((await links(api.client, "a"))["out"]) == [("c", "link", "Back")]
    assert (await api.client.delete("/v1/documents/a")).status_code == 200
    assert (await links(api.client, "c"))["back"] == []
    assert (await api.client.get("/v1/documents/a/links")).status_code == 404


async def test_patch_replaces_the_given_links(api: Api) -> None:
    await ingest(api, [doc("a", "b"), doc("b"), doc("c")])
    resp = await api.client.patch(
        "/v1/documents/a", json={"links": [{"target": "c", "type": "see-also"}]}
    )
    assert resp.status_code == 200, resp.text
    assert ends((await links(api.client, "a"))["out"]) == [("c", "see-also", "C")]
    assert (await links(api.client, "b"))["back"] == []
    # Without ``links`` a patch leaves them; with [] it removes them.
    await api.client.patch("/v1/documents/a", json={"tags": ["x"]})
    assert len((await links(api.client, "a"))["out"]) == 1
    await api.client.patch("/v1/documents/a", json={"links": []})
    assert (await links(api.client, "a"))["out"] == []
    # The submission the patch replaced is not "unchanged" any more: it comes back whole.
    await ingest(api, [doc("a", "b")])
    assert ends((await links(api.client, "a"))["out"]) == [("b", "link", "B")]


async def test_links_in_an_ndjson_upload(api: Api) -> None:
    lines = [
        '{"external_id": "n1", "text": "One.", "links": [{"target": "n2", "type": "next"}]}',
        '{"external_id": "n2", "text": "Two."}',
    ]
    resp = await api.client.post(
        "/v1/documents:ndjson",
        content="\n".join(lines).encode(),
        headers={"content-type": "application/x-ndjson"},
    )
    assert resp.status_code == 202, resp.text
    assert api.services.indexing().process_job(uuid.UUID(resp.json()["job_id"])) == "succeeded"
    assert ends((await links(api.client, "n2"))["back"]) == [("n1", "next", "")]


async def test_bad_links_are_refused_naming_the_field(api: Api) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"target": "a"}, "links[0].target"),  # itself
        ({"target": ""}, "target"),
        ({"target": "b", "weight": 0}, "weight"),
        ({"target": "b", "weight": -1}, "weight"),
        ({"target": "b", "type": ""}, "type"),
        ({"target": "b", "colour": "red"}, "colour"),
    ]
    for link, field in cases:
        resp = await api.client.post("/v1/documents", json={"documents": [doc("a", link)]})
        assert resp.status_code == 422, (link, resp.text)
        assert field in resp.text, (link, resp.text)
    many = [{"target": f"t{i}"} for i in range(1001)]
    resp = await api.client.post("/v1/documents", json={"documents": [doc("a", *many)]})
    assert resp.status_code == 422, resp.text
    await ingest(api, [doc("a", "b")])
    resp = await api.client.patch("/v1/documents/a", json={"links": [{"target": "a"}]})
    assert resp.status_code == 422, resp.text
    assert "links[0].target" in resp.text
    # Nothing was lost: the link a was given is still there.
    assert ends((await links(api.client, "a"))["out"]) == [("b", "link", None)]


async def test_another_tenants_links_are_never_seen(api: Api) -> None:
    other = api.services.tenancy.ensure_tenant("other", actor="test").id
    key = api.services.tenancy.create_key(other, scopes=["ingest", "search"], actor="test").key
    await ingest(api, [doc("a", "b"), doc("b", title="Mine")])
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        # The same external ids in the other tenant: its own documents and links.
        await ingest(api, [doc("b", "a", title="Theirs")], client=client)
        assert (await client.get("/v1/documents/a/links")).status_code == 404
        theirs = await links(client, "b")
        assert ends(theirs["out"]) == [("a", "link", None)]
        assert theirs["back"] == []
    mine = await links(api.client, "b")
    assert ends(mine["back"]) == [("a", "link", "A")]
    assert mine["out"] == []


async def test_a_search_token_lists_only_the_linked_documents_it_may_read(api: Api) -> None:
    await ingest(
        api,
        [
            doc("a", "b", "c", "gone", source="open"),
            doc("b", "a", source="open"),
            doc("c", "a", source="secret"),
        ],
    )
    resp = await api.client.post("/v1/tokens", json={"filter": {"source": {"eq": "open"}}})
    assert resp.status_code == 201, resp.text
    token = resp.json()["token"]
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {token}"
        a = await links(client, "a")
        assert ends(a["out"]) == [("b", "link", "B")]
        assert ends(a["back"]) == [("b", "link", "B")]
        assert (await client.get("/v1/documents/c/links")).status_code == 404
