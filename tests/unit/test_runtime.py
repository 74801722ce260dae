"""The wiring: readiness probes each dependency and reports a failure, never raises;
closing the services leaves no ingest job waiting for a flush; searches encode through
the query micro-batcher; the encoder is loaded once."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from hsearch.config import (
    DatabaseSettings,
    EncoderKind,
    EncoderSettings,
    IngestSettings,
    SearchSettings,
    Settings,
)
from hsearch.db.engine import create_db_engine, create_session_factory
from hsearch.db.migrate import upgrade_database
from hsearch.db.models import JobStatus
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import EncoderMismatchError
from hsearch.ingestion.api.jobs import JobService
from hsearch.ingestion.dispatch import unit_of_work
from hsearch.ingestion.models import DocumentInput
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.search.models import SearchQuery
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from tests.unit.budget import UNHURRIED


def settings(data_dir: Path, database_url: str | None = None) -> Settings:
    return Settings(
        _env_file=None,
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
        _env_file=None,
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


def _searching(tmp_path: Path, **encoder: Any) -> Settings:
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        encoder=EncoderSettings(kind=EncoderKind.FAKE, **encoder),
        search=SearchSettings(**UNHURRIED),
    )
    upgrade_database(settings.database_url)
    return settings


async def test_searches_encode_their_queries_through_the_micro_batcher(tmp_path: Path) -> None:
    services = build_services(
        _searching(tmp_path), store=InMemoryVectorStore(), queue=InMemoryJobQueue()
    )
    batcher = services.query_batcher
    assert batcher is not None
    assert batcher.max_batch == services.settings.encoder.query_batch_max
    try:
        queries = [f"distinct query {i}" for i in range(12)]
        await asyncio.gather(
            *(services.search.search(SearchQuery(tenant_id="t", query=q)) for q in queries)
        )
        assert batcher.stats.queries == len(queries)
    finally:
        await services.aclose()
    assert batcher.closed


async def test_the_cached_query_path_goes_through_the_micro_batcher_too(tmp_path: Path) -> None:
    services = build_services(
        _searching(tmp_path), store=InMemoryVectorStore(), queue=InMemoryJobQueue(), with_cache=True
    )
    batcher = services.query_batcher
    assert batcher is not None
    try:
        for _ in range(3):  # the same text: the model runs once, the cache answers after
            await services.search.search(SearchQuery(tenant_id="t", query="cached words"))
        await services.search.search(SearchQuery(tenant_id="t", query="other words"))
        assert batcher.stats.queries == 2
    finally:
        await services.aclose()


async def test_a_batch_maximum_of_one_turns_micro_batching_off(tmp_path: Path) -> None:
    services = build_services(
        _searching(tmp_path, query_batch_max=1),
        store=InMemoryVectorStore(),
        queue=InMemoryJobQueue(),
    )
    try:
        assert services.query_batcher is None
        result = await services.search.search(SearchQuery(tenant_id="t", query="anything"))
        assert result.hits == ()
    finally:
        await services.aclose()


async def test_the_encoder_is_loaded_once_per_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # create_embedder logs encoder.selected each time it loads a model: building the
    # services loads it, and nothing afterwards (searches, indexers) loads another.
    caplog.set_level(logging.INFO, logger="hsearch.embedding.factory")
    services = build_services(
        _searching(tmp_path), store=InMemoryVectorStore(), queue=InMemoryJobQueue(), with_cache=True
    )
    try:
        await asyncio.gather(
            *(
                services.search.search(SearchQuery(tenant_id="t", query=f"query {i}"))
                for i in range(10)
            )
        )
        services.indexing()
        services.indexing()
    finally:
        await services.aclose()
    loads = [r for r in caplog.records if r.getMessage().startswith("encoder.selected")]
    assert len(loads) == 1


@pytest.mark.process
def test_services_that_never_encode_check_the_collection_without_loading_the_encoder(
    tmp_path: Path,
) -> None:
    # In a process of its own: whether a model library was imported is the question.
    code = f"""
import sys
from pathlib import Path
from hsearch.config import EncoderKind, EncoderSettings, Settings
from hsearch.embedding.offline import declared_info
from hsearch.errors import ConfigurationError
from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore
settings = Settings(
    _env_file=None, data_dir=Path({str(tmp_path)!r}),
    encoder=EncoderSettings(kind=EncoderKind.OFFLINE),
)
store = InMemoryVectorStore()
services = build_services(settings, store=store, load_encoder=False)
assert services.embedder.info == declared_info(), services.embedder.info
try:
    services.embedder.embed_query("a")
