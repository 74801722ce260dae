"""Schemathesis against the app's own OpenAPI document, in process: the real app on an
in-memory store, the fake encoder, a temporary SQLite database and an in-memory queue,
with a key holding every scope. For every operation, a few dozen generated requests
(valid and invalid) answer without a 500, with a status the document lists for the
operation, a body matching the schema it gives for that status, and the content type
it declares. Bounded: ``max_examples`` per operation, no deadline, derandomized, so CI
runs the same requests every time."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import schemathesis.python.asgi
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from hsearch.config import RateLimitSettings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch_api.main import create_app
from hsearch_api.schemas.ndjson import NDJSON_MEDIA_TYPES
from tests.unit.api.conftest import api_settings, default_tenant_key

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
]

DOCS: list[dict[str, Any]] = [
    {"external_id": "fox", "title": "Fox", "text": "The quick brown fox.", "tags": ["a"]},
    {"external_id": "rivers", "text": "Rivers run to the sea.", "metadata": {"year": 2020}},
]

# A schemathesis run: dozens of requests per operation, validated against the document.
pytestmark = pytest.mark.process

EXAMPLES = 25
"""Generated requests per operation and mode (valid, invalid)."""

KEY: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory: pytest.TempPathFactory) -> Iterator[schemathesis.BaseSchema]:
    root = tmp_path_factory.mktemp("fuzz")
    # Unlimited: the fuzzer's own pace must not turn its requests into 429s.
    base = api_settings(root)
    app_settings = base.model_copy(update={"ratelimit": RateLimitSettings(enabled=False)})
    upgrade_database(app_settings.database_url)
    services = build_services(app_settings, store=InMemoryVectorStore(), queue=InMemoryJobQueue())
    try:
        KEY["value"] = default_tenant_key(services)
        app = create_app(app_settings, services=services)
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, config=with_key(KEY["value"]))
        # Some documents to find, so that hits and facets are generated too.
        # schemathesis types ASGI messages as dict, Starlette as MutableMapping.
        with schemathesis.python.asgi.get_client(app) as client:  # type: ignore[arg-type]
            resp = client.post("/v1/documents", json={"documents": DOCS}, headers=auth_headers())
            assert resp.status_code == 202, resp.text
            job = uuid.UUID(resp.json()["job_id"])
        assert services.indexing().process_job(job) == "succeeded"
        yield schema
    finally:
        services.close()


def auth_headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY['value']}"}


def with_key(key: str) -> schemathesis.Config:
    """Schemathesis configured to send ``key`` for the document's ``ApiKey`` scheme: it
    then knows the credential is valid and never counts it as the invalid part of a
    request."""
    return schemathesis.Config.from_dict({"auth": {"openapi": {"ApiKey": {"bearer": key}}}})


@schemathesis.serializer(*NDJSON_MEDIA_TYPES)
def ndjson(_ctx: schemathesis.SerializationContext, value: Any) -> bytes:
    """An NDJSON upload as generated: a string as it is, anything else one JSON line per
    item (the body's bytes: schemathesis sends them as the request's ``data``)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    items = value if isinstance(value, list) else [value]
    return "".join(json.dumps(item) + "\n" for item in items).encode()


def cases() -> list[Any]:
    """``(METHOD /path, mode)`` for every operation the app serves, read from its OpenAPI
    document (which needs no services: collection stays cheap); invalid requests only
    for operations that take any input."""
    document = create_app(api_settings(Path("unused"))).openapi()
    out = []
    for path, item in document["paths"].items():
        for method, op in item.items():
            label = f"{method.upper()} {path}"
            out.append(pytest.param(label, GenerationMode.POSITIVE, id=f"{label}-valid"))
            if op.get("parameters") or op.get("requestBody"):
                out.append(pytest.param(label, GenerationMode.NEGATIVE, id=f"{label}-invalid"))
    return out


@pytest.mark.parametrize(("label", "mode"), cases())
def test_the_api_keeps_its_contract(
    api_schema: schemathesis.BaseSchema, label: str, mode: GenerationMode
) -> None:
    operation = api_schema.find_operation_by_label(label)
    assert operation is not None, label

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def run(case: schemathesis.Case[Any]) -> None:
        statuses.append(case.call_and_validate(checks=CHECKS).status_code)

    statuses: list[int] = []
    run()
    assert statuses
    if mode is GenerationMode.POSITIVE:
        # The key was sent: no valid request was answered as anonymous (which would pass
        # every check while testing nothing behind the credential check). Invalid ones
        # include a missing or malformed credential on purpose.
        assert 401 not in statuses, sorted(set(statuses))
