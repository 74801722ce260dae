"""The one error body every 4xx and 5xx answer has, and how routes list them in the
OpenAPI document (docs/api.md, Errors)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class FieldErrorRead(BaseModel):
    field: str = Field(
        description="The field's path in the request (`documents[0].tags[1]`, `filter.and[2]`, "
        "`top_k`); `request` for the request as a whole."
    )
    message: str
    line: int | None = Field(
        default=None, description="The line of an NDJSON upload (1-based), when there is one."
    )


class ErrorBody(BaseModel):
    """Every error: a stable machine-readable code and a message for people."""

    error: str = Field(
        description="Stable code (docs/api.md, Errors), e.g. `invalid_request`, `rate_limited`.",
        examples=["invalid_request"],
    )
    detail: str = Field(
        description="What went wrong, naming the field, limit or setting involved.",
        examples=["top_k: Input should be less than or equal to 100"],
    )
    errors: list[FieldErrorRead] | None = Field(
        default=None,
        description="For a request with invalid fields (422, and 413 for a batch): each "
        "field on its own.",
    )


_WHEN: dict[int, str] = {
    401: "No credential, or one that is malformed, unknown, expired or revoked "
    "(`WWW-Authenticate: Bearer`).",
    403: "The credential may not do this: a scope it lacks, a suspended tenant, another "
    "tenant named.",
    404: "No such resource for this tenant.",
    405: "The path exists but not with this method (`Allow` lists the methods).",
    409: "The resource's state forbids it.",
    413: "The body, the batch or a document is over a size limit (named in `detail`).",
    415: "The body is not in the media type the route reads.",
    422: "A field is invalid or out of bounds (named in `detail` and `errors`).",
    429: "The key's rate limit is reached (`Retry-After`).",
    500: "An unexpected error; the message says nothing of the cause.",
    503: "A backing service is unavailable (the metadata database: `metadata_unavailable`, "
    "with `Retry-After`), or the process is at its search capacity (`overloaded`, with "
    "`Retry-After`).",
}

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "schema": {"type": "integer", "minimum": 1},
    }
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route or router: each status with :class:`ErrorBody`."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        response: dict[str, Any] = {"model": ErrorBody, "description": _WHEN[status]}
        if status in (429, 503):
            response["headers"] = _RETRY_AFTER
        out[status] = response
    return out


COMMON_ERRORS = error_responses(401, 403, 422, 429, 500, 503)
"""What any authenticated route may answer, whatever it does."""
