"""A large document shows its progress: the job reports the document being encoded,
its chunks encoded and their total, after each group, while the worker encodes it."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence

from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.models import IngestionJob, JobStatus
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import docs, get_job, make_service, submit

STEP = 4
"""Chunks encoded per call (``batch_chunks``)."""


class SteppedEmbedder(FakeEmbedder):
    """Encodes only when the test lets it: each call announces its size, then waits."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: queue.Queue[int] = queue.Queue()
        self.go = threading.Semaphore(0)

    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        self.calls.put(len(texts))
        assert self.go.acquire(timeout=60), "the test never let the encoder go on"
        return super().embed_documents(texts, langs=langs)


def test_a_large_document_reports_its_chunks_encoded_as_it_goes(
    sessions: sessionmaker[Session],
) -> None:
    text = " ".join(f"word{i}" for i in range(600))  # many chunks of 36 tokens
    job_id = submit(sessions, docs(("big", text)))
    embedder = SteppedEmbedder()
    service = make_service(sessions, InMemoryVectorStore(), embedder, batch_chunks=STEP)
    ended: list[JobStatus] = []
    worker = threading.Thread(target=lambda: ended.append(service.process_job(job_id)))
    worker.start()
    seen: list[tuple[int, int]] = []
    try:
        while True:
            size = embedder.calls.get(timeout=60)
            job = get_job(sessions, job_id)
            assert job.status is JobStatus.RUNNING
            assert job.encoding is not None, "reported before each group is encoded"
            assert job.encoding.external_id == "big"
            assert job.processed == 0
            seen.append((job.encoding.done, job.encoding.total))
            total = job.encoding.total
            embedder.go.release()
            if job.encoding.done + size >= total:
                break
    finally:
        embedder.go.release(1000)
        worker.join(timeout=60)
    assert ended == [JobStatus.SUCCEEDED]
    total = seen[0][1]
    assert total > 3 * STEP
    assert seen == [(done, total) for done in range(0, total, STEP)]
    with sessions() as session:
        row = session.get_one(IngestionJob, job_id)
        assert (row.encoding_document, row.encoding_done, row.encoding_total) == (
            "big",
            total,
            total,
        )
    # The job has ended: it encodes nothing any more.
    assert get_job(sessions, job_id).encoding is None


def test_small_documents_are_encoded_together_without_reports(
    sessions: sessionmaker[Session],
) -> None:
    job_id = submit(sessions, docs(("a", "One short text."), ("b", "Another short one.")))
    service = make_service(sessions, InMemoryVectorStore(), batch_chunks=STEP)
    assert service.process_job(job_id) is JobStatus.SUCCEEDED
    with sessions() as session:
        assert session.get_one(IngestionJob, job_id).encoding_done is None
