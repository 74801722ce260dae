"""``hsearch links relink``: a tenant's text links found again against all its documents,
page by page; idempotent (embedded parts: SQLite metadata, the fake encoder, the
in-memory store)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.db.repositories.links import LinkRepository
from hsearch.db.repositories.tenants import TenantRepository
from hsearch.errors import TenantNotFoundError
from hsearch.graph.links import Link, TextLinks
from hsearch.ingestion.ids import document_id
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.operations.relink import Relinker
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.ingestion.test_indexing import TENANT, make_service, run

BOTH = frozenset(TextLinks)


def document(
    external_id: str, text: str, *, title: str = "", links: tuple[Link, ...] = ()
) -> DocumentInput:
    return DocumentInput(
        external_id=external_id,
        title=title or external_id.upper(),
        text=text,
        links=links,
        text_links=BOTH,
    )


def stored(sessions: sessionmaker[Session]) -> set[tuple[str, str, str, str, float]]:
    """Every link of the tenant: (source, target, type, origin, weight)."""
    with sessions() as session:
        repo = LinkRepository(session)
        sources = {document_id(TENANT, e): e for e in ("intro", "guide", "faq", "glossary", "late")}
        return {
            (sources[source], link.target_external_id, link.type, link.origin, link.weight)
            for source, rows in repo.stored_from(TENANT, list(sources)).items()
            for link in rows
        }


def generation(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return TenantRepository(session).generation(TENANT)


def indexed(sessions: sessionmaker[Session]) -> None:
    """Four documents mentioning and linking to one indexed after them ("late")."""
    service = make_service(sessions, InMemoryVectorStore())
    run(
        sessions,
        service,
        [
            document("intro", "Start with the Setup Guide, then read [late](late)."),
            document(
                "guide",
                "The Setup Guide names the Glossary and [the faq](faq).",
                title="Setup Guide",
                links=(Link("faq", "link", 2.0),),
            ),
            document("faq", "Questions, and the Latecomer Notes."),
            document("glossary", "Terms.", title="Glossary"),
        ],
    )
    run(sessions, service, [document("late", "Read last.", title="Latecomer Notes")])


def test_relink_finds_the_later_document_and_a_second_run_changes_nothing(
    sessions: sessionmaker[Session],
) -> None:
    indexed(sessions)
    before = stored(sessions)
    assert ("intro", "late", "link", "text", 1.0) not in before  # not indexed then
    assert ("faq", "late", "mention", "text", 1.0) not in before
    # Given and found: kept as given, with its weight, once.
    assert ("guide", "faq", "link", "given", 2.0) in before
    assert ("guide", "faq", "link", "text", 1.0) not in before

    relinker = Relinker(sessions, page_size=2)  # three pages, a transaction each
    first = relinker.relink(TENANT)
    after = stored(sessions)
    assert after - before == {
        ("intro", "late", "link", "text", 1.0),
        ("faq", "late", "mention", "text", 1.0),
    }
    assert before - after == set()
    assert (first.documents, first.searched, first.changed) == (5, 5, 2)
    assert first.links == sum(1 for link in after if link[3] == "text")

    moved = generation(sessions)
    second = relinker.relink(TENANT)
    assert (second.documents, second.changed, second.links) == (5, 0, first.links)
    assert stored(sessions) == after
    assert generation(sessions) == moved, "nothing changed: cached results stay"


def test_the_page_size_does_not_change_what_is_found(sessions: sessionmaker[Session]) -> None:
    indexed(sessions)
    Relinker(sessions, page_size=1).relink(TENANT)
    one_by_one = stored(sessions)
    assert Relinker(sessions, page_size=100).relink(TENANT).changed == 0
    assert stored(sessions) == one_by_one


def test_an_unknown_tenant_is_refused(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(TenantNotFoundError):
        Relinker(sessions).relink("nobody")
    with pytest.raises(ValueError, match="page_size"):
        Relinker(sessions, page_size=0)
