"""Input files for the client's tests, made by the tests: a PDF is written with pypdf
(one line of text per page in a standard font), no binary fixture."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pypdf import PdfWriter
from pypdf.generic import ContentStream, DictionaryObject, NameObject


def write_pdf(path: Path, pages: list[str], *, title: str | None = None) -> Path:
    """A PDF of ``pages`` (each one line of Helvetica text; no parentheses in them)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in pages:
        page = writer.add_blank_page(width=612, height=792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        content = ContentStream(None, writer)
        content.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
        page.replace_contents(content)
    if title is not None:
        writer.add_metadata({"/Title": title})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        writer.write(out)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_jsonl(path: Path, documents: list[dict[str, Any]]) -> Path:
    return write(path, "".join(json.dumps(d) + "\n" for d in documents))
