"""The document quota holds across concurrent submissions on Postgres: the check runs
under a lock on the tenant's row, so a second submission waits for the first to commit
and counts its documents (two API processes are two such transactions)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy.orm import Session, sessionmaker

from hsearch.config import IngestSettings, QuotaSettings
from hsearch.errors import QuotaExceededError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue

pytestmark = pytest.mark.integration

QUOTAS = QuotaSettings(max_documents=3)


def submit(sessions: sessionmaker[Session], tenant: str, ids: list[str]) -> JobService:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        service = JobService(uow, settings=IngestSettings(), quotas=QUOTAS)
        service.submit(
            tenant_id=tenant, documents=[DocumentInput(external_id=i, text="t") for i in ids]
        )
        return service


def test_concurrent_submissions_cannot_both_slip_under_the_quota(
    sessions: sessionmaker[Session], tenant: str
) -> None:
    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        JobService(uow, settings=IngestSettings()).submit(
            tenant_id=tenant, documents=[DocumentInput(external_id="seed", text="t")]
        )
    second_done = threading.Event()
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            submit(sessions, tenant, ["c", "d"])
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)
        finally:
            second_done.set()

    with unit_of_work(sessions, queue=InMemoryJobQueue()) as uow:
        JobService(uow, settings=IngestSettings(), quotas=QUOTAS).submit(
            tenant_id=tenant, documents=[DocumentInput(external_id=i, text="t") for i in "ab"]
        )
        thread = threading.Thread(target=second)
        thread.start()
        # Holding the tenant's lock, the second submission cannot finish; without the
        # lock it would (counting 1 document), which this bounded wait would catch.
        assert not second_done.wait(timeout=1.0), "the second check did not wait"
    thread.join(timeout=30)
    assert len(outcome) == 1
    assert isinstance(outcome[0], QuotaExceededError), outcome
    assert outcome[0].quota == "quotas.max_documents"
