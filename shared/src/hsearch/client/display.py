"""Jobs and documents as terminal lines: aligned rows for lists, ``key: value`` lines
for one; ``--json`` prints what the API sent instead."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from hsearch.client.http import Job

__all__ = ["document_lines", "document_rows", "job_lines", "job_rows"]

JOB_FIELDS = (
    "kind",
    "status",
    "total",
    "indexed",
    "deleted",
    "skipped",
    "failed",
    "attempts",
    "created_at",
    "started_at",
    "finished_at",
    "searchable_at",
    "error",
)
DOCUMENT_FIELDS = (
    "status",
    "title",
    "source",
    "lang",
    "tags",
    "metadata",
    "chunk_count",
    "pending_jobs",
    "created_at",
    "updated_at",
)


def job_rows(jobs: Iterable[Job]) -> list[str]:
    header = ("ID", "KIND", "STATUS", "DONE", "FAILED", "CREATED")
    rows = [
        (
            str(j.id),
            str(j.raw.get("kind", "ingest")),
            str(j.status),
            f"{j.processed}/{'?' if j.total is None else j.total}",
            str(j.failed),
            _time(j.raw),
        )
        for j in jobs
    ]
    return _table(header, rows)


def job_lines(job: Job) -> list[str]:
    lines = [f"id: {job.id}"] + [f"{k}: {_value(job.raw.get(k))}" for k in JOB_FIELDS]
    webhook = job.raw.get("webhook")
    if webhook:
        state = (
            f"delivered at {webhook['delivered_at']}"
            if webhook.get("delivered_at")
            else f"{webhook.get('attempts', 0)} attempts, last error: {webhook.get('error')}"
        )
        lines.append(f"webhook: {webhook.get('url')} ({state})")
    if job.errors:
        lines.append(f"errors (first {len(job.errors)} of {job.failed}):")
        lines += [f"  {e.external_id}: {e.error}" for e in job.errors]
    return lines


def document_rows(documents: Iterable[dict[str, Any]]) -> list[str]:
    header = ("EXTERNAL_ID", "STATUS", "CHUNKS", "SOURCE", "TITLE")
    rows = [
        (
            str(d["external_id"]),
            str(d["status"]),
            str(d["chunk_count"]),
            str(d["source"]),
            str(d["title"]),
        )
        for d in documents
    ]
    return _table(header, rows)


def document_lines(document: dict[str, Any]) -> list[str]:
    lines = [f"external_id: {document['external_id']}"]
    return lines + [f"{k}: {_value(document.get(k))}" for k in DOCUMENT_FIELDS]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _time(raw: dict[str, Any]) -> str:
    return str(raw.get("created_at") or "-")


def _value(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False) if value else "-"
    return str(value)


def answer_footer(answer: dict[str, Any]) -> list[str]:
    """What follows a streamed answer in a terminal: its citations, or why there is no
    answer, and which sentences no passage supports."""
    lines = [""]
    if answer.get("answer") is None:
        lines.append(f"No answer: {'; '.join(answer.get('degraded') or ['unknown'])}")
        lines.append("Passages found:")
        for passage in answer.get("passages", []):
            lines.append(f"  [{passage['number']}] {passage['title'] or passage['external_id']}")
        return lines
    for citation in answer.get("citations", []):
        quote = " ".join(str(citation["quote"]).split())
        if len(quote) > 160:
            quote = quote[:157] + "..."
        name = citation["title"] or citation["external_id"]
        lines.append(f'[{citation["number"]}] {name} ({citation["external_id"]}): "{quote}"')
    unsupported = [s for s in answer.get("sentences", []) if not s["supported"]]
    if unsupported:
        lines.append(f"Not supported by the passages ({len(unsupported)}):")
        lines += [f"  - {s['text']}" for s in unsupported]
    return lines
