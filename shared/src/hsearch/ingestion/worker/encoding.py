"""A group of decided documents encoded, with progress recorded on the job for a
document too long for one encoder call (the write pipeline runs it on its encoder
thread, a group ahead of the writes)."""

from __future__ import annotations

import logging
import uuid

from hsearch.db.base import utcnow
from hsearch.db.engine import SessionFactory, transaction
from hsearch.db.repositories.jobs import JobRepository
from hsearch.embedding.protocol import Embedder, Embedding
from hsearch.errors import HsearchError
from hsearch.ingestion.records import embedding_text
from hsearch.ingestion.worker.decisions import PreparedItem

__all__ = ["Embedded", "GroupEncoder"]

logger = logging.getLogger(__name__)

Embedded = tuple[dict[int, list[Embedding]], dict[int, HsearchError]]
"""A group's embeddings and the errors of its documents that failed, by item id."""


class GroupEncoder:
    """Encodes groups of decided documents with ``embedder``, ``batch_chunks`` chunks
    per call for a document of more chunks than that."""

    def __init__(
        self, session_factory: SessionFactory, *, embedder: Embedder, batch_chunks: int
    ) -> None:
        self._sessions = session_factory
        self._embedder = embedder
        self._batch_chunks = batch_chunks

    def embed_items(self, todo: list[PreparedItem], *, job_id: uuid.UUID | None = None) -> Embedded:
        """Embed all chunks of the batch at once; on failure, item by item so one bad
        document fails alone. Returns embeddings and errors by item id."""
        texts = [embedding_text(p.item.title, c) for p in todo for c in p.chunks]
        langs = [p.item.lang for p in todo for _ in p.chunks]
        out: dict[int, list[Embedding]] = {}
        errors: dict[int, HsearchError] = {}
        try:
            flat = self._encode(todo, texts, langs, job_id=job_id) if texts else []
        except HsearchError:
            for prepared in todo:
                try:
                    out[prepared.item_id] = self._embedder.embed_documents(
                        [embedding_text(prepared.item.title, c) for c in prepared.chunks],
                        langs=[prepared.item.lang] * len(prepared.chunks),
                    )
                except HsearchError as exc:
                    errors[prepared.item_id] = exc
            return out, errors
        pos = 0
        for prepared in todo:
            out[prepared.item_id] = flat[pos : pos + len(prepared.chunks)]
            pos += len(prepared.chunks)
        return out, errors

    def _encode(
        self,
        todo: list[PreparedItem],
        texts: list[str],
        langs: list[str],
        *,
        job_id: uuid.UUID | None,
    ) -> list[Embedding]:
        """``texts`` encoded. A document of more chunks than a group (a group of its
        own) is encoded ``batch_chunks`` at a time, and how far it has got is recorded
        on the job after each (:meth:`_record_encoding`): an 840,000-character document
        held a worker for minutes while its job showed nothing moving. Encoded in one
        call or in parts, each chunk's embedding is the same."""
        step = self._batch_chunks
        if job_id is None or len(todo) != 1 or len(texts) <= step:
            return self._embedder.embed_documents(texts, langs=langs)
        document = todo[0].item.external_id
        total = len(texts)
        encoded: list[Embedding] = []
        self._record_encoding(job_id, document=document, done=0, total=total)
        for start in range(0, total, step):
            encoded.extend(
                self._embedder.embed_documents(
                    texts[start : start + step], langs=langs[start : start + step]
                )
            )
            self._record_encoding(job_id, document=document, done=len(encoded), total=total)
        return encoded

    def _record_encoding(self, job_id: uuid.UUID, *, document: str, done: int, total: int) -> None:
        """Record on the job how far its document's encoding has got (its own short
        transaction, from the encoder's thread). Progress is a report: a database that
        does not take it is logged, and the encoding goes on."""
        try:
            with transaction(self._sessions) as session:
                JobRepository(session).record_encoding(
                    job_id, document=document, done=done, total=total, at=utcnow()
                )
        except Exception as exc:  # a report that failed never fails the job
            logger.warning(
                "ingest.encoding.progress_failed job_id=%s error=%s", job_id, type(exc).__name__
            )
            return
        logger.info(
            "ingest.encoding.progress job_id=%s document=%s done=%d total=%d",
            job_id,
            document,
            done,
            total,
        )
