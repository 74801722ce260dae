"""Hypothesis fuzzes ``POST /v1/search`` through the real app (JSON in, status out): any
query text, generated filter trees, JSON of any shape as a filter, deep nesting, numbers
past 64 bits. Every answer is a 200, or a 4xx in the error contract whose detail names
the field; never a 500. Bounded and derandomized, as test_fuzz_openapi.py."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
import schemathesis.python.asgi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hsearch.config import RateLimitSettings
from hsearch.db.migrate import upgrade_database
from hsearch.ingestion.queue import InMemoryJobQueue
from hsearch.runtime import build_services
from hsearch.search.planner import MAX_QUERY_CHARS
from hsearch.vectorstore.filters import MAX_DEPTH
from hsearch.vectorstore.in_memory import InMemoryVectorStore
from hsearch_api.main import create_app
from tests.unit.api.conftest import api_settings, default_tenant_key
from tests.unit.vectorstore.filter_strategies import filters, json_garbage

FIELD = re.compile(r"^(query|filter|top_k|offset|candidates|facets|request)\b")

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

texts = st.one_of(
    st.text(max_size=64),
    st.text(st.characters(max_codepoint=0x1F), max_size=8),
    st.builds(lambda n: "x" * n, st.integers(MAX_QUERY_CHARS - 1, MAX_QUERY_CHARS + 1)),
)
big_numbers = st.integers(min_value=-(10**40), max_value=10**40) | st.floats(
    allow_nan=False, allow_infinity=False
)
number_filters = st.builds(
    lambda field, op, value: {field: {op: value}},
    st.sampled_from(["created_at", "ordinal", "metadata.year"]),
    st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte"]),
    big_numbers,
)


def nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"source": {"eq": "x"}}
    for _ in range(depth):
        node = {"or": [node, {"not": {"lang": {"eq": "en"}}}]}
    return node


any_filter = (
    filters | json_garbage | number_filters | st.integers(MAX_DEPTH - 1, MAX_DEPTH + 30).map(nested)
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[requests.Session]:
    base = api_settings(tmp_path_factory.mktemp("fuzz-search"))
    app_settings = base.model_copy(update={"ratelimit": RateLimitSettings(enabled=False)})
    upgrade_database(app_settings.database_url)
    services = build_services(app_settings, store=InMemoryVectorStore(), queue=InMemoryJobQueue())
    try:
        key = default_tenant_key(services)
        app = create_app(app_settings, services=services)
        # schemathesis types ASGI messages as dict, Starlette as MutableMapping.
        with schemathesis.python.asgi.get_client(app) as c:  # type: ignore[arg-type]
            c.headers["Authorization"] = f"Bearer {key}"
            doc: dict[str, Any] = {
                "external_id": "a",
                "text": "Rivers run.",
                "metadata": {"year": 2020},
            }
            job = c.post("/v1/documents", json={"documents": [doc]}).json()["job_id"]
            services.indexing().process_job(uuid.UUID(job))
            yield c
    finally:
        services.close()


def answered_or_refused(client: requests.Session, body: dict[str, Any]) -> None:
    resp = client.post(
        "/v1/search", data=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert resp.status_code == 200 or 400 <= resp.status_code < 500, (body, resp.text)
    if resp.status_code != 200:
        error = resp.json()
        assert set(error) <= {"error", "detail", "errors"}, error
        assert FIELD.match(error["detail"]), error


@FUZZ
@given(text=texts)
def test_any_query_text(client: requests.Session, text: str) -> None:
    answered_or_refused(client, {"query": text})


@FUZZ
@given(filter=any_filter)
def test_any_filter(client: requests.Session, filter: object) -> None:
    answered_or_refused(client, {"query": "rivers", "filter": filter})
