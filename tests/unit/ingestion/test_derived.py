"""A kind of derived data registered beside the standard ones, with no edit to any of
the five places that maintain derived data: a per-document word count in a table of its
own (made here from SQLAlchemy metadata; no migration for a kind only this test has).
It is written on ingest, removed on a document's delete, a delete job's and a tenant
purge, rebuilt by reindex, and its drift is found and repaired by reconcile.

The services are the wiring's (``build_services(..., extra_derived=...)``) on embedded
parts: a copy of the migrated SQLite database, the fake encoder, the in-memory store and
job queue."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy import Column, Integer, MetaData, String, Table, Uuid, delete, insert, select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.engine import transaction
from hsearch.db.models import Document
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.derived.protocol import (
    DerivedDocument,
    KindDrift,
    RebuildContext,
    Removal,
    Repair,
    WriteUnit,
)
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.operations.reindex import ReindexService
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import Services, build_chunker, build_services
from hsearch.types import JobStatus
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.api.conftest import api_settings, migrated_database

TENANT = "acme"
OTHER = "other"

word_counts = Table(
    "test_word_counts",
    MetaData(),
    Column("document_id", Uuid, primary_key=True),
    Column("tenant_id", String(64), nullable=False, index=True),
    Column("words", Integer, nullable=False),
)


def count_words(text: str) -> int:
    return len(text.split())


@dataclass(frozen=True)
class WordCountDrift:
    tenant_id: str
    expected: Mapping[uuid.UUID, int]
    stored: Mapping[uuid.UUID, int]
    kind: str = "word_counts"

    @property
    def wrong(self) -> list[uuid.UUID]:
        """Documents whose count is missing, wrong, or of no document."""
        ids = self.expected.keys() | self.stored.keys()
        return sorted(d for d in ids if self.expected.get(d) != self.stored.get(d))

    @property
    def clean(self) -> bool:
        return not self.wrong

    def figures(self) -> dict[str, object]:
        return {"word_counts_wrong": len(self.wrong)}


@dataclass
class _Writer:
    tenant_id: str
    counts: dict[uuid.UUID, int] = field(default_factory=dict)

    def write_group(self, session: Session, documents: Sequence[DerivedDocument]) -> None:
        self.counts.update((d.document_id, count_words(d.content)) for d in documents)

    def finish(self, session: Session) -> None:
        if self.counts:
            session.execute(delete(word_counts).where(word_counts.c.document_id.in_(self.counts)))
            session.execute(
                insert(word_counts),
                [
                    {"document_id": d, "tenant_id": self.tenant_id, "words": n}
                    for d, n in self.counts.items()
                ],
            )

    def wait(self) -> BaseException | None:
        return None


@dataclass
class _Rebuild:
    counts: dict[uuid.UUID, tuple[str, int]] = field(default_factory=dict)

    def add(self, documents: Sequence[DerivedDocument]) -> None:
        pass

    def recount(self, document: DerivedDocument) -> None:
        self.counts[document.document_id] = (document.tenant_id, count_words(document.content))

    def commit(self, session: Session) -> None:
        session.execute(delete(word_counts))
        if self.counts:
            session.execute(
                insert(word_counts),
                [
                    {"document_id": d, "tenant_id": t, "words": n}
                    for d, (t, n) in self.counts.items()
                ],
            )


class WordCounts:
    """The toy kind: each document's word count."""

    name = "word_counts"

    def writer(self, unit: WriteUnit) -> _Writer:
        return _Writer(unit.tenant_id)

    def remove(self, session: Session, removal: Removal) -> None:
        ids = [doc.id for doc in removal.documents]
        session.execute(delete(word_counts).where(word_counts.c.document_id.in_(ids)))

    def sweep(self, tenant_id: str) -> None:
        pass

    def purge(self, session: Session, tenant_id: str) -> Mapping[str, int]:
        result = session.execute(delete(word_counts).where(word_counts.c.tenant_id == tenant_id))
        return {"test_word_counts": result.rowcount}  # type: ignore[attr-defined]

    def rebuild(self, context: RebuildContext) -> _Rebuild:
        return _Rebuild()

    def check(self, sessions: sessionmaker[Session], tenant_id: str) -> WordCountDrift:
        with sessions() as session:
            documents = session.execute(
                select(Document.id, Document.content).where(Document.tenant_id == tenant_id)
            )
            expected = {d: count_words(text) for d, text in documents}
            rows = session.execute(
                select(word_counts.c.document_id, word_counts.c.words).where(
                    word_counts.c.tenant_id == tenant_id
                )
            )
            stored = {d: int(n) for d, n in rows}
        return WordCountDrift(tenant_id, expected=expected, stored=stored)

    def repair(self, sessions: sessionmaker[Session], drift: KindDrift) -> Repair:
        assert isinstance(drift, WordCountDrift)
        with transaction(sessions) as session:
            session.execute(delete(word_counts).where(word_counts.c.tenant_id == drift.tenant_id))
            session.execute(
                insert(word_counts),
                [
                    {"document_id": d, "tenant_id": drift.tenant_id, "words": n}
                    for d, n in drift.expected.items()
                ],
            )
        return Repair()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    settings = api_settings(tmp_path)
    (settings.data_dir / "hsearch.sqlite").write_bytes(migrated_database())
    built = build_services(
        settings,
        store=InMemoryVectorStore(),
        queue=InMemoryJobQueue(),
        extra_derived=[WordCounts()],
    )
    word_counts.metadata.create_all(built.engine)
    for tenant in (TENANT, OTHER):
        built.tenancy.create_tenant(tenant.title(), tenant_id=tenant, actor="test")
    try:
        yield built
    finally:
        built.close()


