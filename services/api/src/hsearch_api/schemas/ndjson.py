"""An NDJSON upload (``POST /v1/documents:ndjson``): one document per line, each read
and validated on its own, so an error names its line and the field within it.

The body arrives whole (the size middleware, ``api.max_request_bytes``, reads it before
any route does), so lines are split from bytes already in memory; what streams is the
client's upload, one bounded request after another (docs/ingestion.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from hsearch.errors import FieldError, InvalidRequestError
from hsearch_api.errors import field_path
from hsearch_api.schemas.documents import DocumentCreate

__all__ = [
    "MAX_LINE_ERRORS",
    "NDJSON_MEDIA_TYPES",
    "NDJSON_OPENAPI",
    "NdjsonUpload",
    "parse_ndjson",
]

NDJSON_MEDIA_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl")
"""The content types an upload may declare: the common name first, then two aliases."""

MAX_LINE_ERRORS = 100
"""Lines with errors reported per request: reading stops after that many, so a body of
garbage costs a bounded answer."""

_BOM = b"\xef\xbb\xbf"
_POSITION = re.compile(r" at line \d+ column (\d+)$")

NDJSON_OPENAPI: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "One `DocumentCreate` JSON object per line (blank lines are ignored); "
        "at most `ingest.max_documents_per_request` documents and `api.max_request_bytes` "
        "bytes (server settings). Errors name the line (1-based) and the field.",
        "content": {
            NDJSON_MEDIA_TYPES[0]: {
                "schema": {"type": "string"},
                "example": '{"external_id": "a", "title": "A", "text": "First document."}\n'
                '{"external_id": "b", "text": "Second document.", "tags": ["x"]}\n',
            }
        },
    }
}


@dataclass(frozen=True, slots=True)
class NdjsonUpload:
    documents: list[DocumentCreate]
    lines: list[int]
    """The line each document is on (1-based), for errors found after parsing."""


def parse_ndjson(body: bytes) -> NdjsonUpload:
    """Every non-blank line of ``body`` as a :class:`DocumentCreate`.

    Raises :class:`InvalidRequestError` (422) listing, per line, each invalid field
    (``line 3: tags[0]: ...``) or a line that is not a JSON object, for the first
    :data:`MAX_LINE_ERRORS` lines with errors; and for a body with no document.
    """
    documents: list[DocumentCreate] = []
    lines: list[int] = []
    errors: list[FieldError] = []
    bad_lines = 0
    for number, raw in enumerate(body.split(b"\n"), start=1):
        line = raw.removeprefix(_BOM) if number == 1 else raw
        if not line.strip():
            continue
        try:
            documents.append(DocumentCreate.model_validate_json(line))
            lines.append(number)
        except ValidationError as exc:
            bad_lines += 1
            if bad_lines > MAX_LINE_ERRORS:
                more = f"more lines are invalid: the first {MAX_LINE_ERRORS} are listed"
                errors.append(FieldError(field="body", message=more))
                break
            errors += [_line_error(number, e) for e in exc.errors(include_url=False)]
    if errors:
        raise InvalidRequestError.of(errors)
    if not documents:
        raise InvalidRequestError("body: no documents: send one JSON document per line")
    return NdjsonUpload(documents=documents, lines=lines)


def _line_error(line: int, error: Any) -> FieldError:
    kind = error.get("type", "")
    if kind == "json_invalid":
        # pydantic counts lines and columns in the one line it was given: keep the column.
        reason = _POSITION.sub(r" at column \1", str(error.get("ctx", {}).get("error", "")))
        return FieldError(field="", message=f"not valid JSON: {reason}", line=line)
    location = tuple(error.get("loc", ()))
    if kind == "model_type" and not location:
        return FieldError(field="", message="not a JSON object (one document per line)", line=line)
    # A line is a body of its own: said so, a field named like a source ("query") stays.
    return FieldError(
        field=field_path(("body", *location)), message=error.get("msg", ""), line=line
    )
