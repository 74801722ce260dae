"""Drift made on purpose, found and repaired (embedded parts: SQLite metadata, the fake
encoder, the in-memory store)."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings
from hsearch.db.models import (
    Document,
    JobStatus,
    LexicalCorpusStats,
    LexicalTermStats,
    LexicalVocabulary,
)
from hsearch.db.repositories.links import LinkRepository, StoredLink
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.graph.links import Link
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.operations.reconcile import Reconciler
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import TENANT, A, B, C, docs, make_service, run, stats


def recorded(sessions: sessionmaker[Session], external_id: str) -> list[str]:
    with sessions() as session:
        return list(session.get_one(Document, document_id(TENANT, external_id)).chunk_ids)


def tenant_generation(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return TenantRepository(session).generation(TENANT)


def test_orphans_and_missing_chunks_are_found_and_repaired(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    service = make_service(sessions, store)
    run(sessions, service, docs(A, B, C))
    queue = InMemoryJobQueue()
    reconciler = Reconciler(sessions, store=store, queue=queue, settings=IngestSettings())
    assert reconciler.tenants() == [TENANT]
    assert reconciler.check(TENANT).clean

    # Drift: a chunk nothing records (a write whose record was lost), and one of A's
    # chunks gone from the store.
    orphan = store._rows[recorded(sessions, "b")[0]]
    store.upsert([dataclasses.replace(orphan, chunk_id="f" * 32)])
    lost = recorded(sessions, "a")[0]
    store.delete_chunks([lost], tenant_id=TENANT)
    total = store.count(tenant_id=TENANT)

    drift = reconciler.check(TENANT)
    assert not drift.clean
    assert drift.orphans == ("f" * 32,)
    assert drift.missing == {"a": 1}
    assert (drift.documents, drift.stored_chunks) == (3, total)

    generation = tenant_generation(sessions)
    repaired = reconciler.repair(drift)
    assert repaired.repaired
    assert tenant_generation(sessions) > generation, "cached results lose the orphans"
    assert queue.sent == [repaired.repair_job]
    assert service.process_job(queue.sent[0]) is JobStatus.SUCCEEDED
    assert reconciler.check(TENANT).clean
    assert lost in store.tenant_chunk_ids(tenant_id=TENANT)
    assert "f" * 32 not in store.tenant_chunk_ids(tenant_id=TENANT)


def test_every_registered_tenant_is_checked_and_an_unknown_one_is_refused(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    run(sessions, make_service(sessions, store), docs(A))
    with sessions() as session, session.begin():
        TenantRepository(session).ensure("empty")  # no document: chunks it has are orphans
    stray = next(iter(store._rows.values()))
    store.upsert([dataclasses.replace(stray, chunk_id="e" * 32, tenant_id="empty")])
    reconciler = Reconciler(
        sessions, store=store, queue=InMemoryJobQueue(), settings=IngestSettings()
    )

    assert reconciler.tenants() == sorted([TENANT, "empty"])
    assert reconciler.check("empty").orphans == ("e" * 32,)
    reconciler.require([TENANT, "empty"])
    with pytest.raises(TenantNotFoundError, match="'nope'"):
        reconciler.require([TENANT, "nope"])


def test_drifted_lexical_statistics_and_vocabulary_are_found_and_repaired(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    run(sessions, make_service(sessions, store), docs(A, B, C))
    reconciler = Reconciler(
        sessions, store=store, queue=InMemoryJobQueue(), settings=IngestSettings()
    )
    assert reconciler.check(TENANT).clean
    expected = stats(sessions)
    with sessions() as session, session.begin():
        term = session.scalars(
            select(LexicalTermStats).where(LexicalTermStats.tenant_id == TENANT)
        ).first()
        assert term is not None
        term.df += 5
        session.get_one(LexicalCorpusStats, TENANT).chunk_count += 1
        word = session.scalars(
            select(LexicalVocabulary).where(LexicalVocabulary.tenant_id == TENANT)
        ).first()
        assert word is not None
        session.delete(word)

    drift = reconciler.check(TENANT)
    assert {k.kind for k in drift.kinds if not k.clean} == {"lexical_statistics", "vocabulary"}
    assert drift.figures()["lexical_corpus_differs"] is True
    assert drift.figures()["lexical_terms_differing"] == 1
    assert drift.figures()["vocabulary_words_missing"] == 1
    assert (drift.orphans, drift.missing) == ((), {})

    generation = tenant_generation(sessions)
    repaired = reconciler.repair(drift)
    assert (repaired.repaired, repaired.repair_job) == (True, None)
    assert tenant_generation(sessions) > generation
    assert reconciler.check(TENANT).clean
    assert stats(sessions) == expected


def test_links_of_a_deleted_document_are_found_and_deleted_and_resubmissions_keep_links(
    sessions: sessionmaker[Session],
) -> None:
    store = InMemoryVectorStore()
    service = make_service(sessions, store)
    linked = [dataclasses.replace(d, links=(Link("b"), Link("c", "cites", 2.0))) for d in docs(A)]
    run(sessions, service, [*linked, *docs(B, C)])
    queue = InMemoryJobQueue()
    reconciler = Reconciler(sessions, store=store, queue=queue, settings=IngestSettings())
    assert reconciler.check(TENANT).clean

    # Drift: b's row deleted by hand (its links left behind), a's chunks lost.
    with sessions() as session, session.begin():
        LinkRepository(session).replace(
            TENANT,
            [document_id(TENANT, "b")],
            [
                StoredLink(
                    document_id(TENANT, "b"), document_id(TENANT, "c"), "c", "link", 1.0, "given"
                )
            ],
        )
        session.delete(session.get_one(Document, document_id(TENANT, "b")))
    store.delete_chunks(recorded(sessions, "a"), tenant_id=TENANT)
    drift = reconciler.check(TENANT)
    [links] = [k for k in drift.kinds if k.kind == "links"]
    assert links.figures() == {"links_of_deleted_documents": 1}

    repaired = reconciler.repair(drift)
    assert service.process_job(queue.sent[0]) is JobStatus.SUCCEEDED
    assert reconciler.check(TENANT).clean
    with sessions() as session:
        repo = LinkRepository(session)
        assert repo.out_links(TENANT, document_id(TENANT, "b")) == []
        # a was indexed again from what was stored: with the links it was given.
        out = repo.out_links(TENANT, document_id(TENANT, "a"))
        assert [(r.external_id, r.type, r.weight) for r in out] == [
            ("c", "cites", 2.0),
            ("b", "link", 1.0),
        ]
    assert repaired.repaired
