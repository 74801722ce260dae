"""Jobs, documents, search hits and answers as terminal lines: aligned rows for lists,
``key: value`` lines for one, hits with their snippets; ``--json`` prints what the API
sent instead."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence

from hsearch_client import Answer, Document, Job, SearchResponse

__all__ = [
    "answer_footer",
    "document_lines",
    "document_rows",
    "job_lines",
    "job_rows",
    "marked",
    "search_lines",
]

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
            j.kind,
            str(j.status),
            f"{j.processed}/{'?' if j.total is None else j.total}",
            str(j.failed),
            _time(j),
        )
        for j in jobs
    ]
    return _table(header, rows)


def job_lines(job: Job) -> list[str]:
    raw = job.to_json()
    lines = [f"id: {job.id}"] + [f"{k}: {_value(raw.get(k))}" for k in JOB_FIELDS]
    webhook = raw.get("webhook")
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


def document_rows(documents: Iterable[Document]) -> list[str]:
    header = ("EXTERNAL_ID", "STATUS", "CHUNKS", "SOURCE", "TITLE")
    rows = [(d.external_id, d.status, str(d.chunk_count), d.source, d.title) for d in documents]
    return _table(header, rows)


def document_lines(document: Document) -> list[str]:
    raw = document.to_json()
    lines = [f"external_id: {document.external_id}"]
    return lines + [f"{k}: {_value(raw.get(k))}" for k in DOCUMENT_FIELDS]


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    if not rows:
        return []
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]


def _time(job: Job) -> str:
    return str(job.to_json().get("created_at") or "-")


def _value(value: object) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, list):
        return ", ".join(map(str, value)) or "-"
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False) if value else "-"
    return str(value)


def answer_footer(answer: Answer) -> list[str]:
    """What follows a streamed answer in a terminal: its citations, or why there is no
    answer, and which sentences no passage supports."""
    lines = [""]
    if answer.answer is None:
        lines.append(f"No answer: {'; '.join(answer.degraded or ['unknown'])}")
        lines.append("Passages found:")
        for passage in answer.passages:
            lines.append(f"  [{passage.number}] {passage.title or passage.external_id}")
        return lines
    for citation in answer.citations:
        quote = " ".join(citation.quote.split())
        if len(quote) > 160:
            quote = quote[:157] + "..."
        name = citation.title or citation.external_id
        lines.append(f'[{citation.number}] {name} ({citation.external_id}): "{quote}"')
    unsupported = [s for s in answer.sentences if not s.supported]
    if unsupported:
        lines.append(f"Not supported by the passages ({len(unsupported)}):")
        lines += [f"  - {s.text}" for s in unsupported]
    if answer.lazy is not None:
        spent = answer.lazy.budget
        used = ", ".join(
            f"{name.replace('_', ' ')} {line.used:g}/{line.allowed:g}"
            for name, line in spent.items()
            if name != "elapsed_ms"
        )
        lines.append(
            f"Lazy search: {answer.lazy.stopped}; {answer.lazy.relevant} of "
            f"{answer.lazy.tested} tested relevant; {used}"
        )
    return lines


MARK_TTY = ("\x1b[1m", "\x1b[22m")
"""A match in a terminal: bold on, bold off (SGR 1 and 22)."""
MARK_PLAIN = ("[", "]")
"""A match where there is no terminal (a pipe, a file): brackets around it."""
_EM = re.compile(r"<em>(.*?)</em>", re.DOTALL)


def marked(snippet: str, *, tty: bool) -> str:
    """A snippet of the API (HTML-escaped text, each match in ``<em>``) as terminal
    text: the matches bold on a terminal, in brackets elsewhere."""
    pre, post = MARK_TTY if tty else MARK_PLAIN
    pieces: list[str] = []
    cursor = 0
    for found in _EM.finditer(snippet):
        pieces.append(html.unescape(snippet[cursor : found.start()]))
        pieces.append(f"{pre}{html.unescape(found.group(1))}{post}")
        cursor = found.end()
    pieces.append(html.unescape(snippet[cursor:]))
    return "".join(pieces)


def search_lines(response: SearchResponse, *, tty: bool) -> list[str]:
    """A page of hits as a terminal shows it: how many and how fast, then per hit its
    rank, title (bold on a terminal), external id and score, and its snippet with the
    matches marked; the cursor of the next page last."""
    bold, normal = MARK_TTY if tty else ("", "")
    about = "" if response.total_relation == "eq" else "at least "
    head = (
        f"{about}{response.total} results for {response.query!r} "
        f"({response.mode}, {response.took_ms:.0f} ms)"
    )
    if response.degraded:
        head += f"; degraded: {', '.join(response.degraded)}"
    lines = [head]
    if not response.hits:
        return [*lines, "no hits on this page"]
    for rank, hit in enumerate(response.hits, start=response.offset + 1):
        title = hit.title or hit.external_id
        chunks = f", {hit.matching_chunks} passages" if hit.matching_chunks > 1 else ""
        lines.append("")
        lines.append(
            f"{rank}. {bold}{title}{normal}  ({hit.external_id}, score {hit.score:.4g}{chunks})"
        )
        text = marked(hit.snippet, tty=tty) if hit.snippet else " ".join(hit.text.split())
        lines.append(f"   {_clip(text)}")
    if response.next_cursor:
        lines += ["", f"next page: --cursor {response.next_cursor}"]
    return lines


def _clip(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
