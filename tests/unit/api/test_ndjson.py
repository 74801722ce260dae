"""``POST /v1/documents:ndjson`` on embedded parts: one job per upload, every line
validated on its own with errors naming the line and the field, and the same limits as a
JSON batch (``api.max_request_bytes``, ``ingest.max_documents_per_request``,
``ingest.max_document_chars``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from hsearch.config import ApiSettings, IngestSettings
from hsearch_api.schemas.ndjson import MAX_LINE_ERRORS
from tests.unit.api.conftest import Api, api_settings, serve

NDJSON = {"content-type": "application/x-ndjson"}


def ndjson(*documents: dict[str, Any] | str) -> bytes:
    """One line per item: a document as JSON, or a string as it is (a bad line)."""
    return "".join(d if isinstance(d, str) else json.dumps(d) for d in documents).encode()


def line(document: dict[str, Any]) -> str:
    return json.dumps(document) + "\n"


async def upload(api: Api, body: bytes, **headers: str) -> httpx.Response:
    return await api.client.post(
        "/v1/documents:ndjson", content=body, headers={**NDJSON, **headers}
    )


async def nothing_written(api: Api) -> None:
    assert api.queue.sent == []
    assert (await api.client.get("/v1/jobs")).json()["jobs"] == []


@pytest.fixture
async def limited(tmp_path: Path) -> AsyncIterator[Api]:
    """Limits small enough to pass in a test: 3 documents, 40 characters, 4 KiB."""
    settings = api_settings(tmp_path).model_copy(
        update={
            "ingest": IngestSettings(max_documents_per_request=3, max_document_chars=40),
            "api": ApiSettings(migrate_on_start=True, max_request_bytes=4096),
        }
    )
    async with serve(settings) as served:
        yield served


async def test_an_upload_is_one_job_with_every_field_mapped(api: Api) -> None:
    first = {
        "external_id": "guide/a.md",
        "title": "Volcanoes",
        "text": "Volcanoes erupt where plates meet.",
        "source": "guide",
        "lang": "en",
        "tags": ["geo"],
        "metadata": {"year": 2001},
    }
    second = {"external_id": "guide/b.md", "text": "Rivers carve valleys."}
    # Blank lines, a CRLF line end, a BOM and no final newline are all read as a file is.
    body = b"\xef\xbb\xbf" + ndjson(line(first), "\n", "  \n", json.dumps(second) + "\r\n")
    resp = await upload(api, body)
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    assert (accepted["status"], accepted["total"]) == ("queued", 2)
    job_id = uuid.UUID(accepted["job_id"])
    assert api.queue.sent == [job_id]

    assert api.services.indexing().process_job(job_id) == "succeeded"
    read = (await api.client.get("/v1/documents/guide/a.md")).json()
    fields = {k: v for k, v in first.items() if k != "text"}  # a read returns no text
    assert {k: read[k] for k in fields} == fields
    assert (await api.client.get("/v1/documents/guide/b.md")).json()["status"] == "indexed"
    hits = (await api.client.post("/v1/search", json={"query": "plates meet"})).json()["hits"]
    assert hits[0]["external_id"] == "guide/a.md"


async def test_errors_name_the_line_and_the_field_and_nothing_is_written(api: Api) -> None:
    good = {"external_id": "a", "text": "fine"}
    body = ndjson(
        line(good),
        "\n",  # line 2: blank lines still count, as in an editor
        line({"external_id": "b", "text": "x", "tags": [""], "colour": 1}),
        "not json\n",
        "[1, 2]\n",
        line({"text": "no id"}),
    )
    resp = await upload(api, body)
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"] == "invalid_request"
    errors = [(e["line"], e["field"]) for e in resp.json()["errors"]]
    assert errors == [(3, "tags[0]"), (3, "colour"), (4, ""), (5, ""), (6, "external_id")]
    detail = resp.json()["detail"]
    assert detail.startswith("line 3: tags[0]: ")
    assert "line 4: not valid JSON: " in detail
    assert "line 5: not a JSON object" in detail
    await nothing_written(api)


async def test_the_service_s_checks_name_the_line_too(limited: Api) -> None:
    body = ndjson(
        line({"external_id": "a", "text": "short"}),
        line({"external_id": "b", "text": "x" * 41}),
        line({"external_id": "a", "text": " \t "}),
    )
    resp = await upload(limited, body)
    # Over a size limit the whole is a 413, and every document's problem is listed.
    assert resp.status_code == 413, resp.text
    assert resp.json()["error"] == "payload_too_large"
    assert [(e["line"], e["field"]) for e in resp.json()["errors"]] == [
        (2, "text"),
        (3, "text"),
        (3, "external_id"),
    ]
    assert resp.json()["detail"].startswith(
        "line 2: text: at most 40 characters (ingest.max_document_chars), got 41; "
        "line 3: text: only white space (external_id 'a')"
    )
    assert "line 3: external_id: 'a' repeats line 1 in the same batch" in resp.json()["detail"]
    await nothing_written(limited)


async def test_an_upload_is_bounded_like_a_batch(limited: Api) -> None:
    four = ndjson(*(line({"external_id": str(i), "text": "words"}) for i in range(4)))
    resp = await upload(limited, four)
    assert resp.status_code == 413, resp.text
    assert resp.json()["detail"] == (
        "documents: at most 3 documents per request (ingest.max_documents_per_request), got 4"
    )

    big = ndjson(*(line({"external_id": str(i), "text": "w" * 30}) for i in range(3))) * 40
    resp = await upload(limited, big)
    assert resp.status_code == 413, resp.text
    assert "(api.max_request_bytes)" in resp.json()["detail"]
    await nothing_written(limited)

    three = ndjson(*(line({"external_id": str(i), "text": "words"}) for i in range(3)))
    assert (await upload(limited, three)).status_code == 202


async def test_a_body_of_garbage_gets_a_bounded_answer(api: Api) -> None:
    resp = await upload(api, b"x\n" * (MAX_LINE_ERRORS + 50))
    assert resp.status_code == 422, resp.text
    errors = resp.json()["errors"]
    assert [e["line"] for e in errors[:-1]] == list(range(1, MAX_LINE_ERRORS + 1))
    assert errors[-1] == {
        "field": "body",
        "message": f"more lines are invalid: the first {MAX_LINE_ERRORS} are listed",
    }
    assert resp.json()["detail"].endswith(f"and {MAX_LINE_ERRORS + 1 - 20} more")


@pytest.mark.parametrize(
    ("content_type", "status", "error"),
    [
        ("application/json", 415, "unsupported_media_type"),
        (None, 415, "unsupported_media_type"),
        ("application/jsonl", 202, None),
        ("application/x-ndjson; charset=utf-8", 202, None),
    ],
)
async def test_the_body_must_be_declared_ndjson(
    api: Api, content_type: str | None, status: int, error: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    resp = await api.client.post(
        "/v1/documents:ndjson",
        content=ndjson(line({"external_id": "a", "text": "words"})),
        headers=headers,
    )
    assert resp.status_code == status, resp.text
    if error:
        assert resp.json()["error"] == error
        assert "application/x-ndjson" in resp.json()["detail"]


async def test_an_empty_upload_is_refused(api: Api) -> None:
    resp = await upload(api, b"\n \n")
    assert resp.status_code == 422, resp.text
    assert resp.json()["detail"].startswith("body: no documents")
    await nothing_written(api)


async def test_the_openapi_document_describes_the_upload(api: Api) -> None:
    document = (await api.client.get("/openapi.json")).json()
    body = document["paths"]["/v1/documents:ndjson"]["post"]["requestBody"]
    assert list(body["content"]) == ["application/x-ndjson"]
    assert "ingest.max_documents_per_request" in body["description"]
    assert "api.max_request_bytes" in body["description"]


async def test_a_json_batch_lists_its_documents_problems_by_position(limited: Api) -> None:
    documents = [
        {"external_id": "a", "text": "x" * 41},
        {"external_id": "b", "text": "fine"},
        {"external_id": "b", "text": "\n"},
    ]
    resp = await limited.client.post("/v1/documents", json={"documents": documents})
    assert resp.status_code == 413, resp.text
    assert [e["field"] for e in resp.json()["errors"]] == [
        "documents[0].text",
        "documents[2].text",
        "documents[2].external_id",
    ]
    assert all("line" not in e for e in resp.json()["errors"])
    await nothing_written(limited)


async def test_a_lang_the_analyzer_does_not_read_names_its_line(api: Api) -> None:
    good = {"external_id": "a", "text": "Volcanoes erupt.", "lang": "en"}
    bad = {"external_id": "b", "text": "Volcanoes erupt.", "lang": "eng"}
    resp = await upload(api, ndjson(line(good), "\n", line(bad)))
    assert resp.status_code == 422, resp.text
    [error] = resp.json()["errors"]
    assert (error["line"], error["field"]) == (3, "lang")
    assert "did you mean 'en'" in error["message"]
    await nothing_written(api)
