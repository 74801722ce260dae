"""Documents read from what ``hsearch ingest`` is given.

* ``.jsonl`` / ``.ndjson``: one document object per line; ``.json``: a list of them, or
  ``{"documents": [...]}``. Each is sent as it is (the API validates it and names the
  field); one without a string ``external_id`` cannot be tracked and is reported here.
* ``.txt``, ``.md`` / ``.markdown``, ``.html`` / ``.htm``, ``.pdf``, given one by one
  or found in folders (recursively, in name order, hidden files and folders left out):
  one document per file, ``external_id`` its path relative to the folder given (its
  name, for a file given by itself), the title from the file (Markdown: front matter
  ``title`` or first heading; HTML: ``<title>`` or first ``<h1>``; PDF: its metadata),
  else its name without extension, ``source`` the folder's name unless ``--source``
  names one, ``lang`` the text's language as detected (``und`` when it cannot be told:
  :mod:`hsearch.client.language`), ``metadata.format`` the format.

Libraries (docs/ingestion.md): markdown-it-py finds a Markdown file's first heading
(not a ``#`` inside a code block), Beautiful Soup reads HTML (with Python's own parser:
no compiled dependency), pypdf reads PDF text and metadata. Any error reading one file
fails that file only. What a library warns of while reading a file (pypdf's "EOF marker
not found", on its logger or as a Python warning) is kept with that file's document,
never printed by the library itself: the command reports the file as read with a warning.

A JSON document is sent as it is: its fields are the API's to judge (a missing or blank
``text`` is refused by the API, with the same word as any other refused field).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hsearch.client.language import detect_language

__all__ = [
    "FILE_FORMATS",
    "JSON_SUFFIXES",
    "ReadFailure",
    "SourceDocument",
    "read_documents",
]

FILE_FORMATS = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
}
"""Suffixes read as one document per file, and the format each is recorded as."""

JSON_SUFFIXES = frozenset({".jsonl", ".ndjson", ".json"})

TITLE_CHARS = 200
"""A title taken from a file is cut to this many characters (at a word boundary): a
title, not a paragraph that happened to be the first heading."""

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)

# Elements whose text stands apart: a blank line around each, which the chunker takes as
# a sentence boundary (a heading does not run into the paragraph after it). Inline
# elements run on; <br> is a line break.
_BLOCKS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "dd", "details", "div", "dl"),
        *("dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4"),
        *("h5", "h6", "header", "hr", "li", "main", "nav", "ol", "p", "pre", "section"),
        *("summary", "table", "tr", "ul"),
    }
)
_CELLS = frozenset({"td", "th"})
_UNSEEN = ("script", "style", "noscript", "template", "head")


@dataclass(frozen=True, slots=True)
class SourceDocument:
    origin: str
    """Where it was read, for messages: a path, or ``file.jsonl:7``."""
    document: dict[str, Any]
    """The document as it is sent (the API's ``DocumentCreate`` fields)."""
    warnings: tuple[str, ...] = ()
    """What the reading library warned of (a damaged but readable PDF)."""

    @property
    def external_id(self) -> str:
        return str(self.document["external_id"])


@dataclass(frozen=True, slots=True)
class ReadFailure:
    origin: str
    error: str
    external_id: str | None = None


def read_documents(
    path: Path, *, source: str | None = None, passed_over: list[Path] | None = None
) -> Iterator[SourceDocument | ReadFailure]:
    """Every document of ``path`` (a file or a folder), in a stable order; what cannot
    be read as a :class:`ReadFailure`. Files of other types in a folder (JSON files
    among them: a folder's ``package.json`` holds no documents) are passed over, and
    appended to ``passed_over``; one given by itself is a failure."""
    if path.is_dir():
        name = source or path.resolve().name
        for file in _walk(path, passed_over):
            yield read_file(file, root=path, source=name)
        return
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        yield from _json_lines(path, source=source)
    elif suffix == ".json":
        yield from _json_file(path, source=source)
    elif suffix in FILE_FORMATS:
        yield read_file(path, root=path.parent, source=source or path.resolve().parent.name)
    else:
        known = ", ".join(sorted({*JSON_SUFFIXES, *FILE_FORMATS}))
        yield ReadFailure(origin=str(path), error=f"not a file type read here ({known})")


def read_file(path: Path, *, root: Path, source: str) -> SourceDocument | ReadFailure:
    """One text, Markdown, HTML or PDF file as a document (``external_id``: the path
    relative to ``root``)."""
    external_id = path.relative_to(root).as_posix()
    kind = FILE_FORMATS[path.suffix.lower()]
    try:
        with _library_warnings() as warned:
            title, text = _READERS[kind](path)
    except Exception as exc:  # a file we cannot read fails alone, saying why
        return ReadFailure(origin=external_id, external_id=external_id, error=_describe(exc))
    if not text.strip():
        why = "no text in it (a scanned PDF needs OCR first)" if kind == "pdf" else "no text in it"
        return ReadFailure(origin=external_id, external_id=external_id, error=why)
    document = {
        "external_id": external_id,
        "title": _title(title) or path.stem,
        "text": text,
        "source": source,
        "lang": detect_language(text),
        "metadata": {"format": kind},
    }
    return SourceDocument(origin=external_id, document=document, warnings=tuple(warned))


LIBRARY_LOGGERS = ("pypdf",)
"""Loggers of the reading libraries, whose warnings are kept with the file read."""


class _Collect(logging.Handler):
    def __init__(self, into: list[str]) -> None:
        super().__init__(logging.WARNING)
        self._into = into

    def emit(self, record: logging.LogRecord) -> None:
        self._into.append(record.getMessage())


@contextlib.contextmanager
def _library_warnings() -> Iterator[list[str]]:
    """The warnings the reading libraries give while the block runs, each once, in
    order; none reaches the terminal (logging's last resort handler, or Python's
    warnings printed to stderr after the summary)."""
    said: list[str] = []
    handler = _Collect(said)
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    kept = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    try:
        with warnings.catch_warnings(record=True) as recorded:
            warnings.simplefilter("always")
            try:
                yield said
            finally:
                said.extend(str(w.message) for w in recorded)
                unique = list(dict.fromkeys(said))
                said[:] = unique
    finally:
        for logger, propagate in zip(loggers, kept, strict=True):
            logger.removeHandler(handler)
            logger.propagate = propagate


def _walk(root: Path, passed_over: list[Path] | None) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):  # symbolic links to folders are not followed
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            if Path(name).suffix.lower() in FILE_FORMATS:
                yield Path(folder) / name
            elif passed_over is not None:
                passed_over.append(Path(folder) / name)


