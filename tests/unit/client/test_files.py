"""Reading what ``hsearch ingest`` is given: text, Markdown, HTML and PDF files (one
document each, titled from the file), folders of them, JSON and JSON lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from hsearch.client.files import TITLE_CHARS, ReadFailure, SourceDocument, read_documents
from hsearch.lexical.languages import lang_problem
from tests.unit.client.documents import write, write_jsonl, write_pdf


def read(
    path: Path, *, source: str | None = None, passed_over: list[Path] | None = None
) -> list[SourceDocument | ReadFailure]:
    return list(read_documents(path, source=source, passed_over=passed_over))


def one(path: Path) -> dict[str, object]:
    (item,) = read(path)
    assert isinstance(item, SourceDocument), item
    return item.document


def test_a_text_file_is_titled_by_its_name(tmp_path: Path) -> None:
    path = write(tmp_path / "notes" / "field-trip.txt", "Day one.\nWe saw a volcano.\n")
    assert one(path) == {
        "external_id": "field-trip.txt",
        "title": "field-trip",
        "text": "Day one.\nWe saw a volcano.\n",
        "source": "notes",
        "lang": "und",  # too short to tell: undetermined, never ""
        "metadata": {"format": "text"},
    }


def test_each_file_gets_its_detected_language(tmp_path: Path) -> None:
    folder = tmp_path / "atlas"
    write(folder / "en.txt", "Volcanoes erupt where tectonic plates meet and magma rises.")
    write(
        folder / "fr.md",
        "# Volcans\n\nLes volcans entrent en éruption là où les plaques se rencontrent.",
    )
    write(folder / "de.html", "<p>Der Vulkan bricht aus, wenn die Platten aufeinandertreffen.</p>")
    write(folder / "ja.txt", "火山はプレートの境界で噴火する。マグマが地表に上がる。")
    write_pdf(folder / "es.pdf", ["Los volcanes entran en erupción donde se juntan las placas."])
    write(folder / "numbers.txt", "12 345 6789")
    items = read(folder)
    langs = {i.external_id: i.document["lang"] for i in items if isinstance(i, SourceDocument)}
    assert langs == {
        "de.html": "de",
        "en.txt": "en",
        "es.pdf": "es",
        "fr.md": "fr",
        "ja.txt": "ja",
        "numbers.txt": "und",
    }
    assert all(lang_problem(lang) is None for lang in langs.values())
    # A JSON document keeps the language it was sent with, or none.
    jsonl = write_jsonl(tmp_path / "docs.jsonl", [{"external_id": "a", "text": "Texte."}])
    (item,) = read(jsonl)
    assert isinstance(item, SourceDocument)
    assert "lang" not in item.document


def test_markdown_is_titled_by_its_first_heading_not_a_comment_in_code(tmp_path: Path) -> None:
    text = "```sh\n# not a heading\n```\n\nIntro.\n\nThe *plate* `model`\n===\n\n## Later\n"
    document = one(write(tmp_path / "a.md", text))
    assert document["title"] == "The plate model"
    assert document["text"] == text  # Markdown is indexed as it is written
    assert document["metadata"] == {"format": "markdown"}


def test_markdown_front_matter_gives_the_title_and_is_not_indexed(tmp_path: Path) -> None:
    text = '---\ntitle: "Rivers"\ndate: 2024-01-01\n---\n# Heading\nBody.\n'
    document = one(write(tmp_path / "rivers.markdown", text))
    assert (document["title"], document["text"]) == ("Rivers", "# Heading\nBody.\n")
    untitled = one(write(tmp_path / "plain.md", "Just text, no heading.\n"))
    assert untitled["title"] == "plain"


def test_html_becomes_lines_of_text_without_scripts(tmp_path: Path) -> None:
    html = """<!doctype html><html><head><title>  Plate
      tectonics </title><style>p { color: red }</style>
      <script>var hidden = 1;</script></head>
      <body><nav>Home</nav><h1>Plates</h1>
      <p>Plates <b>move</b> slowly.<br>About 5&nbsp;cm a year.</p>
      <ul><li>Pacific</li><li>Nazca</li></ul>
      <table><tr><td>ridge</td><td>spreads</td></tr></table></body></html>"""
    document = one(write(tmp_path / "site" / "plates.html", html))
    assert document["title"] == "Plate tectonics"
    # Blocks stand apart (a blank line: a sentence boundary for the chunker), <br> breaks
    # a line, inline elements run on, table cells are spaced.
    assert document["text"] == (
        "Home\n\nPlates\n\nPlates move slowly.\nAbout 5 cm a year.\n\nPacific\n\nNazca\n\n"
        "ridge spreads"
    )
    assert document["metadata"] == {"format": "html"}


def test_html_without_a_title_takes_its_first_h1_and_reads_its_charset(tmp_path: Path) -> None:
    html = '<html><head><meta charset="iso-8859-1"></head><body><h1>Café</h1>Crème</body></html>'
    path = tmp_path / "cafe.htm"
    path.write_bytes(html.encode("iso-8859-1"))
    document = one(path)
    assert (document["title"], document["text"]) == ("Café", "Café\n\nCrème")


def test_a_pdf_gives_its_pages_text_and_its_metadata_title(tmp_path: Path) -> None:
    path = write_pdf(
        tmp_path / "papers" / "plates.pdf",
        ["Volcanoes erupt where plates meet.", "Ridges spread apart."],
        title="Plate tectonics",
    )
    document = one(path)
    assert document["title"] == "Plate tectonics"
    assert document["text"] == "Volcanoes erupt where plates meet.\n\nRidges spread apart."
    assert document["metadata"] == {"format": "pdf"}
    untitled = one(write_pdf(tmp_path / "scan-2.pdf", ["Some text."]))
    assert untitled["title"] == "scan-2"


def test_a_damaged_pdf_is_read_with_its_warning_kept_off_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    whole = write_pdf(tmp_path / "whole.pdf", ["Volcanoes erupt where plates meet."])
    data = whole.read_bytes()
    damaged = tmp_path / "damaged.pdf"
    damaged.write_bytes(data[: data.rindex(b"%%EOF")] + b"%%EO")  # cut short at the end
    item = one_item(damaged)
    assert item.document["text"] == "Volcanoes erupt where plates meet."
    assert item.warnings == ("EOF marker seems truncated",)
    assert one_item(whole).warnings == ()
    assert capsys.readouterr() == ("", "")
    assert [r.name for r in caplog.records if r.name.startswith("pypdf")] == []


def one_item(path: Path) -> SourceDocument:
    (item,) = read(path)
    assert isinstance(item, SourceDocument), item
    return item


def test_a_pdf_without_text_or_not_a_pdf_fails_alone(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    write_pdf(folder / "blank.pdf", [""])
    write(folder / "broken.pdf", "this is no PDF")
    write(folder / "good.txt", "Good text.")
    items = read(folder)
    failures = {i.external_id: i.error for i in items if isinstance(i, ReadFailure)}
    assert failures.keys() == {"blank.pdf", "broken.pdf"}
    assert failures["blank.pdf"] == "no text in it (a scanned PDF needs OCR first)"
    assert failures["broken.pdf"].startswith("Pdf")  # pypdf's error, named
    assert [i.external_id for i in items if isinstance(i, SourceDocument)] == ["good.txt"]


def test_a_folder_is_read_recursively_in_name_order(tmp_path: Path) -> None:
    root = tmp_path / "handbook"
    for name in ["b.md", "a.txt", "sub/deeper/c.html", "sub/d.pdf", "skip.csv", ".hidden.txt"]:
        if name.endswith(".pdf"):
            write_pdf(root / name, ["PDF text."])
        else:
            write(root / name, "<p>Text.</p>" if name.endswith(".html") else "Text.")
    write(root / ".git" / "notes.txt", "Not mine.")
    write(root / "sub" / "bulk.jsonl", '{"external_id": "x", "text": "X."}')
    passed_over: list[Path] = []
    items = read(root, passed_over=passed_over)
    assert passed_over == [root / "skip.csv", root / "sub" / "bulk.jsonl"]
    assert all(isinstance(i, SourceDocument) for i in items)
    ids = [i.document["external_id"] for i in items if isinstance(i, SourceDocument)]
    assert ids == ["a.txt", "b.md", "sub/d.pdf", "sub/deeper/c.html"]
    assert {i.document["source"] for i in items if isinstance(i, SourceDocument)} == {"handbook"}
    named = read(root, source="manual")
    assert {i.document["source"] for i in named if isinstance(i, SourceDocument)} == {"manual"}


def test_text_that_is_not_utf8_fails_with_where(tmp_path: Path) -> None:
    path = tmp_path / "latin.txt"
    path.write_bytes("Crème brûlée".encode("latin-1"))
    (failure,) = read(path)
    assert isinstance(failure, ReadFailure)
    assert failure.error.startswith("not UTF-8 text (invalid continuation byte at byte 2)")


def test_a_long_title_is_cut_at_a_word(tmp_path: Path) -> None:
    heading = "word " * 100
    title = one(write(tmp_path / "long.md", f"# {heading}\n\nBody.\n"))["title"]
    assert isinstance(title, str)
    assert len(title) <= TITLE_CHARS
    assert title.endswith("word…")


def test_json_lines_are_sent_as_they_are_and_bad_lines_say_where(tmp_path: Path) -> None:
    good = {"external_id": "a", "text": "Alpha.", "tags": ["x"]}
    path = write(
        tmp_path / "docs.jsonl",
        "\n".join(
            [
                json.dumps(good),
                "",
                "{not json",
                json.dumps([1]),
                json.dumps({"text": "no id"}),
                json.dumps({"external_id": "blank", "text": "  "}),
                json.dumps({"external_id": "c", "text": "Gamma.", "colour": "red"}),
            ]
        ),
    )
    items = read(path, source="feed")
    assert [(type(i).__name__, i.origin) for i in items] == [
        ("SourceDocument", f"{path}:1"),
        ("ReadFailure", f"{path}:3"),
        ("ReadFailure", f"{path}:4"),
        ("ReadFailure", f"{path}:5"),
        ("SourceDocument", f"{path}:6"),  # a blank text: the API refuses it, as a missing one
        ("SourceDocument", f"{path}:7"),  # the API names the unknown field
    ]
    first, *_, last = items
    assert isinstance(first, SourceDocument)
    assert isinstance(last, SourceDocument)
    assert first.document == {**good, "source": "feed"}  # --source fills a missing source
    assert last.document["colour"] == "red"
    assert [i.error for i in items if isinstance(i, ReadFailure)] == [
        "not valid JSON: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
        "not a JSON object",
        "external_id: a non-empty string is required",
    ]


@pytest.mark.parametrize("wrapped", [False, True])
def test_a_json_file_holds_a_list_of_documents(tmp_path: Path, wrapped: bool) -> None:
    documents = [{"external_id": "a", "text": "A.", "source": "own"}, {"external_id": "b"}]
    body = {"documents": documents} if wrapped else documents
    path = write(tmp_path / "docs.json", json.dumps(body))
    items = read(path, source="cli")
    assert [i.origin for i in items] == [f"{path}[0]", f"{path}[1]"]
    assert [i.document["source"] for i in items if isinstance(i, SourceDocument)] == [
        "own",
        "cli",
    ]
    (failure,) = read(write(tmp_path / "bad.json", '{"docs": []}'))
    assert isinstance(failure, ReadFailure)
    assert failure.error.startswith("not a list of documents")


def test_a_file_of_another_type_given_by_itself_is_a_failure(tmp_path: Path) -> None:
    (failure,) = read(write(tmp_path / "table.csv", "a,b"))
    assert isinstance(failure, ReadFailure)
    assert failure.error.startswith("not a file type read here (")


def test_write_jsonl_round_trips(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "x.jsonl", [{"external_id": "x", "text": "X."}])
    assert [i.external_id for i in read(path) if isinstance(i, SourceDocument)] == ["x"]
