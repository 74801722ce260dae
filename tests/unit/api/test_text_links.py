"""Links found in a document's text (docs/graph.md): hyperlinks, wiki links and title
mentions written with origin ``text`` at indexing, as the submission's ``text_links``
or the tenant's setting (``GET``/``PATCH /v1/settings``) asks; replaced with the text,
left alone by a ``PATCH`` of the given links, found again by a relink; never resolved
against another tenant's documents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from hsearch.db.models import Document
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.ingestion.ids import document_id
from tests.unit.api.conftest import Api, api_settings, ingest, serve
from tests.unit.test_cli_tenancy import Cli


def doc(external_id: str, text: str = "", *, title: str = "", **fields: Any) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "title": title or external_id.upper(),
        "text": text or f"The text of {external_id}.",
        **fields,
    }


async def out_links(
    client: httpx.AsyncClient, external_id: str
) -> list[tuple[str, str, str, str | None]]:
    """``(target, type, origin, target's title)`` of the document's links."""
    resp = await client.get(f"/v1/documents/{external_id}/links")
    assert resp.status_code == 200, resp.text
    return [(x["external_id"], x["type"], x["origin"], x["title"]) for x in resp.json()["out"]]


async def set_text_links(client: httpx.AsyncClient, kinds: list[str]) -> dict[str, Any]:
    resp = await client.patch("/v1/settings", json={"text_links": kinds})
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def generation(api: Api) -> int:
    with api.services.sessions() as session:
        return TenantRepository(session).generation(api.services.settings.api.default_tenant)


HYPERLINKS = ["hyperlinks"]
MENTIONS = ["mentions"]


async def test_markdown_html_and_wiki_links_resolve_to_documents_of_the_same_batch(
    api: Api,
) -> None:
    text = (
        "First [see](b.md), then <a href='/docs/c'>the guide</a>.\n\n"
        "Also [[Title Of D]] and [nothing](missing.md) and [mail](mailto:x@y.z)."
    )
    await ingest(
        api,
        [
            doc("a", text, text_links=HYPERLINKS),
            doc("b.md"),
            doc("docs/c.html", title="The Guide"),
            doc("d", title="Title Of D"),
        ],
    )
    assert await out_links(api.client, "a") == [
        ("b.md", "link", "text", "B.MD"),
        ("d", "link", "text", "Title Of D"),
        ("docs/c.html", "link", "text", "The Guide"),
    ]
    # Back-links too; and without text_links (the tenant's setting: none) no link is found.
    resp = await api.client.get("/v1/documents/d/links")
    assert [(x["external_id"], x["origin"]) for x in resp.json()["back"]] == [("a", "text")]
    await ingest(api, [doc("e", "[see](b.md)")])
    assert await out_links(api.client, "e") == []


async def test_mentions_are_other_documents_titles_named_as_whole_words(api: Api) -> None:
    text = "The Moraine Lake glacier fed the lake; icebergs broke off. Glacier!"
    await ingest(
        api,
        [
            doc("source", text, title="Glacier Notes", text_links=MENTIONS),
            doc("lake", title="Moraine Lake"),
            doc("glacier", title="Glacier"),
            doc("berg", title="Berg"),  # only inside "icebergs": not a whole word
            doc("ice", title="Ice"),  # shorter than a title must be to be looked for
            doc("link", "[x](lake)", title="Linker", text_links=MENTIONS),
        ],
    )
    assert await out_links(api.client, "source") == [
        ("glacier", "mention", "text", "Glacier"),
        ("lake", "mention", "text", "Moraine Lake"),
    ]
    # Mentions only: its hyperlink is not followed.
    assert await out_links(api.client, "link") == []


async def test_the_tenant_setting_applies_when_a_submission_says_nothing(api: Api) -> None:
    assert (await api.client.get("/v1/settings")).json() == {"text_links": []}
    body = await set_text_links(api.client, ["mentions", "hyperlinks", "mentions"])
    assert body == {"text_links": ["hyperlinks", "mentions"]}
    assert (await api.client.get("/v1/settings")).json() == body
    # A patch that leaves it out leaves it.
    resp = await api.client.patch("/v1/settings", json={})
    assert resp.json() == body

    text = "See [b](b) about the Solar Wind."
    await ingest(
        api,
        [
            doc("follows", text),
            doc("none", text, text_links=[]),
            doc("only-links", text, text_links=HYPERLINKS),
            doc("b"),
            doc("wind", title="Solar Wind"),
        ],
    )
    assert await out_links(api.client, "follows") == [
        ("b", "link", "text", "B"),
        ("wind", "mention", "text", "Solar Wind"),
    ]
    assert await out_links(api.client, "none") == []
    assert await out_links(api.client, "only-links") == [("b", "link", "text", "B")]

    # Changing the setting re-indexes nothing.
    assert await set_text_links(api.client, []) == {"text_links": []}
    assert len(await out_links(api.client, "follows")) == 2
    resp = await api.client.patch("/v1/settings", json={"text_links": ["backlinks"]})
    assert resp.status_code == 422
    assert "text_links" in resp.text


async def test_a_reingest_with_other_text_replaces_the_text_links(api: Api) -> None:
    await ingest(
        api,
        [doc("a", "[b](b)", text_links=HYPERLINKS), doc("b"), doc("c", title="Crater Rim")],
    )
    assert await out_links(api.client, "a") == [("b", "link", "text", "B")]
    await ingest(api, [doc("a", "[c](c), near the Crater Rim.", text_links=HYPERLINKS)])
    assert await out_links(api.client, "a") == [("c", "link", "text", "Crater Rim")]
    # Asking for mentions too: the same text, another submission, more links.
    await ingest(
        api, [doc("a", "[c](c), near the Crater Rim.", text_links=["hyperlinks", "mentions"])]
    )
    assert await out_links(api.client, "a") == [
        ("c", "link", "text", "Crater Rim"),
        ("c", "mention", "text", "Crater Rim"),
    ]
    await ingest(api, [doc("a", "[c](c)", text_links=[])])
    assert await out_links(api.client, "a") == []


async def test_a_link_given_and_found_is_kept_as_given(api: Api) -> None:
    await ingest(
        api,
        [
            doc(
                "a",
                "[b](b) and [c](c)",
                text_links=HYPERLINKS,
                links=[{"target": "b", "weight": 3}],
            ),
            doc("b"),
            doc("c"),
        ],
    )
    listed = (await api.client.get("/v1/documents/a/links")).json()["out"]
    assert [(x["external_id"], x["origin"], x["weight"]) for x in listed] == [
        ("b", "given", 3.0),
        ("c", "text", 1.0),
    ]


async def test_patching_the_given_links_leaves_the_text_links(api: Api) -> None:
    await ingest(
        api,
        [doc("a", "[b](b)", text_links=HYPERLINKS, links=[{"target": "c"}]), doc("b"), doc("c")],
    )
    resp = await api.client.patch(
        "/v1/documents/a", json={"links": [{"target": "c", "type": "cites"}]}
    )
    assert resp.status_code == 200, resp.text
    assert await out_links(api.client, "a") == [
        ("c", "cites", "given", "C"),
        ("b", "link", "text", "B"),
    ]
    await api.client.patch("/v1/documents/a", json={"links": []})
    assert await out_links(api.client, "a") == [("b", "link", "text", "B")]


async def test_relink_finds_documents_indexed_after_the_text(api: Api) -> None:
    await set_text_links(api.client, MENTIONS)
    await ingest(
        api,
        [
            doc("early", "Watch the Northern Lights from [the hut](hut)."),
            doc("explicit", "The Northern Lights again.", text_links=[]),
        ],
    )
    await ingest(api, [doc("aurora", title="Northern Lights"), doc("hut")])
    assert await out_links(api.client, "early") == []

    before = generation(api)
    report = api.services.relinker().relink(api.services.settings.api.default_tenant)
    assert (report.documents, report.searched, report.changed, report.links) == (4, 3, 1, 1)
    assert generation(api) > before, "cached results and the graph go stale"
    assert await out_links(api.client, "early") == [
        ("aurora", "mention", "text", "Northern Lights")
    ]
    assert await out_links(api.client, "explicit") == []

    # The setting changed, then a relink: the documents that follow it follow it.
    await set_text_links(api.client, ["hyperlinks", "mentions"])
    report = api.services.relinker().relink(api.services.settings.api.default_tenant)
    assert report.changed == 1
    assert await out_links(api.client, "early") == [
        ("hut", "link", "text", "HUT"),
        ("aurora", "mention", "text", "Northern Lights"),
    ]
    await set_text_links(api.client, [])
    api.services.relinker().relink(api.services.settings.api.default_tenant)
    assert await out_links(api.client, "early") == []


async def test_another_tenants_titles_and_setting_are_never_used(api: Api) -> None:
    other = api.services.tenancy.ensure_tenant("other", actor="test").id
    key = api.services.tenancy.create_key(other, scopes=["ingest", "search"], actor="test").key
    text = "The Solar Wind meets the Heliopause; see [[Only Theirs]] and [t](theirs-only)."
    async with api.anonymous() as client:
        client.headers["Authorization"] = f"Bearer {key}"
        await set_text_links(client, ["hyperlinks", "mentions"])
        await ingest(
            api,
            [
                doc("sw-theirs", title="Solar Wind"),
                doc("theirs-only", title="Only Theirs"),
                doc("helio", title="Heliopause"),
            ],
            client=client,
        )
        # Mine: the same title as one of theirs; nothing else of theirs exists here.
        await ingest(
            api,
            [doc("mine", text, text_links=["hyperlinks", "mentions"])],
        )
        await ingest(api, [doc("sw-mine", title="Solar Wind")])
        tenant = api.services.settings.api.default_tenant
        api.services.relinker().relink(tenant)
        assert await out_links(api.client, "mine") == [("sw-mine", "mention", "text", "Solar Wind")]
        # Their setting is not mine: a document of mine that says nothing finds nothing.
        await ingest(api, [doc("quiet", "The Solar Wind.")])
        assert await out_links(api.client, "quiet") == []
        # And theirs, relinked, is resolved among theirs only.
        await ingest(api, [doc("t-text", text)], client=client)
        api.services.relinker().relink(other)
        assert await out_links(client, "t-text") == [
            ("theirs-only", "link", "text", "Only Theirs"),
            ("helio", "mention", "text", "Heliopause"),
            ("sw-theirs", "mention", "text", "Solar Wind"),
            ("theirs-only", "mention", "text", "Only Theirs"),
        ]


async def test_a_submission_s_choice_survives_a_reconcile_resubmission(api: Api) -> None:
    tenant = api.services.settings.api.default_tenant
    await set_text_links(api.client, MENTIONS)
    await ingest(api, [doc("a", "[b](b), the Bravo Team.", text_links=HYPERLINKS), doc("b")])
    await ingest(api, [doc("bravo", title="Bravo Team")])
    # Drift: a's chunks lost from the store; the repair submits it again from its row.
    with api.services.sessions() as session:
        chunk_ids = list(session.get_one(Document, document_id(tenant, "a")).chunk_ids)
    api.services.store.delete_chunks(chunk_ids, tenant_id=tenant)
    reconciler = api.services.reconciler()
    repaired = reconciler.repair(reconciler.check(tenant))
    assert repaired.repair_job is not None
    assert api.services.indexing().process_job(repaired.repair_job) == "succeeded"
    assert (await api.client.get(f"/v1/jobs/{repaired.repair_job}")).json()["indexed"] == 1
    # Still hyperlinks only, as submitted, though the tenant's setting is mentions.
    assert await out_links(api.client, "a") == [("b", "link", "text", "B")]


async def test_the_relink_command_on_the_api_s_data_directory(tmp_path: Path) -> None:
    cli = Cli(tmp_path)  # the API's data directory: its database
    async with serve(api_settings(tmp_path)) as api:
        tenant = api.services.settings.api.default_tenant
        await ingest(api, [doc("early", "The Northern Lights.", text_links=MENTIONS)])
        await ingest(api, [doc("aurora", title="Northern Lights")])
        assert cli.json("links", "relink", "--tenant", tenant) == {
            "tenant": tenant,
            "documents": 2,
            "searched": 1,
            "changed": 1,
            "text_links": 1,
        }
        assert await out_links(api.client, "early") == [
            ("aurora", "mention", "text", "Northern Lights")
        ]
        assert cli.json("links", "relink", "--tenant", tenant)["changed"] == 0
        unknown = cli("links", "relink", "--tenant", "nobody")
        assert unknown.exit_code == 2
        assert "tenant_not_found" in unknown.output