except ConfigurationError:
    pass
else:
    raise AssertionError("the unloaded encoder encoded")
services.close()
heavy = ("torch", "transformers", "sentence_transformers", "FlagEmbedding")
print([m for m in heavy if m in sys.modules])
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_services_that_never_encode_still_refuse_a_collection_of_another_encoder(
    tmp_path: Path,
) -> None:
    store = InMemoryVectorStore()
    store.ensure_collection(FakeEmbedder(dimension=16).info)
    with pytest.raises(EncoderMismatchError):
        build_services(settings(tmp_path), store=store, load_encoder=False)
    build_services(settings(tmp_path), store=InMemoryVectorStore(), load_encoder=False).close()


# What a process builds at start is frozen out of full collections (keep_startup_heap):
# each process in a subprocess of its own, so this one's collector is left as it was.

_FROZEN_AT_START = {
    "worker": (
        "import gc\n"
        "from hsearch.config import get_settings\n"
        "from hsearch.db.migrate import upgrade_database\n"
        "upgrade_database(get_settings().database_url)\n"
        "from hsearch_ingest import signals\n"
        "before = gc.get_freeze_count()\n"
        "signals._start()\n"
        "print(before, gc.get_freeze_count())\n"
        "signals._close()\n"
    ),
    "api": (
        "import gc\n"
        "from fastapi.testclient import TestClient\n"
        "from hsearch.config import get_settings\n"
        "from hsearch_api.main import create_app\n"
        "before = gc.get_freeze_count()\n"
        "with TestClient(create_app(get_settings())) as client:\n"
        "    assert client.get('/healthz').status_code == 200\n"
        "    print(before, gc.get_freeze_count())\n"
    ),
}


@pytest.mark.process
@pytest.mark.parametrize("process", sorted(_FROZEN_AT_START))
def test_a_process_freezes_what_it_built_at_start_out_of_full_collections(
    tmp_path: Path, process: str
) -> None:
    """A full collection walks every object the collector tracks: with the encoder and
    the services out of its view, it walks only what was allocated since (a worker
    with the offline encoder tracks about 600,000 objects at start)."""
    env = {
        **os.environ,
        "HSEARCH_DATA_DIR": str(tmp_path),
        "HSEARCH_ENCODER__KIND": "fake",
        "HSEARCH_MILVUS__URI": "",
    }
    done = subprocess.run(
        [sys.executable, "-c", _FROZEN_AT_START[process]],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    before, after = (int(n) for n in done.stdout.split()[-2:])
    assert before == 0
    assert after > 50_000  # the libraries and services, not a handful of objects


@pytest.mark.process
def test_keep_startup_heap_collects_garbage_then_freezes_what_is_left() -> None:
    code = (
        "import gc, weakref\n"
        "from hsearch.runtime import keep_startup_heap\n"
        "class Node: pass\n"
        "kept = [[i] for i in range(20_000)]\n"
        "garbage = Node(); garbage.self = garbage; gone = weakref.ref(garbage); del garbage\n"
        "gc.disable()\n"
        "keep_startup_heap()\n"
        "tracked = any(o is kept for o in gc.get_objects())\n"
        "print(gc.get_freeze_count(), tracked, gone() is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    frozen, tracked, collected = done.stdout.split()
    assert int(frozen) > 20_000
    assert tracked == "False"  # frozen: out of the collector's view
    assert collected == "True"  # a cycle that was garbage is collected, not kept frozen


async def test_the_search_history_is_kept_on_a_timer_without_any_scrape(tmp_path: Path) -> None:
    """What the API runs beside serving: a snapshot offered every round, so /ops opens on
    the recent past with no Prometheus scraping and no stats read."""
    services = build_services(
        settings(tmp_path), store=InMemoryVectorStore(), queue=InMemoryJobQueue()
    )
    rounds = 0

    async def sleep(_seconds: float) -> None:
        nonlocal rounds
        rounds += 1
        if rounds > 2:
            raise asyncio.CancelledError

    try:
        before = services.search_history.snapshots()
        with pytest.raises(asyncio.CancelledError):
            await services.keep_search_history(every_s=15.0, sleep=sleep)
        after = services.search_history.snapshots()
    finally:
        await services.aclose()
    assert (len(before), len(after)) == (0, 1), "one kept: the second is too recent"
