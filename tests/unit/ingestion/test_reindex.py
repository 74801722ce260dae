"""The rebuild (``hsearch reindex``) on embedded parts: SQLite metadata, the fake encoder
and the in-memory store. What it writes, and that it changes nothing live when it
cannot finish."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import Document
from hsearch.embedding.fake import FakeEmbedder
from hsearch.embedding.protocol import Embedding
from hsearch.errors import EncoderError, EncoderMismatchError, ReindexError
from hsearch.ingestion.chunking import Chunker
from hsearch.ingestion.operations.reindex import ReindexService
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import docs, get_job, make_service, run, stats, submit

A = ("a", "Volcanoes erupt where plates meet. " * 8)
B = ("b", "The café serves coffee and cakes.")
C = ("c", "東京は日本の首都です。")
D = ("d", "Rivers and lakes.")


class OldFake(FakeEmbedder):
    """The fake encoder as a collection built with an older analyzer recorded it."""

    def __init__(self) -> None:
        super().__init__()
        self._info = dataclasses.replace(self._info, version="fake1.lex1")


class PoisonedFake(FakeEmbedder):
    def embed_documents(
        self, texts: Sequence[str], *, langs: Sequence[str] | None = None
    ) -> list[Embedding]:
        if any("poison" in t for t in texts):
            raise EncoderError("cannot encode poison")
        return super().embed_documents(texts, langs=langs)


def reindexer(
    sessions: sessionmaker[Session], store: InMemoryVectorStore, embedder: FakeEmbedder
) -> ReindexService:
    return ReindexService(
        session_factory=sessions,
        embedder=embedder,
        store=store,
        chunker=Chunker(embedder.tokenizer, max_tokens=36, overlap_tokens=0),
        batch_documents=2,
    )


@pytest.fixture
def old_store(sessions: sessionmaker[Session]) -> InMemoryVectorStore:
    """Two tenants indexed with the old encoder."""
    store = InMemoryVectorStore()
    service = make_service(sessions, store, OldFake())
    store.ensure_collection(OldFake().info)
    run(sessions, service, docs(A, B, C))
    run(sessions, service, docs(A, D), tenant="t2")
    return store


def encoders(sessions: sessionmaker[Session]) -> set[str]:
    with sessions() as session:
        return set(session.scalars(select(Document.encoder)))


def test_rebuilds_every_tenant_with_the_new_encoder(
    sessions: sessionmaker[Session], old_store: InMemoryVectorStore, tmp_path: Path
) -> None:
    new = FakeEmbedder()
    with pytest.raises(EncoderMismatchError, match="hsearch reindex"):
        old_store.ensure_collection(new.info)
    counts = {t: old_store.count(tenant_id=t) for t in ("t1", "t2")}
    progress: list[tuple[int, int]] = []

    report = reindexer(sessions, old_store, new).run(progress=lambda *p: progress.append(p))

    old_store.ensure_collection(new.info)  # the live collection is the new encoder's now
    assert report.previous == "memory"
    assert report.collection == old_store.live_collection() == "memory_v1"
    assert (report.documents, report.tenants) == (5, 2)
    assert report.chunks == sum(counts.values())
    assert {t: old_store.count(tenant_id=t) for t in ("t1", "t2")} == counts
    assert progress == [(2, 5), (4, 5), (5, 5)]
    assert encoders(sessions) == {new.info.fingerprint}

    # The statistics are those a fresh ingest with the new encoder records.
    url = f"sqlite:///{tmp_path / 'fresh.sqlite'}"
    upgrade_database(url)
    engine = create_db_engine(url)
    fresh = create_session_factory(engine)
    fresh_store = InMemoryVectorStore()
    run(fresh, make_service(fresh, fresh_store, new), docs(A, B, C))
    assert stats(sessions) == stats(fresh)
    assert old_store.chunk_ids(tenant_id="t1", document_id=str(_id(sessions, "a"))) == (
        fresh_store.chunk_ids(tenant_id="t1", document_id=str(_id(fresh, "a")))
    )
    engine.dispose()

    # Ingesting the same content again is a no-op: the rows know the new encoder.
    service = make_service(sessions, old_store, new)
    job = run(sessions, service, docs(A, B, C))
    assert get_job(sessions, job).skipped == 3


def test_refuses_while_ingestion_is_queued(
    sessions: sessionmaker[Session], old_store: InMemoryVectorStore
) -> None:
    submit(sessions, docs(("e", "queued")))
    with pytest.raises(ReindexError, match="queued or running"):
        reindexer(sessions, old_store, FakeEmbedder()).run()
    old_store.ensure_collection(OldFake().info)  # untouched


def test_documents_changed_during_the_rebuild_switch_nothing(
    sessions: sessionmaker[Session], old_store: InMemoryVectorStore
) -> None:
    before = stats(sessions)
    service = make_service(sessions, old_store, OldFake())

    def ingest_meanwhile() -> None:
        # Searches and writes still go to the old collection while the new one is built.
        old_store.ensure_collection(OldFake().info)
        run(sessions, service, docs(("e", "A late document.")))

    with pytest.raises(ReindexError, match="ingested while"):
        reindexer(sessions, old_store, FakeEmbedder()).run(before_swap=ingest_meanwhile)
    old_store.ensure_collection(OldFake().info)
    assert old_store.live_collection() == "memory"
    assert encoders(sessions) == {OldFake().info.fingerprint}
    assert stats(sessions)[0][0] == before[0][0] + 1  # only the late document


def test_a_document_that_cannot_be_encoded_switches_nothing(
    sessions: sessionmaker[Session], old_store: InMemoryVectorStore
) -> None:
    run(sessions, make_service(sessions, old_store, OldFake()), docs(("p", "poison")))
    before = stats(sessions)
    with pytest.raises(ReindexError, match="cannot encode documents"):
        reindexer(sessions, old_store, PoisonedFake()).run()
    old_store.ensure_collection(OldFake().info)
    assert stats(sessions) == before
    assert encoders(sessions) == {OldFake().info.fingerprint}


def _id(sessions: sessionmaker[Session], external_id: str) -> uuid.UUID:
    with sessions() as session:
        return session.scalars(
            select(Document.id).where(
                Document.tenant_id == "t1", Document.external_id == external_id
            )
        ).one()
