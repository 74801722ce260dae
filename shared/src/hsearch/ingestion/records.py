"""What a document's chunks look like to the encoder and to the vector store.

Shared by the two writers of chunks, the indexer (a job's documents) and the rebuild
(``hsearch reindex``: every stored document), so a rebuilt collection holds exactly
what indexing would have written.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from hsearch.embedding.protocol import Embedding
from hsearch.vectorstore.protocol import ChunkRecord

__all__ = ["chunk_records", "embedding_text"]


def embedding_text(title: str, chunk: str) -> str:
    """The text encoded for one chunk: the title travels with every chunk, as it is often
    the best evidence of the topic."""
    return f"{title}\n{chunk}" if title else chunk


def chunk_records(
    *,
    tenant_id: str,
    document_id: uuid.UUID,
    external_id: str,
    title: str,
    source: str,
    lang: str,
    tags: Sequence[str],
    metadata: Mapping[str, Any],
    created_at: datetime,
    chunk_ids: Sequence[str],
    chunks: Sequence[str],
    offsets: Sequence[tuple[int, int]],
    vectors: Sequence[Embedding],
) -> list[ChunkRecord]:
    """One record per chunk, in chunk order, with the document's filter fields and each
    chunk's ``(start, end)`` character offsets in the document's text (``offsets``)."""
    return [
        ChunkRecord(
            chunk_id=cid,
            document_id=str(document_id),
            tenant_id=tenant_id,
            external_id=external_id,
            title=title,
            text=text,
            ordinal=i,
            dense=e.dense,
            sparse=e.sparse,
            char_start=start,
            char_end=end,
            source=source,
            lang=lang,
            tags=tuple(tags),
            created_at=int(created_at.timestamp()),
            metadata=metadata,
        )
        for i, (cid, text, (start, end), e) in enumerate(
            zip(chunk_ids, chunks, offsets, vectors, strict=True)
        )
    ]
