"""The wiring: closing the services leaves no ingest job waiting for a flush."""

from __future__ import annotations

from pathlib import Path

from hsearch.config import EncoderKind, EncoderSettings, IngestSettings, Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import JobStatus
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore


class CountingStore(InMemoryVectorStore):
    def __init__(self) -> None:
        super().__init__()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1


def test_closing_the_services_runs_an_indexers_waiting_flush(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        data_dir=tmp_path,
        encoder=EncoderSettings(kind=EncoderKind.FAKE),
        ingest=IngestSettings(flush_min_interval_s=3600),
    )
    upgrade_database(settings.database_url)
    store = CountingStore()
    services = build_services(settings, store=store, queue=InMemoryJobQueue())
    indexer = services.indexing()
    jobs = []
    for name in ("a", "b"):
        with unit_of_work(services.sessions, queue=InMemoryJobQueue()) as uow:
            view = JobService(uow, settings=settings.ingest).submit(
                tenant_id="t", documents=[DocumentInput(external_id=name, title="", text=name)]
            )
        jobs.append(view.id)
    assert [indexer.process_job(j) for j in jobs] == [JobStatus.SUCCEEDED, JobStatus.RUNNING]

    services.close()

    assert store.flushes == 2
    engine = create_db_engine(settings.database_url)
    with unit_of_work(create_session_factory(engine), queue=InMemoryJobQueue()) as uow:
        assert JobService(uow, settings=settings.ingest).get(jobs[1], tenant_id="t").status is (
            JobStatus.SUCCEEDED
        )
    engine.dispose()
