from __future__ import annotations

import uuid
from typing import Any

from hsearch.ingestion.ids import chunk_id, content_hash, document_id


def test_document_id_is_deterministic_and_tenant_scoped() -> None:
    assert document_id("a", "x") == document_id("a", "x")
    assert document_id("a", "x") != document_id("b", "x")
    assert document_id("a", "x") != document_id("a", "y")
    assert isinstance(document_id("a", "x"), uuid.UUID)


def test_chunk_id_depends_on_document_ordinal_and_text() -> None:
    d = document_id("a", "x")
    base = chunk_id(d, 0, "hello")
    assert base == chunk_id(str(d), 0, "hello")
    assert len(base) == 32
    assert (
        len(
            {
                base,
                chunk_id(d, 1, "hello"),
                chunk_id(d, 0, "hello!"),
                chunk_id(document_id("a", "y"), 0, "hello"),
            }
        )
        == 4
    )


def test_content_hash_covers_every_indexed_field() -> None:
    kw: dict[str, Any] = {
        "title": "t",
        "text": "x",
        "source": "s",
        "lang": "en",
        "tags": ["a"],
        "metadata": {"k": 1},
    }
    base = content_hash(**kw)
    for key, value in [
        ("title", "u"),
        ("text", "y"),
        ("source", "z"),
        ("lang", "ja"),
        ("tags", ["b"]),
        ("metadata", {"k": 2}),
    ]:
        assert content_hash(**{**kw, key: value}) != base
    assert content_hash(**{**kw, "metadata": {"k": 1}}) == base
