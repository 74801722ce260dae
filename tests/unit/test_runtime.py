"""The wiring: readiness probes each dependency and reports a failure, never raises;
closing the services leaves no ingest job waiting for a flush."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from hsearch.config import DatabaseSettings, EncoderKind, EncoderSettings, IngestSettings, Settings
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import JobStatus
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.jobs import JobService
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore


def settings(data_dir: Path, database_url: str | None = None) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        data_dir=data_dir,
        encoder=EncoderSettings(kind=EncoderKind.FAKE),
        database=DatabaseSettings(url=SecretStr(database_url) if database_url else None),
    )


async def test_ready_when_the_database_and_the_store_answer(tmp_path: Path) -> None:
    services = build_services(
        settings(tmp_path), store=InMemoryVectorStore(), queue=InMemoryJobQueue()
    )
    try:
        readiness = await services.check_readiness()
    finally:
        await services.aclose()
    assert readiness.ready
    assert readiness.status == "ready"
    components = readiness.components
    assert {name: c.status for name, c in components.items()} == {
        "database": "ok",
        "milvus": "ok",
        "encoder": "ok",
        "broker": "ok",
    }
    assert components["encoder"].detail == services.embedder.info.fingerprint


async def test_a_database_that_cannot_be_opened_is_reported_not_raised(tmp_path: Path) -> None:
    unreachable = f"sqlite:///{tmp_path / 'missing-dir' / 'meta.sqlite'}"
    services = build_services(
        settings(tmp_path, unreachable), store=InMemoryVectorStore(), queue=InMemoryJobQueue()
    )
    try:
        readiness = await services.check_readiness()
    finally:
        await services.aclose()
    assert not readiness.ready
    database = readiness.components["database"]
    assert database.status == "error"
    assert database.detail is not None
    assert database.detail.startswith("OperationalError: ")
    assert readiness.components["milvus"].status == "ok"


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