def ingest(services: Services, tenant: str, **texts: str) -> None:
    documents = [
        DocumentInput(external_id=e, text=t, tags=("old",) if "old" in t else ())
        for e, t in texts.items()
    ]
    with unit_of_work(services.sessions, queue=InMemoryJobQueue()) as uow:
        job = JobService(uow, settings=services.settings.ingest).submit(
            tenant_id=tenant, documents=documents
        )
    assert services.indexing().process_job(job.id) is JobStatus.SUCCEEDED


def counts(services: Services, tenant: str = TENANT) -> dict[str, int]:
    """The stored word counts of the tenant's documents, by external id."""
    with services.sessions() as session:
        rows = session.execute(
            select(Document.external_id, word_counts.c.words)
            .select_from(word_counts)
            .join(Document, Document.id == word_counts.c.document_id, isouter=True)
            .where(word_counts.c.tenant_id == tenant)
        )
        return {str(external_id): words for external_id, words in rows}


def test_a_registered_kind_is_maintained_by_every_maintainer(services: Services) -> None:
    assert services.derived.names == (
        "lexical_statistics",
        "vocabulary",
        "chunks",
        "concepts",
        "links",
        "word_counts",
    )

    # Indexing writes it, in the transaction that writes the documents; a new version
    # replaces its count.
    ingest(services, TENANT, a="one two three", b="four five", c="an old page", d="old too")
    ingest(services, OTHER, z="the other tenant's words")
    assert counts(services) == {"a": 3, "b": 2, "c": 3, "d": 2}
    ingest(services, TENANT, a="one two three four five six")
    assert counts(services) == {"a": 6, "b": 2, "c": 3, "d": 2}

    # A document's delete removes it.
    deletion = services.documents().delete(tenant_id=TENANT, external_id="b")
    assert deletion.deleted_chunks > 0
    assert counts(services) == {"a": 6, "c": 3, "d": 2}

    # So does a delete job (its documents selected by a filter).
    with unit_of_work(services.sessions, queue=InMemoryJobQueue()) as uow:
        job = JobService(uow, settings=services.settings.ingest).submit_delete(
            tenant_id=TENANT, filter={"tags": {"contains": "old"}}
        )
    assert services.indexing().process_job(job.id) is JobStatus.SUCCEEDED
    assert counts(services) == {"a": 6}

    # Reindex rebuilds it from the stored documents (here from nothing).
    ingest(services, TENANT, e="five words in this one")
    with transaction(services.sessions) as session:
        session.execute(delete(word_counts))
    report = ReindexService(
        session_factory=services.sessions,
        embedder=services.embedder,
        store=services.store,
        chunker=build_chunker(services.settings, services.embedder),
        derived=services.derived,
    ).run()
    assert report.documents == 3
    assert counts(services) == {"a": 6, "e": 5}
    assert counts(services, OTHER) == {"z": 4}

    # Reconcile checks it with the other kinds, and repairs its drift: a wrong count,
    # a lost one, and one of a document that is gone.
    reconciler = services.reconciler()
    assert all(reconciler.check(tenant).clean for tenant in reconciler.tenants())
    with transaction(services.sessions) as session:
        session.execute(
            word_counts.update()
            .where(word_counts.c.document_id == document_id(TENANT, "a"))
            .values(words=99)
        )
        session.execute(
            delete(word_counts).where(word_counts.c.document_id == document_id(TENANT, "e"))
        )
        session.execute(
            insert(word_counts).values(document_id=uuid.uuid4(), tenant_id=TENANT, words=7)
        )
    drift = reconciler.check(TENANT)
    assert not drift.clean
    assert [k.kind for k in drift.kinds if not k.clean] == ["word_counts"]
    assert drift.figures()["word_counts_wrong"] == 3
    assert drift.figures()["orphan_chunks"] == 0
    repaired = reconciler.repair(drift)
    assert repaired.repaired
    assert repaired.repair_job is None
    assert reconciler.check(TENANT).clean
    assert counts(services) == {"a": 6, "e": 5}

    # A tenant purge deletes the tenant's, and only the tenant's.
    purge = services.tenant_purge().delete(TENANT, actor="test")
    assert purge.rows["test_word_counts"] == 2
    assert counts(services) == {}
    assert counts(services, OTHER) == {"z": 4}
