"""The API's routes as requests, built the same way for both clients."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from hsearch_client._core import (
    JSON,
    NDJSON,
    SSE,
    Request,
    given,
    json_request,
    path_segment,
)
from hsearch_client.models import DocumentInput

PAGE_SIZE = 500
"""Rows per page when listing (the API's most)."""


def search(query: str, fields: Mapping[str, Any]) -> Request:
    return json_request("POST", "/v1/search", {"query": query, **given(**fields)})


def answer(query: str, fields: Mapping[str, Any], *, stream: bool) -> Request:
    body = {"query": query, **given(**fields)}
    if stream:
        body["stream"] = True
        request = json_request("POST", "/v1/answer", body)
        return Request(
            request.method, request.path, body=request.body, content_type=JSON, accept=SSE
        )
    return json_request("POST", "/v1/answer", body)


def submit_documents(
    documents: Sequence[DocumentInput | Mapping[str, Any]], *, webhook_url: str | None
) -> Request:
    return json_request(
        "POST", "/v1/documents", {"documents": list(documents), **given(webhook_url=webhook_url)}
    )


def upload_ndjson(body: bytes, *, webhook_url: str | None) -> Request:
    params = given(webhook_url=webhook_url)
    return Request(
        "POST", "/v1/documents:ndjson", params=params or None, body=body, content_type=NDJSON
    )


def delete_documents(
    *, filter: Mapping[str, Any] | None, everything: bool, webhook_url: str | None
) -> Request:
    body: dict[str, Any] = given(filter=filter, webhook_url=webhook_url)
    if everything:
        body["all"] = True
    return json_request("POST", "/v1/documents:delete", body)


def get_document(external_id: str, *, include_text: bool) -> Request:
    params = {"include": "text"} if include_text else None
    return Request("GET", f"/v1/documents/{path_segment(external_id)}", params=params)


def get_document_links(external_id: str, *, types: str | Sequence[str] | None) -> Request:
    # No ``type`` parameter is every type: so is an empty list.
    params = {"type": [types] if isinstance(types, str) else list(types)} if types else None
    return Request("GET", f"/v1/documents/{path_segment(external_id)}/links", params=params)


def list_communities(
    *,
    level: int | None,
    parent: str | None,
    concepts: str | Sequence[str] | None,
    limit: int | None,
) -> Request:
    params: dict[str, Any] = given(level=level, parent=parent, limit=limit)
    if concepts:
        params["concept"] = [concepts] if isinstance(concepts, str) else list(concepts)
    return Request("GET", "/v1/communities", params=params or None)


def get_community(community_id: str) -> Request:
    return Request("GET", f"/v1/communities/{path_segment(community_id)}")


def get_settings() -> Request:
    return Request("GET", "/v1/settings")


def update_settings(fields: Mapping[str, Any]) -> Request:
    return json_request("PATCH", "/v1/settings", given(**fields))


def update_document(external_id: str, fields: Mapping[str, Any]) -> Request:
    return json_request("PATCH", f"/v1/documents/{path_segment(external_id)}", given(**fields))


def delete_document(external_id: str) -> Request:
    return Request("DELETE", f"/v1/documents/{path_segment(external_id)}")


def documents_page(*, source: str | None, limit: int | None, cursor: str | None) -> Request:
    return Request("GET", "/v1/documents", params=given(source=source, limit=limit, cursor=cursor))


def get_job(job_id: uuid.UUID | str) -> Request:
    return Request("GET", f"/v1/jobs/{path_segment(str(job_id))}")


def cancel_job(job_id: uuid.UUID | str) -> Request:
    return Request("POST", f"/v1/jobs/{path_segment(str(job_id))}/cancel")


def jobs_page(*, status: str | None, limit: int | None, cursor: str | None) -> Request:
    return Request("GET", "/v1/jobs", params=given(status=status, limit=limit, cursor=cursor))


def page_size(left: int | None) -> int:
    return PAGE_SIZE if left is None else min(left, PAGE_SIZE)
