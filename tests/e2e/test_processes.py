"""End to end over real processes: uvicorn + a Celery worker process + a Milvus Lite
server + Postgres + Redis, with the offline encoder (real relevance). Ingest the
sample corpus over HTTP, find every document in every mode, restart the API and find
them again (the data is persisted)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.core.result import Ok

from hsearch.db.migrate import upgrade_database
from hsearch.local.processes import start_api, start_milvus_lite
from hsearch.stack import sample_documents
from hsearch.tenancy.factory import open_tenancy
from tests.integration.conftest import settings_from_env, stack_env
from tests.integration.services import postgres_database, private_redis, start_test_worker
from tests.unit.api.test_fuzz_openapi import CHECKS, with_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


def first_sentence(text: str) -> str:
    for stop in ("。", ". "):
        if stop in text:
            return text.split(stop, 1)[0] + stop.strip()
    return text


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("e2e")
    with postgres_database() as pg, private_redis(root / "redis") as broker:
        upgrade_database(pg)
        milvus, uri = start_milvus_lite(root / "milvus", log=root / "milvus.log")
        env = stack_env(
            database_url=pg,
            broker_url=broker,
            milvus_uri=uri,
            collection=f"e2e_{uuid.uuid4().hex[:8]}",
            encoder={"kind": "offline"},
            data_dir=root,
        )
        with open_tenancy(settings_from_env(env)) as tenancy:
            created = tenancy.create_tenant(
                "e2e", tenant_id=f"e2e{uuid.uuid4().hex[:8]}", actor="test"
            )
        worker = start_test_worker(env, root, name="e2e")
        api, base = start_api(env, log=root / "api.log")
        auth = {"Authorization": f"Bearer {created.key.key}"}
        state: dict[str, Any] = {"env": env, "root": root, "api": api, "base": base, "auth": auth}
        try:
            yield state
        finally:
            state["api"].stop()
            worker.stop()
            milvus.stop()


def search(base: str, query: str, mode: str, auth: dict[str, str]) -> dict[str, Any]:
    resp = httpx.post(
        f"{base}/v1/search",
        json={"query": query, "mode": mode, "top_k": 5},
        headers=auth,
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def assert_every_document_found(
    base: str, docs: list[dict[str, Any]], auth: dict[str, str]
) -> None:
    for doc in docs:
        query = first_sentence(doc["text"])
        for mode in ("hybrid", "semantic", "keyword"):
            body = search(base, query, mode, auth)
            ids = [h["external_id"] for h in body["hits"]]
            assert body["degraded"] == []
            assert ids[:1] == [doc["external_id"]], (mode, query, ids)


def test_ingest_search_restart_search(processes: dict[str, Any]) -> None:
    base, auth = processes["base"], processes["auth"]
    docs = sample_documents()
    resp = httpx.post(f"{base}/v1/documents", json={"documents": docs}, headers=auth, timeout=30)
    assert resp.status_code == 202, resp.text
    job_url = base + resp.json()["status_url"]
    deadline = time.monotonic() + 300
    while (job := httpx.get(job_url, headers=auth, timeout=10).json())["status"] not in (
        "succeeded",
        "partial",
        "failed",
    ):
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert job["status"] == "succeeded", job
    assert job["indexed"] == len(docs)

    assert_every_document_found(base, docs, auth)

    processes["api"].stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base}/healthz", timeout=2)
    api, base = start_api(processes["env"], log=Path(processes["root"]) / "api.log")
    processes["api"], processes["base"] = api, base
    assert_every_document_found(base, docs, auth)


def test_the_running_api_keeps_its_contract(processes: dict[str, Any]) -> None:
    """A short schemathesis pass against the running stack (uvicorn, worker, Milvus Lite,
    Postgres, Redis): ten valid and ten invalid requests per operation of the served
    OpenAPI document, none answered with a 500 or outside the document. The long pass
    runs in process: tests/unit/api/test_fuzz_openapi.py. Last in the module, since it
    may delete the tenant's documents."""
    base, auth = processes["base"], processes["auth"]
    key = auth["Authorization"].removeprefix("Bearer ")
    schema = schemathesis.openapi.from_url(f"{base}/openapi.json", config=with_key(key))
    failures = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # an operation the schema cannot describe
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            has_input = bool(operation.query or operation.path_parameters or operation.body)
            if mode is GenerationMode.NEGATIVE and not has_input:
                continue

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=10,
                deadline=None,
                derandomize=True,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def run(case: schemathesis.Case[Any]) -> None:
                case.call_and_validate(base_url=base, checks=CHECKS, timeout=60)

            try:
                run()
            except Exception as exc:  # collected, so one run reports every operation
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
