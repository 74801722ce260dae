"""``hsearch reindex`` against the Milvus Lite server and Postgres: a collection built
with an older analyzer is refused, rebuilt beside the live one while searches keep
answering from it, then swapped in through the alias.

Each test has a database of its own: a rebuild covers every document of its database
(one database serves one collection), so it must not see the suite's other tenants.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hsearch.config import Settings
from hsearch.db.migrate import upgrade_database
from hsearch.embedding.fake import FakeEmbedder
from hsearch.errors import EncoderMismatchError
from hsearch.ingestion.models import DocumentInput
from hsearch.runtime import Services, build_services, reindexing
from hsearch.search.models import SearchQuery
from hsearch.types import SearchMode
from hsearch.vectorstore.milvus import MilvusVectorStore
from tests.integration.conftest import settings_from_env, stack_env
from tests.integration.jobs import index_documents
from tests.integration.services import postgres_database

pytestmark = pytest.mark.integration

TENANTS = ("alpha", "beta")
DOCUMENTS = [
    DocumentInput(external_id="v", title="Volcanoes", text="Volcanoes erupt where plates meet."),
    DocumentInput(external_id="c", title="Coffee", text="The café serves coffee and cakes."),
    DocumentInput(external_id="r", title="Rivers", text="Rivers and lakes hold fresh water."),
    DocumentInput(external_id="t", title="東京", text="東京は日本の首都です。", lang="ja"),
]


class OldFake(FakeEmbedder):
    """The fake encoder as a collection built with the previous analyzer recorded it."""

    def __init__(self) -> None:
        super().__init__()
        self._info = dataclasses.replace(self._info, version="fake1.lex1")


@pytest.fixture
def env(milvus_uri: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    with postgres_database() as url:
        upgrade_database(url)
        env = stack_env(
            database_url=url,
            broker_url="memory://",
            milvus_uri=milvus_uri,
            collection=f"rx_{uuid.uuid4().hex[:8]}",
            encoder={"kind": "fake"},
            data_dir=tmp_path,
        )
        # Every job flushes as it ends, so ingestion is idle when a rebuild starts
        # (a rebuild refuses to run beside a job still waiting for its timed flush).
        env["HSEARCH_INGEST__FLUSH_MIN_INTERVAL_S"] = "0"
        yield env


@pytest.fixture
def settings(env: dict[str, str]) -> Settings:
    return settings_from_env(env)


def search(services: Services, query: str, *, mode: SearchMode) -> list[str]:
    async def run() -> list[str]:
        try:
            result = await services.search.search(
                SearchQuery(tenant_id="alpha", query=query, mode=mode, top_k=4, highlight=False)
            )
        finally:
            await services.store.aclose()
        return [hit.external_id for hit in result.hits]

    return asyncio.run(run())


def pinned(settings: Settings, name: str) -> MilvusVectorStore:
    return MilvusVectorStore(settings.milvus_uri, collection=name, pinned=True)


def test_reindex_swaps_a_rebuilt_collection_in_while_searches_answer(settings: Settings) -> None:
    alias = settings.milvus.collection
    old = build_services(settings, embedder=OldFake())
    try:
        index_documents(old, TENANTS, DOCUMENTS)
        assert old.store.live_collection() == f"{alias}_v1"
        counts = {t: old.store.count(tenant_id=t) for t in TENANTS}
        before = search(old, "coffee", mode=SearchMode.KEYWORD)
        assert before[0] == "c"

        with pytest.raises(EncoderMismatchError, match="hsearch reindex"):
            build_services(settings, embedder=FakeEmbedder())

        during: list[list[str]] = []

        def search_old_collection() -> None:
            # The new collection is complete, not yet live: searches use the old one.
            assert old.store.live_collection() == f"{alias}_v1"
            during.append(search(old, "coffee", mode=SearchMode.KEYWORD))

        with reindexing(settings, embedder=FakeEmbedder()) as service:
            report = service.run(before_swap=search_old_collection)
        assert during == [before]
        assert (report.previous, report.collection) == (f"{alias}_v1", f"{alias}_v2")
        assert not report.kept_previous
        assert (report.documents, report.tenants) == (8, 2)
        assert pinned(settings, f"{alias}_v1").live_collection() is None  # dropped
        # The old process searches through the alias too: it answers from the new one.
        assert search(old, "coffee", mode=SearchMode.HYBRID)[0] == "c"
    finally:
        old.close()

    new = build_services(settings, embedder=FakeEmbedder())
    try:
        assert new.store.live_collection() == f"{alias}_v2"
        assert {t: new.store.count(tenant_id=t) for t in TENANTS} == counts
        assert report.chunks == sum(counts.values())
        # The new analysis answers: stems, folded accents, Japanese bigrams.
        assert search(new, "volcano", mode=SearchMode.KEYWORD)[0] == "v"
        assert search(new, "cafe", mode=SearchMode.KEYWORD)[0] == "c"
        assert search(new, "首都", mode=SearchMode.KEYWORD)[0] == "t"
        assert search(new, "and", mode=SearchMode.KEYWORD) == []  # a stop word only
    finally:
        new.close()


def test_reindex_migrates_a_collection_from_before_aliases(settings: Settings) -> None:
    name = settings.milvus.collection
    legacy = pinned(settings, name)  # a plain collection, as deployments had them
    legacy.ensure_collection(OldFake().info)
    legacy.close()
    old = build_services(settings, embedder=OldFake())  # adopted as it is
    try:
        assert old.store.live_collection() == name
        index_documents(old, TENANTS, DOCUMENTS)
        counts = {t: old.store.count(tenant_id=t) for t in TENANTS}
    finally:
        old.close()

    with reindexing(settings, embedder=FakeEmbedder()) as service:
        report = service.run(keep_previous=True)
    assert (report.previous, report.collection) == (f"{name}_v0", f"{name}_v1")
    assert report.kept_previous
    kept = pinned(settings, f"{name}_v0")
    try:
        assert kept.live_collection() == f"{name}_v0"
        assert kept.collection_encoder() == OldFake().info.fingerprint
    finally:
        kept.close()

    new = build_services(settings, embedder=FakeEmbedder())
    try:
        assert new.store.live_collection() == f"{name}_v1"
        assert {t: new.store.count(tenant_id=t) for t in TENANTS} == counts
        assert search(new, "volcanoes", mode=SearchMode.KEYWORD)[0] == "v"
    finally:
        new.close()


def test_the_command_rebuilds_and_names_what_it_did(
    env: dict[str, str], settings: Settings
) -> None:
    alias = settings.milvus.collection
    old = build_services(settings, embedder=OldFake())
    try:
        index_documents(old, TENANTS, DOCUMENTS)
    finally:
        old.close()
    command = [sys.executable, "-m", "hsearch.cli", "reindex", "--keep-previous"]
    done = subprocess.run(  # the configured encoder (fake) is the new one
        command,
        env={**env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"now searches '{alias}_v2'" in done.stdout
    assert f"previous {alias}_v1 (kept)" in done.stdout
    new = build_services(settings, embedder=FakeEmbedder())
    try:
        assert new.store.live_collection() == f"{alias}_v2"
    finally:
        new.close()