def _json_lines(path: Path, *, source: str | None) -> Iterator[SourceDocument | ReadFailure]:
    try:
        with path.open("rb") as lines:
            for number, raw in enumerate(lines, start=1):
                line = raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw
                if not line.strip():
                    continue
                origin = f"{path}:{number}"
                try:
                    value = json.loads(line)
                except ValueError as exc:
                    yield ReadFailure(origin=origin, error=f"not valid JSON: {exc}")
                    continue
                yield _json_document(value, origin=origin, source=source)
    except OSError as exc:
        yield ReadFailure(origin=str(path), error=_describe(exc))


def _json_file(path: Path, *, source: str | None) -> Iterator[SourceDocument | ReadFailure]:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        yield ReadFailure(origin=str(path), error=_describe(exc))
        return
    if isinstance(value, dict) and isinstance(value.get("documents"), list):
        value = value["documents"]
    if not isinstance(value, list):
        yield ReadFailure(
            origin=str(path), error='not a list of documents nor {"documents": [...]}'
        )
        return
    for i, item in enumerate(value):
        yield _json_document(item, origin=f"{path}[{i}]", source=source)


def _json_document(
    value: object, *, origin: str, source: str | None
) -> SourceDocument | ReadFailure:
    if not isinstance(value, dict):
        return ReadFailure(origin=origin, error="not a JSON object")
    external_id = value.get("external_id")
    if not isinstance(external_id, str) or not external_id:
        return ReadFailure(origin=origin, error="external_id: a non-empty string is required")
    if source and "source" not in value:
        value = {**value, "source": source}
    return SourceDocument(origin=origin, document=value)


def _read_text(path: Path) -> tuple[str, str]:
    return "", path.read_text(encoding="utf-8-sig")


def _read_markdown(path: Path) -> tuple[str, str]:
    from markdown_it import MarkdownIt  # noqa: PLC0415 - only when Markdown is read

    text = path.read_text(encoding="utf-8-sig")
    front = _FRONT_MATTER.match(text)
    if front:
        text = text[front.end() :]
        title = _FRONT_TITLE.search(front.group(1))
        if title and title.group(1).strip("\"' "):
            return title.group(1).strip("\"' "), text
    tokens = MarkdownIt("commonmark").parse(text)
    for opening, inline in itertools.pairwise(tokens):
        if opening.type == "heading_open" and inline.type == "inline":
            return _plain_inline(inline.children or []), text
    return "", text


def _plain_inline(children: list[Any]) -> str:
    """The text of a heading without its Markdown: ``# The *fox*`` is ``The fox``."""
    return "".join(c.content for c in children if c.type in ("text", "code_inline"))


def _read_html(path: Path) -> tuple[str, str]:
    from bs4 import BeautifulSoup  # noqa: PLC0415 - only when HTML is read

    # Bytes, so the parser finds the encoding (BOM, <meta charset>, then a guess).
    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    if not title and (h1 := soup.find("h1")):
        title = h1.get_text(" ", strip=True)
    for unseen in soup(_UNSEEN):
        unseen.decompose()
    for tag in soup.find_all(True):
        if tag.name == "br":
            tag.replace_with("\n")
        elif tag.name in _BLOCKS:
            tag.insert_before("\n\n")
            tag.append("\n\n")
        elif tag.name in _CELLS:
            tag.append("\t")
    return title, _tidy(soup.get_text())


def _read_pdf(path: Path) -> tuple[str, str]:
    from pypdf import PdfReader  # noqa: PLC0415 - only when a PDF is read

    reader = PdfReader(path)
    if reader.is_encrypted:
        reader.decrypt("")  # many "encrypted" PDFs have an empty user password
    title = reader.metadata.title if reader.metadata and reader.metadata.title else ""
    pages = [page.extract_text() for page in reader.pages]
    return str(title), _tidy("\n\n".join(pages))


_READERS = {
    "text": _read_text,
    "markdown": _read_markdown,
    "html": _read_html,
    "pdf": _read_pdf,
}


def _tidy(text: str) -> str:
    """Runs of spaces as one, lines trimmed, at most one blank line between paragraphs."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    out: list[str] = []
    for line in lines:
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip()


def _title(raw: str) -> str:
    title = " ".join(raw.split())
    if len(title) <= TITLE_CHARS:
        return title
    cut = title[: TITLE_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    return f"{type(exc).__name__}: {exc}"
