"""Deterministic ids: re-running an ingest writes the same rows, never duplicates."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

_NAMESPACE = uuid.UUID("5b0e7c1e-7d0f-4c59-9d7e-4f0b8f3a9e21")


def document_id(tenant_id: str, external_id: str) -> uuid.UUID:
    """The same (tenant, external id) is always the same document."""
    return uuid.uuid5(_NAMESPACE, f"{tenant_id}\x00{external_id}")


def chunk_id(document_id: uuid.UUID | str, ordinal: int, text: str) -> str:
    digest = hashlib.sha256(f"{document_id}\x00{ordinal}\x00{text}".encode()).hexdigest()
    return digest[:32]


def content_hash(
    *,
    title: str,
    text: str,
    source: str,
    lang: str,
    tags: list[str],
    metadata: Mapping[str, Any],
    links: Sequence[Mapping[str, Any]] = (),
    text_links: Sequence[str] | None = None,
) -> str:
    """Hash of everything that ends up in the index: equal hash = nothing to do. Links
    and the choice of links from the text count only when given, so the hash of a
    document without them is the one it had before links existed."""
    fields: dict[str, Any] = {
        "title": title,
        "text": text,
        "source": source,
        "lang": lang,
        "tags": tags,
        "metadata": metadata,
    }
    if links:
        fields["links"] = list(links)
    if text_links is not None:
        fields["text_links"] = sorted(text_links)
    payload = json.dumps(
        fields,
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(payload.encode()).hexdigest()
