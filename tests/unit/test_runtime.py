"""Services.check_readiness: each dependency probed, a failure reported, never raised."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from hsearch.config import DatabaseSettings, EncoderKind, EncoderSettings, Settings
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
    assert readiness.checks == {"database": "ok", "milvus": "ok"}
    assert readiness.encoder == services.embedder.info.fingerprint


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
    assert readiness.checks["database"].startswith("error: OperationalError: ")
    assert readiness.checks["milvus"] == "ok"
